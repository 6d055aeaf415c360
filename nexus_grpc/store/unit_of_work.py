"""The repositories of ``core.repositories`` on one connection, and the unit of
work that hands them to a transaction function.

Each table class binds the store module functions of its aggregate to the
connection of the transaction it was made for (``bound``): the functions stay
where the SQL is, and a repository method is the same call without the
connection. ``SqlUnitOfWork`` makes a repository the first time a function asks
for it. Both databases (``store/sqlite/database.py``, ``store/postgres/database.py``) hand a
``SqlUnitOfWork`` over their connection to every write and read; mypy checks
it against ``core.repositories.UnitOfWork``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any, Concatenate, ParamSpec, TypeVar

from nexus_grpc.core.repositories import InlineVectorRepository
from nexus_grpc.core.storage import Connection
from nexus_grpc.store import (
    documents,
    entity_merges,
    episodes,
    extraction_events,
    graph,
    graph_evidence,
    jobs,
    memories,
    memory_candidates,
    memory_history,
    meta,
    project_stats,
    projects,
    restore,
    savepoints,
    selections,
    sessions,
    summaries,
    usage,
)
from nexus_grpc.store.erasure import ErasureStore

P = ParamSpec("P")
R = TypeVar("R")


def bound(fn: Callable[Concatenate[Connection, P], R]) -> Callable[Concatenate[Any, P], R]:
    """``fn(conn, ...)`` as a method of a table: ``table.fn(...)`` on its connection."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return fn(self.conn, *args, **kwargs)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


class Table:
    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn


class ProjectTable(Table):
    """``ProjectRepository`` on one connection."""

    exists = bound(projects.exists)
    get = bound(projects.get)
    insert = bound(projects.insert)
    list_page = bound(projects.list_page)
    memory_formation = bound(projects.memory_formation)
    retention_of = bound(projects.retention_of)
    single_valued_labels = bound(projects.single_valued_labels)
    tenant_of = bound(projects.tenant_of)
    update = bound(projects.update)
    user_memory_owners = bound(projects.user_memory_owners)
    session_users = bound(projects.session_users)
    count_episodes = bound(project_stats.episodes)
    count_graph = bound(project_stats.graph)
    count_memories = bound(project_stats.memories)
    most_connected = bound(project_stats.most_connected)
    count_sessions = bound(project_stats.sessions)


class SessionTable(Table):
    """``SessionRepository`` on one connection."""

    delete = bound(sessions.delete)
    get = bound(sessions.get)
    get_by_external_id = bound(sessions.get_by_external_id)
    insert = bound(sessions.insert)
    list_page = bound(sessions.list_page)
    past_retention = bound(sessions.past_retention)
    project_session_ids = bound(sessions.project_session_ids)
    removal_targets = bound(sessions.removal_targets)
    task_memory_owners = bound(sessions.task_memory_owners)
    update = bound(sessions.update)
    user_session_ids = bound(sessions.user_session_ids)


class EpisodeTable(Table):
    """``EpisodeRepository`` on one connection."""

    backlog = bound(episodes.backlog)
    failed_extractions = bound(episodes.failed_extractions)
    find = bound(episodes.find)
    find_by_request_id = bound(episodes.find_by_request_id)
    formation_ahead = bound(episodes.formation_ahead)
    get = bound(episodes.get)
    get_many = bound(episodes.get_many)
    insert = bound(episodes.insert)
    insert_many = bound(episodes.insert_many)
    keyword_search = bound(episodes.keyword_search)
    keyword_matching = bound(episodes.keyword_matching)
    list_for_session = bound(episodes.list_for_session)
    list_page = bound(episodes.list_page)
    mark_indexed_before = bound(episodes.mark_indexed_before)
    occur_at_of = bound(episodes.occur_at_of)
    oldest_in_project = bound(episodes.oldest_in_project)
    past_retention = bound(episodes.past_retention)
    reset_failed_extractions = bound(episodes.reset_failed_extractions)
    retention_cutoff = bound(episodes.retention_cutoff)
    scope_of = bound(episodes.scope_of)
    scope_sample = bound(episodes.scope_sample)
    sessions_of = bound(episodes.sessions_of)
    set_embed_state = bound(episodes.set_embed_state)
    set_extract_state = bound(episodes.set_extract_state)
    set_memory_pending = bound(episodes.set_memory_pending)
    set_memory_state = bound(episodes.set_memory_state)
    snippets = bound(episodes.snippets)
    summary_progress = bound(episodes.summary_progress)


