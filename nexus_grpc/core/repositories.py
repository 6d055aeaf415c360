"""The repositories the domain reaches the store through, and the unit of work
that hands them to one transaction (docs/architecture.md, "The store's seam").

The domain decides inside a unit of work: a synchronous function given a
``UnitOfWork``, which the store runs in one transaction (``Database.write``)
or a read (``Database.read``, ``read_in_transaction``), on its own thread.
Each repository is one aggregate's rows (projects, sessions, episodes,
memories, the graph, summaries, jobs) and what the service keeps beside them
(extraction events, the vector index's documents, facts about the database,
a restore's writes, an erasure's steps). The domain never sees SQL, a
connection or a store module: ``store/`` implements these Protocols
(``store/unit_of_work.py``) for SQLite and PostgreSQL, and mypy checks the
implementation against them; the unit tier runs the domain's rules on
in-memory fakes of them (``tests/fakes.py``), and ``tests/integration/store/
test_repository_contract.py`` runs the same cases on the fakes and both stores.

The Protocols are structural: a repository inherits nothing from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from nexus_grpc.core.erasure import (
    Alias,
    Counts,
    EpisodeFallout,
    Erasure,
    RemovalTargets,
    Target,
)
from nexus_grpc.core.graph import (
    CandidateRow,
    Entity,
    EntityAlias,
    EntityEpisode,
    EntityMerge,
    Evidence,
    Graph,
    Interval,
    Relationship,
    When,
)
from nexus_grpc.core.jobs import (
    Job,
    QueueDepth,
)
from nexus_grpc.core.llm_usage import ActivityBucket, LLMCall, StageBucket, WorkOwner
from nexus_grpc.core.models import (
    Backlog,
    Episode,
    JobState,
    MemoryScope,
    NewEpisode,
    Project,
    Session,
    SummaryProgress,
    TimeWindow,
)
from nexus_grpc.core.records import (
    ChangedBy,
    EventFilter,
    ExtractionEvent,
    Memory,
    MemoryUsage,
    Revision,
    SelectionAnswer,
    SelectionKey,
    Summary,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.core.vectors import (
    Document,
)


class ProjectRepository(Protocol):
    """Projects and what they hold."""

    def exists(self, project_id: int, tenant: str | None = ...) -> bool: ...

    def get(self, project_id: int, tenant: str | None = ...) -> Project: ...

    def insert(self, values: Mapping[str, Any], tenant: str = ...) -> Project: ...

    def list_page(
        self, after_id: int | None, limit: int, tenant: str | None = ...
    ) -> list[Project]: ...

    def memory_formation(self, project_id: int) -> int | None: ...

    def retention_of(self, project_id: int) -> float | None: ...

    def single_valued_labels(self, project_id: int) -> tuple[str, ...] | None: ...

    def tenant_of(self, project_id: int) -> str | None: ...

    def update(
        self, project_id: int, changes: Mapping[str, Any], tenant: str | None = ...
    ) -> Project: ...

    def user_memory_owners(self, project_id: int) -> dict[str, int]: ...

    def session_users(self, project_id: int) -> dict[str, int]: ...

    def count_episodes(self, project_id: int, cutoff: float | None) -> tuple[int, int, int]: ...

    def count_graph(self, project_id: int) -> tuple[int, int]: ...

    def count_memories(self, project_id: int, at: float) -> list[tuple[int, str, bool, int]]: ...

    def most_connected(self, project_id: int, limit: int) -> list[int]: ...

    def count_sessions(self, project_id: int, cutoff: float | None) -> int: ...


class SessionRepository(Protocol):
    """Sessions (a conversation, its user and agent)."""

    def delete(
        self, session_id: int, tenant: str | None = ..., *, user_task_memories: bool = ...
    ) -> int: ...

    def get(
        self, session_id: int, tenant: str | None = ..., *, retained_at: float | None = ...
    ) -> Session: ...

    def get_by_external_id(
        self, external_id: str, tenant: str | None = ..., *, retained_at: float | None = ...
    ) -> Session: ...

    def insert(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        tenant: str = ...,
        user_id: str = ...,
        agent_id: str = ...,
    ) -> Session: ...

    def list_page(
        self,
        after_id: int | None,
        limit: int,
        project_id: int,
        tenant: str | None = ...,
        *,
        retained_at: float | None = ...,
    ) -> list[Session]: ...

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]: ...

    def project_session_ids(self, project_id: int) -> list[int]: ...

    def removal_targets(
        self, session_ids: Sequence[int], *, user_task_memories: bool = ...
    ) -> RemovalTargets: ...

    def task_memory_owners(self, session_id: int) -> dict[str, int]: ...

    def update(
        self, session_id: int, changes: Mapping[str, Any], tenant: str | None = ...
    ) -> Session: ...

    def user_session_ids(self, project_id: int, user_id: str) -> list[int]: ...


class EpisodeRepository(Protocol):
    """Episodes, their job states and their keyword index."""

    def backlog(self, session_ids: Sequence[int]) -> Backlog: ...

    def failed_extractions(self, tenant: str) -> list[tuple[int, str]]: ...

    def find(self, episode_id: int) -> Episode | None: ...

    def find_by_request_id(self, session_id: int, request_id: str) -> Episode | None: ...

    def formation_ahead(self, episode: Episode) -> int | None: ...

    def get(self, episode_id: int, tenant: str | None = ...) -> Episode: ...

    def get_many(self, ids: Sequence[int]) -> dict[int, Episode]: ...

    def insert(
        self,
        session_id: int,
        user_message: str,
        ai_response: str,
        metadata: Mapping[str, Any],
        request_id: str | None,
        occur_at: float | None = ...,
        *,
        embedded: bool = ...,
        acts_for: str = ...,
    ) -> Episode: ...

    def insert_many(self, rows: Sequence[NewEpisode], *, extracted: bool = ...) -> list[int]: ...

    def keyword_search(
        self,
        match: str,
        session_ids: Sequence[int] | None,
        limit: int,
        window: TimeWindow | None = ...,
    ) -> list[tuple[int, float]]: ...

    def list_for_session(
        self, session_id: int, after_id: int = ..., limit: int = ..., *, since: float | None = ...
    ) -> list[Episode]: ...

    def list_page(
        self, session_id: int, before_id: int | None, limit: int, since: float | None = ...
    ) -> list[Episode]: ...

    def mark_indexed_before(self, before: float) -> None: ...

    def occur_at_of(self, episode_id: int) -> float | None: ...

    def oldest_in_project(self, project_id: int) -> float | None: ...

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]: ...

    def reset_failed_extractions(self) -> list[int]: ...

    def retention_cutoff(self, session_id: int, at: float) -> float | None: ...

    def scope_of(self, episode_id: int) -> tuple[int, int] | None: ...

    def scope_sample(self, session_ids: Sequence[int], limit: int) -> list[str]: ...

    def sessions_of(self, ids: Sequence[int]) -> dict[int, int]: ...

    def set_embed_state(self, ids: Sequence[int], state: JobState, error: str = ...) -> None: ...

    def set_extract_state(self, episode_id: int, state: JobState, error: str = ...) -> None: ...

    def set_memory_pending(self, ids: Sequence[int]) -> None: ...

    def set_memory_state(
        self, episode_id: int, state: JobState | None, error: str = ...
    ) -> None: ...

    def snippets(self, match: str, ids: Sequence[int]) -> dict[int, str]: ...

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]: ...

    def summary_progress(
        self, session_id: int, enough_episodes: int, enough_chars: int
    ) -> SummaryProgress: ...


class MemoryRepository(Protocol):
    """Memories, their history, their usage, formation's candidates and selections' answers."""

    def count_in_cap_scope(
        self, kind: int, project_id: int, agent_id: str, user_id: str, tenant: str
    ) -> int: ...

    def delete(self, memory_id: int) -> None: ...

    def find(self, memory_id: int) -> Memory | None: ...

    def find_by_request_id(self, tenant: str, user_id: str, request_id: str) -> Memory | None: ...

    def get(self, memory_id: int) -> Memory: ...

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]: ...

    def get_visible(
        self, ids: Sequence[int], scope: MemoryScope, *, at: float | None = ...
    ) -> dict[int, Memory]: ...

    def insert(
        self,
        values: Mapping[str, Any],
        request_id: str | None,
        tenant: str,
    ) -> Memory: ...

    def keyword_search(
        self, match: str, scope: MemoryScope, limit: int, *, at: float | None = ...
    ) -> list[tuple[Memory, float]]: ...

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]: ...

    def list_in_project(
        self, project_id: int, tenant: str | None, after_id: int | None, limit: int, at: float
    ) -> list[Memory]: ...

    def list_visible(
        self,
        scope: MemoryScope,
        *,
        at: float | None = ...,
        kind: int = ...,
        after_id: int | None = ...,
        limit: int = ...,
        newest_first: bool = ...,
    ) -> list[Memory]: ...

    def record_usage(
        self, thread_id: str, owner: UsageOwner, context: str, used: Sequence[UsageRecord]
    ) -> dict[int, Memory]: ...

    def scope_sample(
        self, scope: MemoryScope, limit: int, *, at: float | None = ...
    ) -> list[str]: ...

    def texts_of_owner(
        self,
        *,
        kind: int,
        project_id: int,
        agent_id: str,
        user_id: str,
        tier: int,
        session_id: int | None,
        tenant: str,
        containing: Sequence[str] = (),
    ) -> list[tuple[int, str, str]]: ...

    def update(self, memory_id: int, changes: Mapping[str, Any]) -> Memory: ...

    def usage_by_memory(
        self, memory_id: int, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]: ...

    def usage_by_owner(
        self, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]: ...

    def usage_by_thread(
        self, thread_id: str, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]: ...

    def used_in_thread(self, thread_id: str, owner: UsageOwner, ids: Sequence[int]) -> set[int]: ...

    def last(self, memory_id: int) -> Revision | None: ...

    def page(self, memory_id: int, after_id: int | None, limit: int) -> list[Revision]: ...

    def purge(self, memory_ids: Sequence[int], at: float) -> int: ...

    def record(
        self,
        previous: Memory,
        action: int,
        changed: Sequence[str],
        by: ChangedBy,
        purge_after: float | None = ...,
        at: float | None = ...,
    ) -> None: ...

    def record_deletion(
        self, previous: Memory, by: ChangedBy, purge_after: float, action: int = ...
    ) -> None: ...

    def candidates_of(self, episode_id: int) -> list[dict[str, Any]] | None: ...

    def put_candidates(self, episode_id: int, candidates: list[dict[str, Any]]) -> None: ...

    def find_selection(self, key: SelectionKey) -> tuple[str, SelectionAnswer] | None: ...

    def insert_selection(self, key: SelectionKey, digest: str, answer: SelectionAnswer) -> None: ...


class GraphRepository(Protocol):
    """Entities, their aliases, relationships with their evidence, and merges."""

    def add_alias(
        self,
        entity_id: int,
        surface: str,
        *,
        method: str,
        score: float = ...,
        episode_id: int | None = ...,
        refresh: bool = ...,
        at: float | None = ...,
    ) -> bool: ...

    def add_distinction(self, a: int, b: int, episode_id: int | None = ...) -> None: ...

    def aliases_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[EntityAlias]: ...

    def block_candidates(
        self, graph: Graph, blocks: Iterable[str], types: Iterable[str], *, limit: int
    ) -> list[CandidateRow]: ...

    def candidate_rows(self, ids: Iterable[int]) -> list[CandidateRow]: ...

    def current_facts(
        self, entity_ids: Sequence[int], limit: int
    ) -> list[tuple[str, str, str, float | None]]: ...

    def delete_entity(self, entity_id: int) -> int: ...

    def entities_named(
        self, project_id: int, session_id: int, keys: Sequence[str], limit: int
    ) -> list[Entity]: ...

    def entities_with_key(self, graph: Graph, key: str, types: Iterable[str]) -> list[int]: ...

    def entity_graph(self, entity_id: int, tenant: str | None = ...) -> tuple[int, int] | None: ...

    def entity_id_of(
        self, key: str, etype: str, project_id: int, session_id: int
    ) -> int | None: ...

    def episode_links_in_project(
        self, project_id: int, after: tuple[int, int] | None, limit: int
    ) -> list[tuple[int, int]]: ...

    def get_entities(self, ids: Sequence[int], tenant: str | None = ...) -> dict[int, Entity]: ...

    def get_entity(self, entity_id: int, tenant: str | None = ...) -> Entity: ...

    def get_relationships(self, ids: Sequence[int]) -> list[Relationship]: ...

    def insert_entity(
        self,
        graph: Graph,
        surface: str,
        etype: str,
        notes: str | None,
        *,
        source: str,
        method: str = ...,
        episode_id: int | None = ...,
        confidence: float | None = ...,
        fallback_tenant: str = ...,
        resolution: str = ...,
    ) -> int: ...

    def list_aliases(
        self, entity_id: int, after_id: int | None, limit: int
    ) -> list[EntityAlias]: ...

    def list_entities(
        self,
        etype: str,
        project_id: int,
        after_id: int | None,
        limit: int,
        session_id: int = ...,
        tenant: str | None = ...,
        keys: Sequence[str] = ...,
    ) -> list[Entity]: ...

    def list_relationships(
        self,
        entity_id: int,
        include_inbound: bool,
        after_id: int | None = ...,
        limit: int = ...,
        when: When = ...,
    ) -> list[Relationship]: ...

    def mention(
        self,
        entity_id: int,
        notes: str | None,
        *,
        episode_id: int | None = ...,
        confidence: float | None = ...,
    ) -> None: ...

    def neighborhood(
        self, entity_id: int, depth: int, when: When = ...
    ) -> tuple[list[Entity], list[Relationship]]: ...

    def neighbors(
        self, entity_ids: Sequence[int], when: When = ...
    ) -> tuple[list[Entity], list[Relationship]]: ...

    def rebuild_tokens(self, entity_id: int) -> None: ...

    def recent_entities(
        self, project_id: int, limit: int, session_id: int = ...
    ) -> list[Entity]: ...

    def recent_mentions(self, entity_id: int, limit: int) -> list[str]: ...

    def refresh_display_name(self, entity_id: int) -> None: ...

    def relationship_at(
        self, from_id: int, to_id: int, label: str, at: float
    ) -> Relationship | None: ...

    def relationships_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Relationship]: ...

    def resolution_candidates(
        self, graph: Graph, keys: Iterable[str], words: Iterable[str], *, word_limit: int
    ) -> list[CandidateRow]: ...

    def set_resolution(self, entity_id: int, state: str) -> None: ...

    def add_evidence(
        self,
        from_id: int,
        to_id: int,
        label: str,
        kind: str,
        at: float,
        *,
        episode_id: int | None = ...,
        notes: str | None = ...,
        mentions: int = ...,
    ) -> int: ...

    def delete_relationships(self, from_id: int, to_id: int, label: str) -> int: ...

    def drop_episode_evidence(self, episode_id: int) -> set[tuple[int, str]]: ...

    def evidence_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Evidence]: ...

    def evidence_of(self, from_id: int, label: str) -> list[Evidence]: ...

    def groups_of(self, entity_ids: Sequence[int]) -> set[tuple[int, str]]: ...

    def write_intervals(self, from_id: int, label: str, intervals: Sequence[Interval]) -> None: ...

    def add_mentions(self, entity_id: int, count: int, notes: str | None = ...) -> None: ...

    def delete_entity_row(self, entity_id: int) -> None: ...

    def get_merge(self, merge_id: int, tenant: str | None = ...) -> EntityMerge: ...

    def insert_merge(self, m: EntityMerge) -> int: ...

    def list_merges(
        self,
        graph: Graph | None,
        entity_id: int,
        after_id: int | None,
        limit: int,
        tenant: str | None,
    ) -> list[EntityMerge]: ...

    def mark_undone(self, merge_id: int) -> None: ...

    def merge_by_request(self, tenant: str, request_id: str) -> EntityMerge | None: ...

    def merges_after(self, merge: EntityMerge) -> list[EntityMerge]: ...

    def move_aliases(self, source_id: int, target_id: int) -> list[str]: ...

    def move_episode_links(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]: ...

    def move_evidence(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]: ...

    def reinsert_entity(self, e: Entity) -> int: ...

    def restore_name_key(self, entity_id: int) -> None: ...

    def return_aliases(self, target_id: int, source_id: int, names: Sequence[str]) -> None: ...

    def return_episode_links(
        self, target_id: int, source_id: int, moved: Sequence[int], shared: Sequence[int]
    ) -> None: ...

    def return_evidence(
        self, source_id: int, from_ids: Sequence[int], to_ids: Sequence[int]
    ) -> None: ...

    def set_notes(self, entity_id: int, notes: str | None) -> None: ...


class ExtractionEventRepository(Protocol):
    """The extraction events WatchExtractions replays."""

    def any_for_episode(self, episode_id: int, tenant: str | None = ...) -> bool: ...

    def insert(
        self,
        episode_id: int,
        session_id: int,
        project_id: int,
        status: int,
        error: str = ...,
        payload: dict[str, Any] | None = ...,
    ) -> int: ...

    def page_after(
        self, after_id: int, where: EventFilter, limit: int
    ) -> list[ExtractionEvent]: ...

    def delete_before(self, cutoff: float, limit: int) -> int: ...


class SummaryRepository(Protocol):
    """Session summaries and project overviews."""

    def delete(
        self, summary_id: int, tenant: str | None = ..., *, retained_at: float | None = ...
    ) -> None: ...

    def find(
        self, summary_id: int, tenant: str | None = ..., *, retained_at: float | None = ...
    ) -> Summary | None: ...

    def get(
        self, summary_id: int, tenant: str | None = ..., *, retained_at: float | None = ...
    ) -> Summary: ...

    def insert(
        self,
        *,
        session_id: int,
        project_id: int,
        content: str,
        first_episode_id: int = ...,
        last_episode_id: int = ...,
        episode_count: int = ...,
    ) -> Summary: ...

    def ids_of_session(self, session_id: int) -> list[int]: ...

    def latest_for_session(
        self, session_id: int, *, retained_at: float | None = ...
    ) -> Summary | None: ...

    def list_for_project(
        self, project_id: int, after_id: int | None, limit: int, *, retained_at: float | None = ...
    ) -> list[Summary]: ...

    def list_for_session(
        self, session_id: int, after_id: int | None, limit: int, *, retained_at: float | None = ...
    ) -> list[Summary]: ...

    def overview(self, project_id: int, *, retained_at: float | None = ...) -> Summary | None: ...

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]: ...

    def project_recent_episodes(
        self, project_id: int, limit: int, *, since: float | None = ...
    ) -> list[tuple[int, str, str]]: ...

    def project_session_summaries(
        self, project_id: int, *, retained_at: float | None = ...
    ) -> list[Summary]: ...

    def update(
        self,
        summary_id: int,
        changes: Mapping[str, Any],
        tenant: str | None = ...,
        *,
        retained_at: float | None = ...,
    ) -> Summary: ...


class JobRepository(Protocol):
    """The durable jobs outbox."""

    def claim(
        self, kind: str, limit: int, lease: float = ..., *, served: Sequence[str] = ...
    ) -> list[Job]: ...

    def dead_letter(self, job_id: int, error: str) -> bool: ...

    def delete_created_before(self, kind: str, before: float) -> int: ...

    def depths(self) -> list[QueueDepth]: ...

    def enqueue(
        self,
        kind: str,
        target_ids: Iterable[int],
        *,
        run_after: float | None = ...,
        priority: int = ...,
    ) -> None: ...

    def finish(self, job_ids: Sequence[int]) -> None: ...

    def next_run_after(self, kind: str) -> float | None: ...

    def pending_count(self, kind: str) -> int: ...

    def postpone(self, job_id: int, error: str, delay: float) -> None: ...

    def postpone_pending(self, kind: str, error: str, until: float) -> None: ...

    def queued_targets(self, kind: str) -> set[int]: ...

    def renew(self, job_ids: Sequence[int], lease: float = ...) -> None: ...

    def requeue_failed(self, kind: str, target_id: int | None = ...) -> int: ...

    def reset_running(self) -> int: ...

    def retry_later(self, job_id: int, error: str, delay: float) -> None: ...

    def schedule(
        self, kind: str, target_id: int, at: float, *, keep_sooner: bool = ...
    ) -> None: ...


class UsageRepository(Protocol):
    """The LLM's account (a row per call), and what a tenant's budget reads
    and holds: its spend (and its users'), and its LLM jobs."""

    def insert(self, calls: Sequence[LLMCall]) -> None: ...

    def spent(self, since: float, tenants: Sequence[str] | None = ...) -> dict[str, int]: ...

    def spent_by_users(
        self, since: float, tenant: str, users: Sequence[str] | None = ...
    ) -> dict[str, int]: ...

    def stage_buckets(
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = ...,
        project_id: int | None = ...,
        users: Sequence[str] | None = ...,
    ) -> list[StageBucket]: ...

    def activity_buckets(
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = ...,
        project_id: int | None = ...,
        users: Sequence[str] | None = ...,
    ) -> list[ActivityBucket]: ...

    def job_owners(self, kind: str, target_ids: Sequence[int]) -> dict[int, WorkOwner]: ...

    def defer_tenant_jobs(
        self, kind: str, tenant: str, until: float, error: str, user_id: str = ...
    ) -> list[Job]: ...

    def deferred_jobs(
        self, kind: str, saying: str, after: float, after_id: int = ...
    ) -> list[Job]: ...

    def resume_jobs(self, job_ids: Sequence[int], at: float) -> None: ...


class MetaRepository(Protocol):
    """Facts about the database itself."""

    def get(self, key: str) -> str | None: ...

    def probe(self) -> int: ...

    def put(self, key: str, value: str) -> None: ...

    def touch(self, at: float) -> None: ...


class DocumentRepository(Protocol):
    """The texts the vector index is built from."""

    def all_ids(self, table: str) -> set[int]: ...

    def entities(self, ids: Sequence[int]) -> dict[int, Document]: ...

    def episodes(self, ids: Sequence[int]) -> dict[int, Document]: ...

    def memories(self, ids: Sequence[int]) -> dict[int, Document]: ...

    def summaries(self, ids: Sequence[int]) -> dict[int, Document]: ...


class InlineVectorRepository(Protocol):
    """Vectors stored beside their rows (pgvector), in the row's own transaction."""

    def put(
        self, collection: str, row_id: int, vector: Sequence[float], payload: Mapping[str, Any]
    ) -> None: ...


class RestoreRepository(Protocol):
    """A restore's writes, with the times and counters the export carried."""

    def ensure_own_alias(self, entity_ids: Sequence[int]) -> None: ...

    def insert_alias(self, a: EntityAlias) -> None: ...

    def insert_entity(self, e: Entity, tenant: str) -> int: ...

    def insert_episode_link(self, entity_id: int, episode_id: int) -> None: ...

    def insert_evidence(self, e: Evidence) -> int: ...

    def insert_memory(self, m: Memory, tenant: str) -> int: ...

    def insert_merge(self, m: EntityMerge) -> int: ...

    def insert_project(
        self,
        values: Mapping[str, Any],
        created_at: float,
        updated_at: float,
        tenant: str,
    ) -> int: ...

    def insert_relationship(self, r: Relationship) -> int: ...

    def insert_revision(self, r: Revision) -> None: ...

    def insert_session(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        created_at: float,
        tenant: str,
        user_id: str = ...,
        agent_id: str = ...,
    ) -> int: ...

    def insert_summary(self, s: Summary) -> int: ...


class ErasureRepository(Protocol):
    """What an erasure needs of the store (domain/erasure.py, docs/privacy.md)."""

    def start(self, target: Target, digest: str, principal: str) -> Erasure: ...

    def get(self, erasure_id: int) -> Erasure | None: ...

    def digest_of(self, erasure_id: int) -> str: ...

    def running_for(self, tenant: str, digest: str) -> list[Erasure]: ...

    def page(
        self, tenant: str | None, digest: str | None, before_id: int | None, limit: int
    ) -> list[Erasure]: ...

    def save(self, erasure: Erasure) -> None: ...

    def forgotten(self, tenant: str) -> dict[str, float]: ...

    def bury_requests(self, digests: Iterable[str], erasure_id: int) -> None: ...

    def buried(self, digest: str) -> int | None: ...

    def user_sessions(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = ...
    ) -> list[int]: ...

    def episodes_in_sessions(
        self, session_ids: Sequence[int], limit: int, after: int = ...
    ) -> list[int]: ...

    def user_episodes_elsewhere(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = ...
    ) -> list[int]: ...

    def user_memories(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = ...
    ) -> list[int]: ...

    def user_usage(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = ...
    ) -> list[MemoryUsage]: ...

    def graph_of_episodes(
        self, ids: Sequence[int]
    ) -> tuple[list[EntityEpisode], list[EntityAlias], list[Evidence], list[int]]: ...

    def user_holds(self, tenant: str, user_id: str, project_id: int) -> Counts: ...

    def users_in_project(self, project_id: int) -> list[str]: ...

    def user_rows_before(
        self, project_id: int, user_id: str, before: float
    ) -> tuple[list[int], list[int], list[int]]: ...

    def project_sessions(self, project_id: int, limit: int) -> list[int]: ...

    def project_memories(self, project_id: int, limit: int) -> list[int]: ...

    def project_entities(self, project_id: int, limit: int) -> list[int]: ...

    def project_holds(self, project_id: int) -> Counts: ...

    def mark_project_deleting(self, project_id: int, erasure_id: int) -> None: ...

    def delete_project_row(self, project_id: int) -> int: ...

    def episode_fallout(self, ids: Sequence[int]) -> EpisodeFallout: ...

    def episode_requests(self, ids: Sequence[int]) -> list[tuple[str, int, str]]: ...

    def memories_formed_from(self, episode_ids: Sequence[int]) -> list[int]: ...

    def aliases_still_given(
        self, aliases: Sequence[Alias], gone: Sequence[int]
    ) -> dict[int, int]: ...

    def last_names(self, aliases: Sequence[Alias], gone: Sequence[int]) -> dict[int, int]: ...

    def give_alias(self, alias_id: int, episode_id: int) -> None: ...

    def delete_aliases(self, alias_ids: Sequence[int]) -> int: ...

    def delete_episodes(self, ids: Sequence[int], *, whole_sessions: bool) -> Counts: ...

    def delete_sessions(self, ids: Sequence[int]) -> Counts: ...

    def delete_memories(self, ids: Sequence[int]) -> Counts: ...

    def memory_request_ids(self, ids: Sequence[int]) -> list[tuple[str, str, str]]: ...

    def events_naming_memories(
        self, memory_ids: Sequence[int]
    ) -> list[tuple[int, dict[str, Any]]]: ...

    def rewrite_event(self, event_id: int, payload: dict[str, Any]) -> None: ...

    def count_facts(self, groups: Iterable[tuple[int, str]]) -> int: ...

    def unsupported_entities(self, ids: Sequence[int]) -> list[int]: ...

    def delete_entities(self, ids: Sequence[int]) -> Counts: ...

    def clear_entity_notes(self, ids: Sequence[int]) -> None: ...

    def drop_merges_touching(self, entity_ids: Sequence[int]) -> int: ...

    def sessions_summarised_since(self, first_seen: dict[int, tuple[int, float]]) -> list[int]: ...

    def overviews_since(self, since: dict[int, float]) -> list[int]: ...

    def sessions_with_episodes(self, session_ids: Sequence[int]) -> list[int]: ...

    def delete_user_usage(self, tenant: str, user_id: str, project_id: int) -> int: ...

    def delete_user_selections(self, tenant: str, user_id: str, project_id: int) -> int: ...

    def unlink_llm_calls(self, tenant: str, user_id: str, project_id: int) -> int: ...

    def delete_project_records(self, project_id: int) -> Counts: ...

    def index_work_before(self, at: float) -> int: ...


class UnitOfWork(Protocol):
    """One transaction's view of the store: a repository per aggregate. What
    a function given it does commits together or not at all."""

    @property
    def projects(self) -> ProjectRepository: ...

    @property
    def sessions(self) -> SessionRepository: ...

    @property
    def episodes(self) -> EpisodeRepository: ...

    @property
    def memories(self) -> MemoryRepository: ...

    @property
    def graph(self) -> GraphRepository: ...

    @property
    def events(self) -> ExtractionEventRepository: ...

    @property
    def summaries(self) -> SummaryRepository: ...

    @property
    def jobs(self) -> JobRepository: ...

    @property
    def usage(self) -> UsageRepository: ...

    @property
    def meta(self) -> MetaRepository: ...

    @property
    def documents(self) -> DocumentRepository: ...

    @property
    def restore(self) -> RestoreRepository: ...

    @property
    def vectors(self) -> InlineVectorRepository: ...

    @property
    def erasures(self) -> ErasureRepository: ...

    def savepoint(self, name: str) -> AbstractContextManager[None]:
        """A nested transaction: what the block did rolls back alone when it
        raises (an import item that fails, while the others are written)."""
        ...