class MemoryTable(Table):
    """``MemoryRepository`` on one connection."""

    count_in_cap_scope = bound(memories.count_in_cap_scope)
    delete = bound(memories.delete)
    find = bound(memories.find)
    find_by_request_id = bound(memories.find_by_request_id)
    get = bound(memories.get)
    get_many = bound(memories.get_many)
    get_visible = bound(memories.get_visible)
    insert = bound(memories.insert)
    keyword_search = bound(memories.keyword_search)
    keyword_matching = bound(memories.keyword_matching)
    list_in_project = bound(memories.list_in_project)
    list_visible = bound(memories.list_visible)
    record_usage = bound(memories.record_usage)
    scope_sample = bound(memories.scope_sample)
    texts_of_owner = bound(memories.texts_of_owner)
    update = bound(memories.update)
    usage_by_memory = bound(memories.usage_by_memory)
    usage_by_owner = bound(memories.usage_by_owner)
    usage_by_thread = bound(memories.usage_by_thread)
    used_in_thread = bound(memories.used_in_thread)
    last = bound(memory_history.last)
    page = bound(memory_history.page)
    purge = bound(memory_history.purge)
    record = bound(memory_history.record)
    record_deletion = bound(memory_history.record_deletion)
    candidates_of = bound(memory_candidates.get)
    put_candidates = bound(memory_candidates.put)
    find_selection = bound(selections.find)
    insert_selection = bound(selections.insert)


class GraphTable(Table):
    """``GraphRepository`` on one connection."""

    add_alias = bound(graph.add_alias)
    add_distinction = bound(graph.add_distinction)
    aliases_in_project = bound(graph.aliases_in_project)
    block_candidates = bound(graph.block_candidates)
    candidate_rows = bound(graph.candidate_rows)
    current_facts = bound(graph.current_facts)
    delete_entity = bound(graph.delete_entity)
    entities_named = bound(graph.entities_named)
    entities_with_key = bound(graph.entities_with_key)
    entity_graph = bound(graph.entity_graph)
    entity_id_of = bound(graph.entity_id_of)
    episode_links_in_project = bound(graph.episode_links_in_project)
    get_entities = bound(graph.get_entities)
    get_entity = bound(graph.get_entity)
    get_relationships = bound(graph.get_relationships)
    insert_entity = bound(graph.insert_entity)
    list_aliases = bound(graph.list_aliases)
    list_entities = bound(graph.list_entities)
    list_relationships = bound(graph.list_relationships)
    mention = bound(graph.mention)
    neighborhood = bound(graph.neighborhood)
    neighbors = bound(graph.neighbors)
    rebuild_tokens = bound(graph.rebuild_tokens)
    recent_entities = bound(graph.recent_entities)
    recent_mentions = bound(graph.recent_mentions)
    refresh_display_name = bound(graph.refresh_display_name)
    relationship_at = bound(graph.relationship_at)
    relationships_in_project = bound(graph.relationships_in_project)
    resolution_candidates = bound(graph.resolution_candidates)
    set_resolution = bound(graph.set_resolution)
    add_evidence = bound(graph_evidence.add_evidence)
    delete_relationships = bound(graph_evidence.delete_relationships)
    drop_episode_evidence = bound(graph_evidence.drop_episode_evidence)
    evidence_in_project = bound(graph_evidence.evidence_in_project)
    evidence_of = bound(graph_evidence.evidence_of)
    groups_of = bound(graph_evidence.groups_of)
    write_intervals = bound(graph_evidence.write_intervals)
    add_mentions = bound(entity_merges.add_mentions)
    delete_entity_row = bound(entity_merges.delete_entity_row)
    get_merge = bound(entity_merges.get_merge)
    insert_merge = bound(entity_merges.insert_merge)
    list_merges = bound(entity_merges.list_merges)
    mark_undone = bound(entity_merges.mark_undone)
    merge_by_request = bound(entity_merges.merge_by_request)
    merges_after = bound(entity_merges.merges_after)
    move_aliases = bound(entity_merges.move_aliases)
    move_episode_links = bound(entity_merges.move_episode_links)
    move_evidence = bound(entity_merges.move_evidence)
    reinsert_entity = bound(entity_merges.reinsert_entity)
    restore_name_key = bound(entity_merges.restore_name_key)
    return_aliases = bound(entity_merges.return_aliases)
    return_episode_links = bound(entity_merges.return_episode_links)
    return_evidence = bound(entity_merges.return_evidence)
    set_notes = bound(entity_merges.set_notes)


class ExtractionEventTable(Table):
    """``ExtractionEventRepository`` on one connection."""

    any_for_episode = bound(extraction_events.any_for_episode)
    insert = bound(extraction_events.insert)
    page_after = bound(extraction_events.page_after)
    delete_before = bound(extraction_events.delete_before)


class SummaryTable(Table):
    """``SummaryRepository`` on one connection."""

    delete = bound(summaries.delete)
    find = bound(summaries.find)
    get = bound(summaries.get)
    insert = bound(summaries.insert)
    ids_of_session = bound(summaries.ids_of_session)
    latest_for_session = bound(summaries.latest_for_session)
    list_for_project = bound(summaries.list_for_project)
    list_for_session = bound(summaries.list_for_session)
    overview = bound(summaries.overview)
    past_retention = bound(summaries.past_retention)
    project_recent_episodes = bound(summaries.project_recent_episodes)
    project_session_summaries = bound(summaries.project_session_summaries)
    update = bound(summaries.update)


class JobTable(Table):
    """``JobRepository`` on one connection."""

    claim = bound(jobs.claim)
    dead_letter = bound(jobs.dead_letter)
    delete_created_before = bound(jobs.delete_created_before)
    depths = bound(jobs.depths)
    enqueue = bound(jobs.enqueue)
    finish = bound(jobs.finish)
    next_run_after = bound(jobs.next_run_after)
    pending_count = bound(jobs.pending_count)
    postpone = bound(jobs.postpone)
    postpone_pending = bound(jobs.postpone_pending)
    queued_targets = bound(jobs.queued_targets)
    renew = bound(jobs.renew)
    requeue_failed = bound(jobs.requeue_failed)
    reset_running = bound(jobs.reset_running)
    retry_later = bound(jobs.retry_later)
    schedule = bound(jobs.schedule)


class MetaTable(Table):
    """``MetaRepository`` on one connection."""

    get = bound(meta.get)
    probe = bound(meta.probe)
    put = bound(meta.put)
    touch = bound(meta.touch)


class DocumentTable(Table):
    """``DocumentRepository`` on one connection."""

    all_ids = bound(documents.all_ids)
    entities = bound(documents.entities)
    episodes = bound(documents.episodes)
    memories = bound(documents.memories)
    summaries = bound(documents.summaries)


class UsageTable(Table):
    """``UsageRepository`` on one connection."""

    insert = bound(usage.insert)
    spent = bound(usage.spent)
    spent_by_users = bound(usage.spent_by_users)
    stage_buckets = bound(usage.stage_buckets)
    activity_buckets = bound(usage.activity_buckets)
    job_owners = bound(usage.job_owners)
    defer_tenant_jobs = bound(usage.defer_tenant_jobs)
    deferred_jobs = bound(usage.deferred_jobs)
    resume_jobs = bound(usage.resume_jobs)


class NoInlineVectors(Table):
    """``InlineVectorRepository`` where vectors do not live beside the rows
    (SQLite: they live in Qdrant, written by index jobs); PostgreSQL's unit of
    work has its own (store/postgres/unit_of_work.py)."""

    def put(
        self, collection: str, row_id: int, vector: Sequence[float], payload: Mapping[str, Any]
    ) -> None:
        raise TypeError("vectors live beside the rows only on PostgreSQL")


class RestoreTable(Table):
    """``RestoreRepository`` on one connection."""

    ensure_own_alias = bound(restore.ensure_own_alias)
    insert_alias = bound(restore.insert_alias)
    insert_entity = bound(restore.insert_entity)
    insert_episode_link = bound(restore.insert_episode_link)
    insert_evidence = bound(restore.insert_evidence)
    insert_memory = bound(restore.insert_memory)
    insert_merge = bound(restore.insert_merge)
    insert_project = bound(restore.insert_project)
    insert_relationship = bound(restore.insert_relationship)
    insert_revision = bound(restore.insert_revision)
    insert_session = bound(restore.insert_session)
    insert_summary = bound(restore.insert_summary)


class SqlUnitOfWork:
    """``core.repositories.UnitOfWork`` on one connection of either database."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @cached_property
    def projects(self) -> ProjectTable:
        return ProjectTable(self.conn)

    @cached_property
    def sessions(self) -> SessionTable:
        return SessionTable(self.conn)

    @cached_property
    def episodes(self) -> EpisodeTable:
        return EpisodeTable(self.conn)

    @cached_property
    def memories(self) -> MemoryTable:
        return MemoryTable(self.conn)

    @cached_property
    def graph(self) -> GraphTable:
        return GraphTable(self.conn)

    @cached_property
    def events(self) -> ExtractionEventTable:
        return ExtractionEventTable(self.conn)

    @cached_property
    def summaries(self) -> SummaryTable:
        return SummaryTable(self.conn)

    @cached_property
    def jobs(self) -> JobTable:
        return JobTable(self.conn)

    @cached_property
    def usage(self) -> UsageTable:
        return UsageTable(self.conn)

    @cached_property
    def meta(self) -> MetaTable:
        return MetaTable(self.conn)

    @cached_property
    def documents(self) -> DocumentTable:
        return DocumentTable(self.conn)

    @cached_property
    def restore(self) -> RestoreTable:
        return RestoreTable(self.conn)

    @cached_property
    def vectors(self) -> InlineVectorRepository:
        return NoInlineVectors(self.conn)

    @cached_property
    def erasures(self) -> ErasureStore:
        return ErasureStore(self.conn)

    def savepoint(self, name: str) -> AbstractContextManager[None]:
        return savepoints.savepoint(self.conn, name)
