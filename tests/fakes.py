"""In-memory fakes of the repositories (core/repositories.py), for the unit tier.

The unit tier runs the domain's rules on these: no SQLite, no PostgreSQL, no
thread hop. Each fake keeps the rows of its aggregate in dicts and answers as
the store does for the methods the unit tier's rules use; a method it lacks
raises AttributeError (the rule then needs a whole-server test, or the fake a
new method). ``tests/integration/store/test_repository_contract.py`` runs the same cases
on these fakes and on both real stores, so a fake cannot drift from the store
it stands for.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from nexus_grpc.core import erasure as erasure_steps
from nexus_grpc.core import jobs as job_kinds
from nexus_grpc.core import tenancy
from nexus_grpc.core.documents import (
    entity_payload,
    entity_text,
    episode_payload,
    memory_payload,
    memory_text,
)
from nexus_grpc.core.erasure import Alias, Counts, EpisodeFallout, Erasure, RemovalTargets, Target
from nexus_grpc.core.graph import (
    CURRENT,
    METHOD_NEW,
    RESOLVED,
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
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import ActivityBucket, LLMCall, StageBucket, WorkOwner
from nexus_grpc.core.models import (
    Backlog,
    Episode,
    JobState,
    MemoryKind,
    MemoryScope,
    NewEpisode,
    Project,
    Session,
    SummaryProgress,
    Tier,
    TimeWindow,
    episode_text,
)
from nexus_grpc.core.names import best_display, display_form, index_tokens, name_key
from nexus_grpc.core.records import (
    DELETE,
    ChangedBy,
    EventFilter,
    ExtractionEvent,
    Memory,
    MemoryUsage,
    Revision,
    SelectionAnswer,
    SelectionKey,
    SelectionPick,
    Summary,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.core.vectors import Document, VectorTableMissing
from nexus_grpc.domain import memory_visibility
from nexus_grpc.errors import AlreadyExists, NotFound
from nexus_grpc.store.episodes import CONTEXT_CHARS
from nexus_grpc.store.keyword_scoring import K1, match_words, scope_idf
from nexus_grpc.store.projects import COLUMNS as PROJECT_COLUMNS
from nexus_grpc.store.projects import name_taken as project_name_taken
from nexus_grpc.store.restore import RESTORE_KEEPS_NAME
from nexus_grpc.store.selections import KEEP_SECONDS
from nexus_grpc.store.usage import DEFER_SWEEP


def _ids() -> Iterator[int]:
    """Ids from 1, as a table's; copied with the rest by a savepoint."""
    return itertools.count(1)


# -- the keyword index (episodes' and memories' keyword_search, keyword_matching, snippets)

#: A token as both stores cut text (FTS5's unicode61, PostgreSQL's parser): a
#: run of letters and digits, lower-cased; "_" and punctuation separate.
_TOKEN = re.compile(r"[^\W_]+")
#: Tokens a snippet shows around its first hit (FTS5's snippet() is given 16).
SNIPPET_TOKENS = 16


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _phrases(match: str) -> list[tuple[str, ...]]:
    """The query's quoted words, each as its tokens (a word the domain kept
    whole, such as "a_b", is a phrase of two), those with none left out."""
    return [p for p in (tuple(_tokens(w)) for w in match_words(match)) if p]


def _holds_phrase(tokens: Sequence[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(tokens[i : i + n]) == phrase for i in range(len(tokens) - n + 1))


def _keyword_ranked(
    columns: Mapping[int, Sequence[tuple[str, float]]],
    phrases: Sequence[tuple[str, ...]],
    total: int,
    limit: int,
) -> list[tuple[int, float]]:
    """SQLite's ranking (store/sqlite/keyword_search.py) of the rows ``columns``
    gives (id -> (text, weight) per column): each phrase's weight in a row is
    the sum of the weights of the columns holding it, saturated as BM25 does
    (k1 = 1.2), times its IDF in the scope of ``total`` rows; best first,
    newest first among equals."""
    held = {
        i: [sum(w for text, w in cols if _holds_phrase(_tokens(text), p)) for p in phrases]
        for i, cols in columns.items()
    }
    idf = [scope_idf(total, sum(1 for h in held.values() if h[n])) for n in range(len(phrases))]
    scored = [
        (i, sum(idf[n] * w * (K1 + 1.0) / (w + K1) for n, w in enumerate(h) if w))
        for i, h in held.items()
        if any(h)
    ]
    return sorted(scored, key=lambda s: (-s[1], -s[0]))[:limit]


def _snippet(text: str, phrases: Sequence[tuple[str, ...]]) -> tuple[str, bool]:
    """``text`` with each phrase it holds in [ and ], cut to SNIPPET_TOKENS
    tokens from just before the first hit ("…" where it was cut); and whether
    it held one. A text of SNIPPET_TOKENS tokens or fewer is shown whole, as
    both stores show it."""
    spans = [m.span() for m in _TOKEN.finditer(text)]
    tokens = [text[a:b].lower() for a, b in spans]
    hit = [False] * len(tokens)
    for p in phrases:
        for i in range(len(tokens) - len(p) + 1):
            if tuple(tokens[i : i + len(p)]) == p:
                hit[i : i + len(p)] = [True] * len(p)
    first = hit.index(True) if any(hit) else 0
    start = (
        0 if len(tokens) <= SNIPPET_TOKENS else max(0, min(first - 2, len(tokens) - SNIPPET_TOKENS))
    )
    end = min(len(tokens), start + SNIPPET_TOKENS)
    out, at = [], 0 if start == 0 else spans[start][0]
    for i in range(start, end):
        a, b = spans[i]
        out.append(text[at:a] + (f"[{text[a:b]}]" if hit[i] else text[a:b]))
        at = b
    tail = text[at:] if end == len(tokens) else "…"
    return ("…" if start else "") + "".join(out) + tail, any(hit)


class FakeProjects:
    """Projects, and the erasure deleting each one being deleted
    (``deleting``): from then on no read sees it (nor its sessions and their
    episodes), and its name is its tenant's to take again."""

    def __init__(self) -> None:
        self.rows: dict[int, Project] = {}
        self.deleting: dict[int, int] = {}
        self._next = _ids()
        # Set by FakeUnitOfWork (the owners and figures read memories,
        # sessions, their episodes and the graph).
        self.memories: FakeMemories
        self.sessions: FakeSessions
        self.graph: FakeGraph

    def insert(self, values: Mapping[str, Any], tenant: str = DEFAULT_TENANT) -> Project:
        held = [p.id for p in self.rows.values() if (p.tenant, p.name) == (tenant, values["name"])]
        if held:
            raise project_name_taken(values["name"], held[0])
        at = time.time()
        labels = values.get("single_valued_labels")
        project = Project(
            id=next(self._next),
            name=values.get("name", ""),
            description=values.get("description", ""),
            colour=values.get("colour", ""),
            icon=values.get("icon", ""),
            notes=values.get("notes", ""),
            system_prompt=values.get("system_prompt", ""),
            created_at=at,
            updated_at=at,
            retention=values.get("retention"),
            single_valued_labels=tuple(labels) if labels else None,
            memory_formation=values.get("memory_formation"),
            tenant=tenant,
        )
        self.rows[project.id] = project
        return project

    def _live(self, project_id: int) -> Project | None:
        return None if project_id in self.deleting else self.rows.get(project_id)

    def get(self, project_id: int, tenant: str | None = None) -> Project:
        project = self._live(project_id)
        if project is None or (tenant is not None and project.tenant != tenant):
            raise NotFound(
                f"project {project_id} does not exist",
                resource_type="project",
                resource_name=project_id,
            )
        return project

    def list_page(
        self, after_id: int | None, limit: int, tenant: str | None = None
    ) -> list[Project]:
        return [
            p
            for _, p in sorted(self.rows.items())
            if p.id > (after_id or 0) and tenant in (None, p.tenant) and p.id not in self.deleting
        ][:limit]

    def update(
        self, project_id: int, changes: Mapping[str, Any], tenant: str | None = None
    ) -> Project:
        """As the store's: a rename to a name the tenant holds is refused,
        naming the project that holds it."""
        project = self.get(project_id, tenant)
        name = changes.get("name", project.name)
        held = [p.id for p in self.rows.values() if (p.tenant, p.name) == (project.tenant, name)]
        if name != project.name and held:
            raise project_name_taken(name, held[0])
        if changes:
            values = {c: v for c, v in changes.items() if c in PROJECT_COLUMNS}
            if "single_valued_labels" in values:
                labels = values["single_valued_labels"]
                values["single_valued_labels"] = tuple(labels) if labels else None
            self.rows[project_id] = replace(project, **values, updated_at=time.time())
        return self.rows[project_id]

    def user_memory_owners(self, project_id: int) -> dict[str, int]:
        found: dict[str, int] = {}
        for m in self.memories.rows.values():
            if m.project_id == project_id and m.kind == MemoryKind.USER:
                found[m.user_id] = found.get(m.user_id, 0) + 1
        return found

    def session_users(self, project_id: int) -> dict[str, int]:
        found: dict[str, int] = {}
        for session in self.sessions.rows.values():
            if project_id and session.project_id == project_id and session.user_id:
                found[session.user_id] = found.get(session.user_id, 0) + 1
        return found

    def exists(self, project_id: int, tenant: str | None = None) -> bool:
        project = self._live(project_id)
        return project is not None and (tenant is None or project.tenant == tenant)

    def tenant_of(self, project_id: int) -> str | None:
        project = self._live(project_id)
        return None if project is None else project.tenant

    def memory_formation(self, project_id: int) -> int | None:
        project = self.rows.get(project_id)
        return None if project is None else project.memory_formation

    def single_valued_labels(self, project_id: int) -> tuple[str, ...] | None:
        project = self.rows.get(project_id)
        return None if project is None else project.single_valued_labels

    def retention_of(self, project_id: int) -> float | None:
        project = self.rows.get(project_id)
        return None if project is None else project.retention

    # -- its figures (store/project_stats.py): every user counted

    def count_sessions(self, project_id: int, cutoff: float | None) -> int:
        """With a retention ``cutoff``: those created since it or holding an
        episode that happened since it."""
        return sum(
            1
            for x in self.sessions.rows.values()
            if x.project_id == project_id
            and (cutoff is None or x.created_at >= cutoff or self._since(x.id, cutoff))
        )

    def _since(self, session_id: int, cutoff: float) -> bool:
        return any(
            e.session_id == session_id and e.occur_at >= cutoff
            for e in self.sessions.episodes.rows.values()
        )

    def count_episodes(self, project_id: int, cutoff: float | None) -> tuple[int, int, int]:
        """(episodes, pieces of work pending, pieces failed): embedding,
        extraction and formation each count once."""
        mine = [
            e
            for e in self.sessions.episodes.rows.values()
            if (x := self.sessions.rows.get(e.session_id)) is not None
            and project_id
            and x.project_id == project_id
            and (cutoff is None or e.occur_at >= cutoff)
        ]
        states = [s for e in mine for s in (e.embed_state, e.extract_state, e.memory_state)]
        return len(mine), states.count(JobState.PENDING), states.count(JobState.FAILED)

    def count_memories(self, project_id: int, at: float) -> list[tuple[int, str, bool, int]]:
        """(kind, user, archived, count) per (kind, user, tier) of the project's
        live PROJECT and USER memories (a set: the store's GROUP BY has no order)."""
        groups: dict[tuple[int, str, int], int] = {}
        for m in self.memories.rows.values():
            if (
                m.project_id == project_id
                and m.kind in (MemoryKind.PROJECT, MemoryKind.USER)
                and (m.expire_at is None or m.expire_at > at)
            ):
                key = (int(m.kind), m.user_id, int(m.tier))
                groups[key] = groups.get(key, 0) + 1
        return [(k, u, t == Tier.ARCHIVE, n) for (k, u, t), n in sorted(groups.items())]

    def _graph_ids(self, project_id: int) -> list[int]:
        return sorted(
            i
            for i, e in self.graph.entities.items()
            if (e.project_id, e.session_id) == (project_id, 0)
        )

    def count_graph(self, project_id: int) -> tuple[int, int]:
        """(entities, facts that hold now) of the project's graph."""
        ids = set(self._graph_ids(project_id))
        facts = sum(
            1
            for r in self.graph.relationships.values()
            if r.from_id in ids and r.invalid_at is None
        )
        return len(ids), facts

    def most_connected(self, project_id: int, limit: int) -> list[int]:
        """By relationships (every interval, either end), most first, ties by id."""
        rows = self.graph.relationships.values()

        def degree(i: int) -> int:
            return sum((r.from_id == i) + (r.to_id == i) for r in rows)

        return sorted(self._graph_ids(project_id), key=lambda i: (-degree(i), i))[:limit]


class FakeSessions:
    def __init__(self) -> None:
        self.rows: dict[int, Session] = {}
        self._next = _ids()
        # Set by FakeUnitOfWork (retention reads the project and the episodes).
        self.projects: FakeProjects
        self.episodes: FakeEpisodes
        self.memories: FakeMemories
        # Set by FakeUnitOfWork too (a session's delete takes its summaries and own graph).
        self.summaries: FakeSummaries
        self.graph: FakeGraph

    def insert(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        tenant: str = DEFAULT_TENANT,
        user_id: str = "",
        agent_id: str = "",
    ) -> Session:
        if any(s.external_id == external_id and s.tenant == tenant for s in self.rows.values()):
            raise AlreadyExists(f"a session with external_id {external_id!r} already exists")
        session = Session(
            id=next(self._next),
            external_id=external_id,
            name=name,
            project_id=project_id,
            metadata=dict(metadata),
            created_at=time.time(),
            tenant=tenant,
            user_id=user_id,
            agent_id=agent_id,
        )
        self.rows[session.id] = session
        return session

    def _mine(self, session: Session, tenant: str | None, retained_at: float | None) -> bool:
        """The tenant's (any, for None), not in a project being deleted, and
        (given ``retained_at``) not past its project's retention then."""
        return (
            (tenant is None or session.tenant == tenant)
            and session.project_id not in self.projects.deleting
            and not (retained_at is not None and self.past(session, retained_at))
        )

    def past(self, session: Session, at: float, cutoff: float | None = None) -> bool:
        """As the store's (sessions._retained): created before its project's
        retention cutoff, with no episode since. ``cutoff``: that one instead."""
        if cutoff is None:
            project = self.projects.rows.get(session.project_id)
            if project is None or project.retention is None:
                return False
            cutoff = at - project.retention
        return session.created_at < cutoff and not any(
            e.session_id == session.id and e.occur_at >= cutoff for e in self.episodes.rows.values()
        )

    def get(
        self, session_id: int, tenant: str | None = None, *, retained_at: float | None = None
    ) -> Session:
        session = self.rows.get(session_id)
        if session is None or not self._mine(session, tenant, retained_at):
            raise NotFound(
                f"session {session_id} does not exist",
                resource_type="session",
                resource_name=session_id,
            )
        return session

    def get_by_external_id(
        self, external_id: str, tenant: str | None = None, *, retained_at: float | None = None
    ) -> Session:
        for session in sorted(self.rows.values(), key=lambda s: s.id):
            if session.external_id == external_id and self._mine(session, tenant, retained_at):
                return session
        raise NotFound(
            f"session with external_id {external_id!r} does not exist",
            resource_type="session",
            resource_name=external_id,
        )

    def list_page(
        self,
        after_id: int | None,
        limit: int,
        project_id: int,
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> list[Session]:
        found = [
            s
            for s in sorted(self.rows.values(), key=lambda s: s.id)
            if s.id > (after_id or 0)
            and (not project_id or s.project_id == project_id)
            and self._mine(s, tenant, retained_at)
        ]
        return found[:limit]

    def project_session_ids(self, project_id: int) -> list[int]:
        return [s.id for s in self.rows.values() if project_id and s.project_id == project_id]

    def user_session_ids(self, project_id: int, user_id: str) -> list[int]:
        return [
            s.id
            for s in self.rows.values()
            if project_id and (s.project_id, s.user_id) == (project_id, user_id)
        ]

    def update(
        self, session_id: int, changes: Mapping[str, Any], tenant: str | None = None
    ) -> Session:
        session = self.get(session_id, tenant)
        for column in changes:
            if column not in ("name", "project_id", "metadata"):
                raise ValueError(f"not an updatable session column: {column}")
        values = dict(changes)
        if "project_id" in values:
            values["project_id"] = values["project_id"] or 0
        if "metadata" in values:
            values["metadata"] = dict(values["metadata"])
        self.rows[session_id] = replace(session, **values)
        return self.rows[session_id]

    def task_memory_owners(self, session_id: int) -> dict[str, int]:
        """The session's TASK-tier USER memories, counted by user."""
        found: dict[str, int] = {}
        for m in self.memories.rows.values():
            if (m.session_id, m.tier, m.kind) == (session_id, Tier.TASK, MemoryKind.USER):
                found[m.user_id] = found.get(m.user_id, 0) + 1
        return found

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        found = sorted(
            s.id
            for s in self.rows.values()
            if project_id and s.project_id == project_id and self.past(s, 0.0, cutoff)
        )
        return found[:limit]

    def _task_memories(self, session_ids: set[int], user_task_memories: bool) -> list[int]:
        return sorted(
            m.id
            for m in self.memories.rows.values()
            if m.session_id in session_ids
            and m.tier == Tier.TASK
            and (user_task_memories or m.kind == MemoryKind.PROJECT)
        )

    def _own_graph(self, session_ids: set[int]) -> list[int]:
        return sorted(
            e.id
            for e in self.graph.entities.values()
            if e.project_id == 0 and e.session_id in session_ids
        )

    def removal_targets(
        self, session_ids: Sequence[int], *, user_task_memories: bool = True
    ) -> RemovalTargets:
        """As the store's: what deleting these sessions takes that has a point."""
        wanted = {int(i) for i in session_ids}
        episodes = self.episodes.rows.values()
        return RemovalTargets(
            episodes=tuple(sorted(e.id for e in episodes if e.session_id in wanted)),
            summaries=tuple(sorted(r.id for r in self.summaries.rows.values()
                                   if r.session_id in wanted)),
            entities=tuple(self._own_graph(wanted)),
            memories=tuple(self._task_memories(wanted, user_task_memories)),
        )  # fmt: skip

    def delete(
        self, session_id: int, tenant: str | None = None, *, user_task_memories: bool = True
    ) -> int:
        """As the store's: the session, its own graph (edges and evidence by
        cascade), its TASK-tier memories with their history (``user_task_memories``
        False: the PROJECT ones only), and by cascade its episodes and
        summaries. Returns how many episodes went."""
        self.get(session_id, tenant)
        graph = set(self._own_graph({session_id}))
        for entity_id in graph:
            del self.graph.entities[entity_id]
        for rows in (self.graph.evidence, self.graph.relationships):
            for i in [i for i, r in rows.items() if {r.from_id, r.to_id} & graph]:
                del rows[i]
        for memory_id in self._task_memories({session_id}, user_task_memories):
            self.memories.delete(memory_id)
            for revision in [r for r in self.memories.history.values() if r.memory_id == memory_id]:
                del self.memories.history[revision.id]
        episodes = [i for i, e in self.episodes.rows.items() if e.session_id == session_id]
        for episode_id in episodes:
            del self.episodes.rows[episode_id]
            self.episodes.request_ids.pop(episode_id, None)
        for summary_id in [i for i, r in self.summaries.rows.items() if r.session_id == session_id]:
            del self.summaries.rows[summary_id]
        del self.rows[session_id]
        return len(episodes)


class FakeEpisodes:
    """Episodes and their job states, in their sessions' tenants and projects.

    The keyword index (``keyword_search``, ``keyword_matching``, ``snippets``)
    is a plain one: an episode is found by its own turns and by its
    neighbouring turns' text (the previous answer's last CONTEXT_CHARS
    characters and the next question's first, as the store's ``context``),
    ranked as SQLite ranks (``_keyword_ranked``: BM25 with the scope's IDF).
    Its words are the stores' tokens lower-cased, never stemmed and never
    folded to ASCII: both stores stem English words (FTS5's porter, PostgreSQL's
    snowball, which differ in places) and SQLite folds diacritics; the fake
    does neither, so neither the contract (test_repository_contract_keyword.py)
    nor a unit test uses an inflected form of a query word or an accent.
    Neither store drops stop words (the domain leaves them out of a query).
    Exact scores are the fake's own: only what is matched, the scope, the
    limit and a clear-cut order are the stores'. A snippet is
    the text shown whole up to SNIPPET_TOKENS tokens (longer: cut around the
    first hit), each hit in [ and ]. A project being deleted
    (FakeProjects.deleting) hides its sessions' episodes from ``get``, and
    keeps none of them by ``retention_cutoff``.
    """

    def __init__(self, sessions: FakeSessions, jobs: FakeJobs) -> None:
        self.rows: dict[int, Episode] = {}
        self.request_ids: dict[int, str | None] = {}
        self._sessions = sessions
        self._jobs = jobs
        self._next = _ids()
        # Set by FakeUnitOfWork (the summaries are made after the episodes).
        self.summaries: FakeSummaries | None = None

    def insert(
        self,
        session_id: int,
        user_message: str,
        ai_response: str,
        metadata: Mapping[str, Any],
        request_id: str | None,
        occur_at: float | None = None,
        *,
        embedded: bool = False,
        acts_for: str = "",
    ) -> Episode:
        row = NewEpisode(
            session_id, user_message, ai_response, metadata, request_id, occur_at,
            acts_for=acts_for,
        )  # fmt: skip
        [episode_id] = self._insert([row], embedded=embedded)
        return self.rows[episode_id]

    def insert_many(self, rows: Sequence[NewEpisode], *, extracted: bool = False) -> list[int]:
        return self._insert(rows, extracted=extracted)

    def _insert(
        self, rows: Sequence[NewEpisode], *, extracted: bool = False, embedded: bool = False
    ) -> list[int]:
        at = time.time()
        made = []
        for row in rows:
            self._sessions.get(row.session_id)
            episode = Episode(
                id=next(self._next),
                session_id=row.session_id,
                user_message=row.user_message,
                ai_response=row.ai_response,
                metadata=dict(row.metadata),
                created_at=at if row.created_at is None else row.created_at,
                occur_at=at if row.occur_at is None else row.occur_at,
                embed_state=JobState.DONE if embedded else JobState.PENDING,
                extract_state=JobState.DONE if extracted else JobState.PENDING,
                acts_for=row.acts_for,
            )
            self.rows[episode.id] = episode
            self.request_ids[episode.id] = row.request_id or None
            made.append(episode.id)
        return made

    def get_many(self, ids: Sequence[int]) -> dict[int, Episode]:
        return {i: self.rows[i] for i in ids if i in self.rows}

    def set_memory_pending(self, ids: Sequence[int]) -> None:
        for i in ids:
            self.set_memory_state(i, JobState.PENDING)

    def summary_progress(
        self, session_id: int, enough_episodes: int, enough_chars: int
    ) -> SummaryProgress:
        """As the store's: new episodes are those after the last one a summary
        of the session covers; the characters are the session's first turns'."""
        if self._jobs.pending_job(job_kinds.SUMMARIZE_SESSION, session_id) is not None:
            return SummaryProgress(True, 0, 0)
        summaries = [] if self.summaries is None else self.summaries.rows.values()
        covered = max(
            (r.last_episode_id for r in summaries if r.session_id == session_id), default=0
        )
        mine = self._of_session(session_id)
        new = min(sum(1 for e in mine if e.id > covered), enough_episodes)
        if new < enough_episodes:
            return SummaryProgress(False, new, 0)
        first = mine[: enough_chars + 1]
        return SummaryProgress(
            False, new, sum(len(e.user_message) + len(e.ai_response) for e in first)
        )

    def find(self, episode_id: int) -> Episode | None:
        return self.rows.get(episode_id)

    def get(
        self, episode_id: int, tenant: str | None = None, *, retained_at: float | None = None
    ) -> Episode:
        episode = self.rows.get(episode_id)
        if episode is not None and tenant is not None:
            session = self._sessions.rows[episode.session_id]
            if session.tenant != tenant or session.project_id in self._sessions.projects.deleting:
                episode = None
        if episode is None:
            raise NotFound(
                f"episode {episode_id} does not exist",
                resource_type="episode",
                resource_name=episode_id,
            )
        return episode

    def find_by_request_id(self, session_id: int, request_id: str) -> Episode | None:
        for episode_id, rid in self.request_ids.items():
            episode = self.rows[episode_id]
            if rid == request_id and episode.session_id == session_id:
                return episode
        return None

    def set_extract_state(self, episode_id: int, state: JobState, error: str = "") -> None:
        episode = self.rows[episode_id]
        self.rows[episode_id] = replace(episode, extract_state=state, extract_error=error[:2000])

    def set_memory_state(self, episode_id: int, state: JobState | None, error: str = "") -> None:
        episode = self.rows[episode_id]
        self.rows[episode_id] = replace(episode, memory_state=state, memory_error=error)

    def failed_extractions(self, tenant: str) -> list[tuple[int, str]]:
        found = []
        for episode in sorted(self.rows.values(), key=lambda e: e.id):
            session = self._sessions.rows[episode.session_id]
            if episode.extract_state == JobState.FAILED and session.tenant == tenant:
                found.append((episode.id, session.user_id))
        return found

    def _of_session(self, session_id: int) -> list[Episode]:
        return [self.rows[i] for i in sorted(self.rows) if self.rows[i].session_id == session_id]

    def _of_project(self, project_id: int) -> list[Episode]:
        sessions = set(self._sessions.project_session_ids(project_id))
        return [self.rows[i] for i in sorted(self.rows) if self.rows[i].session_id in sessions]

    def list_for_session(
        self,
        session_id: int,
        after_id: int = 0,
        limit: int = 10_000,
        *,
        since: float | None = None,
    ) -> list[Episode]:
        """Oldest first; ``since``: none that happened before it."""
        return [
            e
            for e in self._of_session(session_id)
            if e.id > after_id and (since is None or e.occur_at >= since)
        ][:limit]

    def list_page(
        self, session_id: int, before_id: int | None, limit: int, since: float | None = None
    ) -> list[Episode]:
        """Newest first, below ``before_id``."""
        return [
            e
            for e in reversed(self._of_session(session_id))
            if (before_id is None or e.id < before_id) and (since is None or e.occur_at >= since)
        ][:limit]

    def sessions_of(self, ids: Sequence[int]) -> dict[int, int]:
        return {i: self.rows[i].session_id for i in ids if i in self.rows}

    def scope_of(self, episode_id: int) -> tuple[int, int] | None:
        episode = self.rows.get(episode_id)
        session = None if episode is None else self._sessions.rows.get(episode.session_id)
        return None if session is None else (session.id, session.project_id or 0)

    def occur_at_of(self, episode_id: int) -> float | None:
        episode = self.rows.get(episode_id)
        return None if episode is None else episode.occur_at

    def oldest_in_project(self, project_id: int) -> float | None:
        return min((e.occur_at for e in self._of_project(project_id)), default=None)

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        return [e.id for e in self._of_project(project_id) if e.occur_at < cutoff][:limit]

    def retention_cutoff(self, session_id: int, at: float) -> float | None:
        """The oldest occur_at the session's project keeps at ``at``; None: all.
        A project being deleted keeps nothing (infinity)."""
        session = self._sessions.rows.get(session_id)
        project = None if session is None else self._sessions.projects.rows.get(session.project_id)
        if project is not None and project.id in self._sessions.projects.deleting:
            return math.inf
        return None if project is None or project.retention is None else at - project.retention

    def scope_sample(self, session_ids: Sequence[int], limit: int) -> list[str]:
        """The texts of up to ``limit`` of these sessions' newest episodes."""
        wanted = set(session_ids)
        newest = [self.rows[i] for i in sorted(self.rows, reverse=True)]
        return [f"{e.user_message}\n{e.ai_response}" for e in newest if e.session_id in wanted][
            :limit
        ]

    def backlog(self, session_ids: Sequence[int]) -> Backlog:
        wanted = set(session_ids)
        mine = [e for e in self.rows.values() if e.session_id in wanted]
        return Backlog(
            len(mine),
            sum(1 for e in mine if e.embed_state == JobState.PENDING),
            sum(1 for e in mine if e.extract_state == JobState.PENDING),
            sum(1 for e in mine if e.memory_state == JobState.PENDING),
        )

    def formation_ahead(self, episode: Episode) -> int | None:
        """An episode of the same session that happened earlier (or at the same
        time and was stored first) and still waits for its formation. The
        store names any one of them (its query has no order): this, the first."""
        for e in self._of_session(episode.session_id):
            if e.memory_state == JobState.PENDING and (e.occur_at, e.id) < (
                episode.occur_at,
                episode.id,
            ):
                return e.id
        return None

    def set_embed_state(self, ids: Sequence[int], state: JobState, error: str = "") -> None:
        for i in ids:
            if i in self.rows:
                self.rows[i] = replace(self.rows[i], embed_state=state, embed_error=error[:2000])

    def mark_indexed_before(self, before: float) -> None:
        """After a full rebuild: every episode made by ``before`` is indexed."""
        for i, e in self.rows.items():
            if e.created_at <= before:
                self.rows[i] = replace(e, embed_state=JobState.DONE, embed_error="")

    def reset_failed_extractions(self) -> list[int]:
        """Every failed extraction pending again; their ids."""
        failed = sorted(i for i, e in self.rows.items() if e.extract_state == JobState.FAILED)
        for i in failed:
            self.rows[i] = replace(self.rows[i], extract_state=JobState.PENDING, extract_error="")
        return failed

    # -- the keyword index

    def _columns(self, episode: Episode) -> list[tuple[str, float]]:
        """What keyword search reads of an episode, weighted as the stores
        weigh it: its own turns 1.0 each, its neighbouring turns 0.5."""
        mine = self._of_session(episode.session_id)
        before = [e for e in mine if e.id < episode.id]
        after = [e for e in mine if e.id > episode.id]
        context = (
            (before[-1].ai_response[-CONTEXT_CHARS:] if before else "")
            + "\n"
            + (after[0].user_message[:CONTEXT_CHARS] if after else "")
        )
        return [(episode.user_message, 1.0), (episode.ai_response, 1.0), (context, 0.5)]

    def keyword_search(
        self,
        match: str,
        session_ids: Sequence[int] | None,
        limit: int,
        window: TimeWindow | None = None,
    ) -> list[tuple[int, float]]:
        """(episode id, score with higher better), best first: the episodes of
        ``session_ids`` (every session's, when None) that occurred inside
        ``window``, the IDF counted over them."""
        phrases = _phrases(match)
        if not phrases or (session_ids is not None and not session_ids):
            return []
        wanted = None if session_ids is None else set(session_ids)
        scope = [
            e
            for e in self.rows.values()
            if (wanted is None or e.session_id in wanted)
            and (window is None or window.holds(e.occur_at))
        ]
        columns = {e.id: self._columns(e) for e in scope}
        return _keyword_ranked(columns, phrases, len(scope), limit)

    def _matches(self, match: str, ids: Sequence[int]) -> list[Episode]:
        phrases = _phrases(match)
        return [
            self.rows[i]
            for i in dict.fromkeys(ids)
            if i in self.rows
            and any(
                _holds_phrase(_tokens(text), p)
                for text, _ in self._columns(self.rows[i])
                for p in phrases
            )
        ]

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` that ``match`` matches (in the episode or its
        neighbouring turns), however they would rank."""
        return {e.id for e in self._matches(match, ids)}

    def snippets(self, match: str, ids: Sequence[int]) -> dict[int, str]:
        """The matching text of each id that matches: the user message's when
        it holds a hit or the answer holds none, else the answer's."""
        phrases = _phrases(match)
        out = {}
        for e in self._matches(match, ids):
            user, in_user = _snippet(e.user_message, phrases)
            answer, in_answer = _snippet(e.ai_response, phrases)
            out[e.id] = user if in_user or not in_answer else answer
        return out


@dataclass
class FakeJob:
    kind: str
    target_id: int
    run_after: float
    priority: int
    state: str = "pending"
    id: int = 0
    last_error: str = ""
    tenant: str = ""
    attempts: int = 0
    created_at: float = 0.0


class FakeJobs:
    def __init__(self, projects: FakeProjects, sessions: FakeSessions) -> None:
        self.rows: list[FakeJob] = []
        self._projects = projects
        self._sessions = sessions
        # Set by FakeUnitOfWork (the episodes are made after the jobs).
        self.episodes: FakeEpisodes | None = None
        self.memories: FakeMemories | None = None
        self.summaries: FakeSummaries | None = None
        self._next = _ids()

    def tenant_of(self, kind: str, target_id: int) -> str:
        """As the store's (store/jobs.TENANT_OF): the tenant of the job's
        target, '' when it is gone; the kinds whose targets these fakes do
        not hold (entities, erasures) answer ''."""
        session_id: int | None = None
        if kind in (
            job_kinds.INDEX_MEMORY,
            job_kinds.EXPIRE_MEMORY,
            job_kinds.PURGE_MEMORY_HISTORY,
        ):
            memory = None if self.memories is None else self.memories.rows.get(target_id)
            return "" if memory is None else memory.tenant
        if kind == job_kinds.INDEX_SUMMARY and self.summaries is not None:
            summary = self.summaries.find(target_id)
            return "" if summary is None else self.summaries.tenant_of(summary) or ""
        if kind in (job_kinds.INDEX_EPISODE, job_kinds.EXTRACT_EPISODE, job_kinds.FORM_MEMORIES):
            episode = None if self.episodes is None else self.episodes.rows.get(target_id)
            session_id = None if episode is None else episode.session_id
        elif kind == job_kinds.SUMMARIZE_SESSION:
            session_id = target_id
        elif kind == job_kinds.RETAIN_PROJECT:
            return self._projects.tenant_of(target_id) or ""
        session = None if session_id is None else self._sessions.rows.get(session_id)
        return "" if session is None else session.tenant

    def enqueue(
        self,
        kind: str,
        target_ids: Iterable[int],
        *,
        run_after: float | None = None,
        priority: int = job_kinds.LIVE,
    ) -> None:
        """As the store's: one pending job per (kind, target), the sooner due
        time and the more urgent priority kept, in its target's tenant."""
        due = time.time() if run_after is None else run_after
        for target in target_ids:
            pending = self.pending_job(kind, target)
            if pending is None:
                self.rows.append(
                    FakeJob(
                        kind,
                        int(target),
                        due,
                        priority,
                        id=next(self._next),
                        tenant=self.tenant_of(kind, int(target)),
                        created_at=time.time(),
                    )
                )
            else:
                pending.run_after = min(pending.run_after, due)
                pending.priority = min(pending.priority, priority)

    def schedule(self, kind: str, target_id: int, at: float, *, keep_sooner: bool = False) -> None:
        """As the store's: a pending job moves to ``at`` (``keep_sooner``: unless
        it is due sooner), or one is queued for then."""
        pending = self.pending_job(kind, target_id)
        if pending is None:
            self.enqueue(kind, [target_id], run_after=at)
        elif not (keep_sooner and pending.run_after < at):
            pending.run_after = at

    def claim(
        self,
        kind: str,
        limit: int,
        lease: float = job_kinds.LEASE_SECONDS,
        *,
        served: Sequence[str] = (),
    ) -> list[job_kinds.Job]:
        """As the store's (core/jobs.py's claim order): at each priority, the
        tenants' oldest due jobs in turn, the least recently served (or never
        served) tenant first, then their second oldest, and so on."""
        now = time.time()
        running = {(j.kind, j.target_id) for j in self.rows if j.state == "running"}
        lanes: dict[tuple[int, str], list[FakeJob]] = {}
        for job in sorted(self.rows, key=lambda j: (j.run_after, j.id)):
            if (
                job.kind == kind
                and job.state == "pending"
                and job.run_after <= now
                and (kind, job.target_id) not in running
            ):
                lanes.setdefault((job.priority, job.tenant), []).append(job)
        turn = {tenant: n for n, tenant in enumerate(served)}

        def order(ranked: tuple[int, FakeJob]) -> tuple[Any, ...]:
            rank, job = ranked
            never = job.tenant not in turn
            return (job.priority, rank, not never, turn.get(job.tenant, 0), job.run_after, job.id)

        candidates = [(rank, job) for lane in lanes.values() for rank, job in enumerate(lane)]
        taken = [job for _, job in sorted(candidates, key=order)[:limit]]
        for job in taken:
            job.state = "running"
        return [
            job_kinds.Job(j.id, j.kind, j.target_id, j.attempts, j.priority, j.tenant)
            for j in taken
        ]

    def finish(self, job_ids: Sequence[int]) -> None:
        done = set(job_ids)
        self.rows = [j for j in self.rows if j.id not in done]

    def renew(self, job_ids: Sequence[int], lease: float = job_kinds.LEASE_SECONDS) -> None:
        """As SQLite's: one process per file, so no lease to extend (a
        running job stays running until it is finished or sent back)."""

    def reset_running(self) -> int:
        """As SQLite's: after a restart, running jobs run again, one kept
        where the same work is queued twice."""
        running = [j for j in self.rows if j.state == "running"]
        for job in running:
            if any(
                (o.kind, o.target_id) == (job.kind, job.target_id)
                and o.id != job.id
                and (o.state == "pending" or (o.state == "running" and o.id > job.id))
                for o in self.rows
            ):
                self.rows.remove(job)
        back = [j for j in self.rows if j.state == "running"]
        for job in back:
            job.state = "pending"
        return len(back)

    def next_run_after(self, kind: str) -> float | None:
        due = [j.run_after for j in self.rows if j.kind == kind and j.state == "pending"]
        return min(due) if due else None

    def _covered_by_pending(self, job_id: int) -> bool:
        """As the store's: a job whose work was queued again meanwhile goes."""
        job = next((j for j in self.rows if j.id == job_id), None)
        if job is None or self.pending_job(job.kind, job.target_id) is None:
            return False
        self.rows.remove(job)
        return True

    def _back_to_pending(self, job_id: int, error: str, delay: float, spend: bool) -> None:
        if self._covered_by_pending(job_id):
            return
        for job in self.rows:
            if job.id == job_id:
                job.state, job.run_after = "pending", time.time() + delay
                job.attempts += 1 if spend else 0
                job.last_error = error[:2000]

    def retry_later(self, job_id: int, error: str, delay: float) -> None:
        self._back_to_pending(job_id, error, delay, spend=True)

    def postpone(self, job_id: int, error: str, delay: float) -> None:
        self._back_to_pending(job_id, error, delay, spend=False)

    def postpone_pending(self, kind: str, error: str, until: float) -> None:
        for job in self.rows:
            if job.kind == kind and job.state == "pending":
                job.run_after, job.last_error = max(job.run_after, until), error[:2000]

    def dead_letter(self, job_id: int, error: str) -> bool:
        if self._covered_by_pending(job_id):
            return False
        for job in self.rows:
            if job.id == job_id:
                job.state, job.attempts, job.last_error = "failed", job.attempts + 1, error[:2000]
        return True

    def requeue_failed(self, kind: str, target_id: int | None = None) -> int:
        """As the store's: dead-lettered jobs pending again (attempts from
        zero), one per target, none where the target has a pending job."""

        def failed() -> list[FakeJob]:
            return [
                j
                for j in self.rows
                if j.kind == kind
                and j.state == "failed"
                and (not target_id or j.target_id == target_id)
            ]

        newest: dict[int, int] = {}
        for job in self.rows:
            if job.kind == kind and job.state == "failed":
                newest[job.target_id] = max(newest.get(job.target_id, 0), job.id)
        for job in failed():
            if job.id != newest[job.target_id] or self.pending_job(kind, job.target_id):
                self.rows.remove(job)
        back = failed()
        for job in back:
            job.state, job.attempts, job.run_after = "pending", 0, time.time()
        return len(back)

    def pending_count(self, kind: str) -> int:
        return sum(1 for j in self.rows if j.kind == kind and j.state in ("pending", "running"))

    def depths(self) -> list[job_kinds.QueueDepth]:
        at = time.time()
        found = []
        for kind in job_kinds.ALL_KINDS:
            mine = [j for j in self.rows if j.kind == kind]
            waiting = [
                j.run_after if kind in job_kinds.SCHEDULED_KINDS else j.created_at
                for j in mine
                if j.state != "failed"
            ]
            found.append(
                job_kinds.QueueDepth(
                    kind,
                    sum(1 for j in mine if j.state in ("pending", "running")),
                    sum(1 for j in mine if j.state == "failed"),
                    max(0.0, at - min(waiting)) if waiting else 0.0,
                )
            )
        return found

    def delete_created_before(self, kind: str, before: float) -> int:
        gone = [j for j in self.rows if j.kind == kind and j.created_at <= before]
        self.rows = [j for j in self.rows if j not in gone]
        return len(gone)

    def queued_targets(self, kind: str) -> set[int]:
        return {j.target_id for j in self.rows if j.kind == kind and j.state != "failed"}

    def pending_job(self, kind: str, target_id: int) -> FakeJob | None:
        return next(
            (
                j
                for j in self.rows
                if j.kind == kind and j.target_id == target_id and j.state == "pending"
            ),
            None,
        )

    def pending(self, kind: str) -> list[int]:
        """Targets with a pending job of ``kind`` (a fake's own view, for tests)."""
        return sorted(j.target_id for j in self.rows if j.kind == kind and j.state == "pending")


class FakeGraph:
    """Entities, aliases, tokens, episode links, distinctions, relationships,
    evidence and merges, each a dict or set of rows as the store's tables
    hold them. Deleting an entity cascades as the foreign keys do; the edge
    trigger (an edge never joins two graphs) is the store's alone.

    Set by FakeUnitOfWork: the projects and sessions (an entity's tenant),
    the episodes (recent mentions, returned episode links).
    """

    def __init__(self) -> None:
        self.entities: dict[int, Entity] = {}
        self.name_keys: dict[int, str] = {}
        self.aliases: dict[int, EntityAlias] = {}
        # An alias row's own (project_id, session_id), written when it was made.
        self.alias_graphs: dict[int, Graph] = {}
        self.tokens: set[tuple[int, int, str, str, int]] = set()
        self.episode_links: set[tuple[int, int]] = set()
        self.distinctions: set[tuple[int, int]] = set()
        # The episode that said a distinction (the first kept, as the store's row).
        self.distinction_episodes: dict[tuple[int, int], int | None] = {}
        self.evidence: dict[int, Evidence] = {}
        self.relationships: dict[int, Relationship] = {}
        self.merges: dict[int, EntityMerge] = {}
        self._entity_ids = _ids()
        self._alias_ids = _ids()
        self._evidence_ids = _ids()
        self._relationship_ids = _ids()
        self._merge_ids = _ids()
        self.projects: FakeProjects
        self.sessions: FakeSessions
        self.episodes: FakeEpisodes

    # Entities -------------------------------------------------------------

    def _graph_of(self, entity_id: int) -> Graph:
        e = self.entities[entity_id]
        return e.project_id, e.session_id

    def _key_taken(self, graph: Graph, key: str, etype: str, but: int) -> bool:
        return any(
            (e.project_id, e.session_id, e.type) == (*graph, etype) and self.name_keys[i] == key
            for i, e in self.entities.items()
            if i != but
        )

    def _read(self, entity_id: int) -> Entity:
        names = [a.name for a in sorted(self.aliases.values(), key=lambda a: a.id)
                 if a.entity_id == entity_id]  # fmt: skip
        return replace(self.entities[entity_id], aliases=tuple(dict.fromkeys(names)))

    def _change(self, entity_id: int, **changes: Any) -> None:
        if entity_id in self.entities:
            self.entities[entity_id] = replace(self.entities[entity_id], **changes)

    def _put_entity(self, entity_id: int, e: Entity, key: str) -> None:
        if self._key_taken((e.project_id, e.session_id), key, e.type, entity_id):
            raise ValueError("UNIQUE constraint failed: entities identity")
        self.entities[entity_id] = replace(e, id=entity_id, aliases=())
        self.name_keys[entity_id] = key

    def entity_id_of(self, key: str, etype: str, project_id: int, session_id: int) -> int | None:
        for i, e in self.entities.items():
            if (e.project_id, e.session_id, e.type) == (project_id, session_id, etype):
                if self.name_keys[i] == key:
                    return i
        return None

    def entities_with_key(self, graph: Graph, key: str, types: Iterable[str]) -> list[int]:
        wanted = set(types)
        return sorted(
            {
                a.entity_id
                for a in self.aliases.values()
                if self.alias_graphs[a.id] == tuple(graph)
                and a.norm == key
                and self.entities[a.entity_id].type in wanted
            }
        )

    def insert_entity(
        self,
        graph: Graph,
        surface: str,
        etype: str,
        notes: str | None,
        *,
        source: str,
        method: str = METHOD_NEW,
        episode_id: int | None = None,
        confidence: float | None = None,
        fallback_tenant: str = DEFAULT_TENANT,
        resolution: str = RESOLVED,
    ) -> int:
        at = time.time()
        project_id, session_id = graph
        display = display_form(surface, etype) or surface.strip()
        owner = self.projects.rows.get(project_id) or self.sessions.rows.get(session_id)
        entity = Entity(
            0, display, etype, notes, 1, 1.0 if confidence is None else confidence, source,
            at, at, project_id, session_id,
            owner.tenant if owner is not None else fallback_tenant, (), resolution,
        )  # fmt: skip
        entity_id = next(self._entity_ids)
        self._put_entity(entity_id, entity, name_key(display, etype))
        self.add_alias(entity_id, surface, method=method, episode_id=episode_id, refresh=False)
        if episode_id is not None:
            self._link(entity_id, episode_id)
        return entity_id

    def add_alias(
        self,
        entity_id: int,
        surface: str,
        *,
        method: str,
        score: float = 1.0,
        episode_id: int | None = None,
        refresh: bool = True,
        at: float | None = None,
    ) -> bool:
        e = self.entities[entity_id]
        display = display_form(surface, e.type) or surface.strip()
        norm = name_key(display, e.type)
        if any(a.entity_id == entity_id and _ascii_lower(a.name) == _ascii_lower(display)
               for a in self.aliases.values()):  # fmt: skip
            return False
        alias_id = next(self._alias_ids)
        self.aliases[alias_id] = EntityAlias(
            alias_id, entity_id, display, norm, method, score, episode_id, at or time.time()
        )
        self.alias_graphs[alias_id] = (e.project_id, e.session_id)
        self._add_tokens(entity_id, [norm])
        if refresh:
            self.refresh_display_name(entity_id)
        return True

    def _add_tokens(self, entity_id: int, norms: Iterable[str]) -> None:
        e = self.entities[entity_id]
        for word in {t for n in norms for t in index_tokens(n)}:
            self.tokens.add((e.project_id, e.session_id, e.type, word, entity_id))

    def rebuild_tokens(self, entity_id: int) -> None:
        self.tokens = {t for t in self.tokens if t[4] != entity_id}
        if entity_id in self.entities:
            self._add_tokens(
                entity_id, [a.norm for a in self.aliases.values() if a.entity_id == entity_id]
            )

    def refresh_display_name(self, entity_id: int) -> None:
        if entity_id not in self.entities:
            return
        e = self.entities[entity_id]
        names = [a.name for a in sorted(self.aliases.values(), key=lambda a: a.id)
                 if a.entity_id == entity_id]  # fmt: skip
        if not names:
            return
        best = best_display([e.name, *names]) if e.name in names else best_display(names)
        if best == e.name:
            return
        key = name_key(best, e.type)
        if not self._key_taken(self._graph_of(entity_id), key, e.type, entity_id):
            self._change(entity_id, name=best)
            self.name_keys[entity_id] = key

    def _link(self, entity_id: int, episode_id: int) -> bool:
        if (entity_id, episode_id) in self.episode_links:
            return False
        self.episode_links.add((entity_id, episode_id))
        return True

    def mention(
        self,
        entity_id: int,
        notes: str | None,
        *,
        episode_id: int | None = None,
        confidence: float | None = None,
    ) -> None:
        new_mention = episode_id is None or self._link(entity_id, episode_id)
        if entity_id not in self.entities:
            return
        e = self.entities[entity_id]
        self._change(
            entity_id,
            mention_count=e.mention_count + (1 if new_mention else 0),
            notes=e.notes if notes is None else notes,
            confidence=e.confidence if confidence is None else confidence,
            last_seen_at=time.time(),
        )

    def set_resolution(self, entity_id: int, state: str) -> None:
        self._change(entity_id, resolution=state)

    def get_entity(self, entity_id: int, tenant: str | None = None) -> Entity:
        e = self.entities.get(entity_id)
        if e is None or (tenant is not None and e.tenant != tenant):
            raise NotFound(
                f"entity {entity_id} does not exist",
                resource_type="entity",
                resource_name=str(entity_id),
            )
        return self._read(entity_id)

    def get_entities(self, ids: Sequence[int], tenant: str | None = None) -> dict[int, Entity]:
        return {
            i: self._read(i)
            for i in sorted(set(ids))
            if i in self.entities and (tenant is None or self.entities[i].tenant == tenant)
        }

    def entities_named(
        self, project_id: int, session_id: int, keys: Sequence[str], limit: int
    ) -> list[Entity]:
        wanted = set(keys)
        ids = {
            a.entity_id
            for a in self.aliases.values()
            if self.alias_graphs[a.id] == (project_id, session_id) and a.norm in wanted
        }
        ordered = sorted(ids, key=lambda i: (-self.entities[i].mention_count, i))
        return [self._read(i) for i in ordered[:limit]]

    def entity_graph(self, entity_id: int, tenant: str | None = None) -> tuple[int, int] | None:
        e = self.entities.get(entity_id)
        if e is None or (tenant is not None and e.tenant != tenant):
            return None
        return e.project_id, e.session_id

    def _cascade(self, entity_id: int) -> None:
        """What the foreign keys of an entity's rows delete with it."""
        del self.entities[entity_id]
        del self.name_keys[entity_id]
        for alias_id in [a.id for a in self.aliases.values() if a.entity_id == entity_id]:
            del self.aliases[alias_id], self.alias_graphs[alias_id]
        self.tokens = {t for t in self.tokens if t[4] != entity_id}
        self.episode_links = {link for link in self.episode_links if link[0] != entity_id}
        self.distinctions = {d for d in self.distinctions if entity_id not in d}
        self.distinction_episodes = {
            d: e for d, e in self.distinction_episodes.items() if d in self.distinctions
        }
        for rows in (self.relationships, self.evidence):
            for row_id in [r.id for r in rows.values() if entity_id in (r.from_id, r.to_id)]:
                del rows[row_id]

    def delete_entity(self, entity_id: int) -> int:
        self.get_entity(entity_id)
        edges = sum(1 for r in self.relationships.values() if entity_id in (r.from_id, r.to_id))
        self._cascade(entity_id)
        return edges

    def list_entities(
        self,
        etype: str,
        project_id: int,
        after_id: int | None,
        limit: int,
        session_id: int = 0,
        tenant: str | None = None,
        keys: Sequence[str] = (),
    ) -> list[Entity]:
        named = {a.entity_id for a in self.aliases.values() if a.norm in set(keys)}
        found = [
            i
            for i, e in sorted(self.entities.items())
            if i > (after_id or 0)
            and (tenant is None or e.tenant == tenant)
            and (not etype or e.type == etype)
            and (not project_id or e.project_id == project_id)
            and (not session_id or (e.project_id == 0 and e.session_id == session_id))
            and (not keys or i in named)
        ]
        return [self._read(i) for i in found[:limit]]

    def recent_entities(self, project_id: int, limit: int, session_id: int = 0) -> list[Entity]:
        mine = [e for e in self.entities.values()
                if (e.project_id, e.session_id) == (project_id, session_id)]  # fmt: skip
        newest = sorted(mine, key=lambda e: (e.last_seen_at or 0.0, e.id), reverse=True)[:limit]
        return [self._read(e.id) for e in reversed(newest)]

    def list_aliases(self, entity_id: int, after_id: int | None, limit: int) -> list[EntityAlias]:
        return [a for a in sorted(self.aliases.values(), key=lambda a: a.id)
                if a.entity_id == entity_id and a.id > (after_id or 0)][:limit]  # fmt: skip

    def aliases_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[EntityAlias]:
        return [a for a in sorted(self.aliases.values(), key=lambda a: a.id)
                if self.alias_graphs[a.id] == (project_id, 0)
                and a.id > (after_id or 0)][:limit]  # fmt: skip

    def episode_links_in_project(
        self, project_id: int, after: tuple[int, int] | None, limit: int
    ) -> list[tuple[int, int]]:
        return [
            link
            for link in sorted(self.episode_links)
            if link > (after or (0, 0)) and self._graph_of(link[0]) == (project_id, 0)
        ][:limit]

    # What entity resolution reads -------------------------------------------

    def resolution_candidates(
        self, graph: Graph, keys: Iterable[str], words: Iterable[str], *, word_limit: int
    ) -> list[CandidateRow]:
        """A word's ``word_limit`` are taken in (type, entity) order: the
        stores' own order is their index's, which no caller relies on."""
        graph = tuple(graph)  # type: ignore[assignment]
        key_set = set(keys)
        ids = {a.entity_id for a in self.aliases.values()
               if self.alias_graphs[a.id] == graph and a.norm in key_set}  # fmt: skip
        for word in set(words):
            found = sorted(
                (t[2], t[4]) for t in self.tokens if (t[0], t[1], t[3]) == (*graph, word)
            )
            ids.update(entity_id for _, entity_id in found[:word_limit])
        return self.candidate_rows(ids)

    def block_candidates(
        self, graph: Graph, blocks: Iterable[str], types: Iterable[str], *, limit: int
    ) -> list[CandidateRow]:
        type_set = set(types)
        ids: set[int] = set()
        for block in set(blocks):
            upper = block[:-1] + chr(ord(block[-1]) + 1)
            found = [t[4] for t in self.tokens
                     if (t[0], t[1]) == tuple(graph) and t[2] in type_set
                     and block <= t[3] < upper]  # fmt: skip
            if len(found) <= limit:
                ids.update(found)
        return self.candidate_rows(ids)

    def candidate_rows(self, ids: Iterable[int]) -> list[CandidateRow]:
        rows = []
        for i in sorted(set(ids)):
            if i not in self.entities:
                continue
            e = self.entities[i]
            rows.append(
                CandidateRow(
                    i, e.name, self.name_keys[i], e.type, e.notes, e.resolution,
                    frozenset(a.norm for a in self.aliases.values() if a.entity_id == i),
                    frozenset(b if a == i else a for a, b in self.distinctions if i in (a, b)),
                )
            )  # fmt: skip
        return rows

    def add_distinction(self, a: int, b: int, episode_id: int | None = None) -> None:
        pair = (min(a, b), max(a, b))
        if pair not in self.distinctions:
            self.distinctions.add(pair)
            self.distinction_episodes[pair] = episode_id

    def recent_mentions(self, entity_id: int, limit: int) -> list[str]:
        episodes = [self.episodes.rows[episode_id] for linked, episode_id in self.episode_links
                    if linked == entity_id and episode_id in self.episodes.rows]  # fmt: skip
        episodes.sort(key=lambda ep: (ep.occur_at, ep.id), reverse=True)
        return [ep.user_message for ep in episodes[:limit]]

    # Relationships ---------------------------------------------------------

    def relationship_at(
        self, from_id: int, to_id: int, label: str, at: float
    ) -> Relationship | None:
        rows = [r for r in self.relationships.values()
                if (r.from_id, r.to_id, r.label) == (from_id, to_id, label)]  # fmt: skip
        if not rows:
            return None
        return max(rows, key=lambda r: (_holds(r, When(as_of=at)), r.valid_at))

    def get_relationships(self, ids: Sequence[int]) -> list[Relationship]:
        return [self.relationships[i] for i in sorted(set(ids)) if i in self.relationships]

    def current_facts(
        self, entity_ids: Sequence[int], limit: int
    ) -> list[tuple[str, str, str, float | None]]:
        wanted = set(entity_ids)
        facts = sorted(
            (r for r in self.relationships.values()
             if r.invalid_at is None and (r.from_id in wanted or r.to_id in wanted)),
            key=lambda r: (r.valid_at or 0.0, r.id),
            reverse=True,
        )  # fmt: skip
        return [
            (self.entities[r.from_id].name, r.label, self.entities[r.to_id].name, r.valid_at)
            for r in facts[:limit]
        ]

    def list_relationships(
        self,
        entity_id: int,
        include_inbound: bool,
        after_id: int | None = None,
        limit: int = -1,
        when: When = CURRENT,
    ) -> list[Relationship]:
        found = [
            r
            for r in sorted(self.relationships.values(), key=lambda r: r.id)
            if (r.from_id == entity_id or (include_inbound and r.to_id == entity_id))
            and r.id > (after_id or 0)
            and _holds(r, when)
        ]
        return found if limit < 0 else found[:limit]

    # Traversal ---------------------------------------------------------------

    def _edges_within(self, ids: Iterable[int], when: When) -> list[Relationship]:
        members = set(ids)
        return [r for r in sorted(self.relationships.values(), key=lambda r: r.id)
                if r.from_id in members and r.to_id in members and _holds(r, when)]  # fmt: skip

    def _hop(self, ids: set[int], when: When) -> set[int]:
        found = set()
        for r in self.relationships.values():
            if _holds(r, when):
                found.update({r.to_id} if r.from_id in ids else set())
                found.update({r.from_id} if r.to_id in ids else set())
        return found

    def neighborhood(
        self, entity_id: int, depth: int, when: When = CURRENT
    ) -> tuple[list[Entity], list[Relationship]]:
        self.get_entity(entity_id)
        reached, frontier = {entity_id}, {entity_id}
        for _ in range(depth):
            frontier = self._hop(frontier, when) - reached
            reached |= frontier
        nodes = self.get_entities(list(reached))
        return list(nodes.values()), self._edges_within(nodes, when)

    def neighbors(
        self, entity_ids: Sequence[int], when: When = CURRENT
    ) -> tuple[list[Entity], list[Relationship]]:
        seeds = set(entity_ids)
        nodes = self.get_entities(list(seeds | self._hop(seeds, when)))
        return list(nodes.values()), self._edges_within(nodes, when)

    def relationships_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Relationship]:
        return [r for r in sorted(self.relationships.values(), key=lambda r: r.id)
                if self.entities[r.from_id].project_id == project_id
                and r.id > (after_id or 0)][:limit]  # fmt: skip

    # Evidence and intervals ----------------------------------------------------

    def add_evidence(
        self,
        from_id: int,
        to_id: int,
        label: str,
        kind: str,
        at: float,
        *,
        episode_id: int | None = None,
        notes: str | None = None,
        mentions: int = 1,
    ) -> int:
        evidence_id = next(self._evidence_ids)
        self.evidence[evidence_id] = Evidence(
            evidence_id, from_id, to_id, label, kind, at, episode_id, mentions, notes, time.time()
        )
        return evidence_id

    def drop_episode_evidence(self, episode_id: int) -> set[tuple[int, str]]:
        said = [e for e in self.evidence.values() if e.episode_id == episode_id]
        for e in said:
            del self.evidence[e.id]
        return {(e.from_id, e.label) for e in said}

    def evidence_of(self, from_id: int, label: str) -> list[Evidence]:
        return [e for e in sorted(self.evidence.values(), key=lambda e: e.id)
                if (e.from_id, e.label) == (from_id, label)]  # fmt: skip

    def evidence_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Evidence]:
        return [e for e in sorted(self.evidence.values(), key=lambda e: e.id)
                if self._graph_of(e.from_id) == (project_id, 0)
                and e.id > (after_id or 0)][:limit]  # fmt: skip

    def groups_of(self, entity_ids: Sequence[int]) -> set[tuple[int, str]]:
        wanted = set(entity_ids)
        return {(e.from_id, e.label) for e in self.evidence.values()
                if e.from_id in wanted or e.to_id in wanted}  # fmt: skip

    def write_intervals(self, from_id: int, label: str, intervals: Sequence[Interval]) -> None:
        """As the store's: a row keeps its id while its interval survives
        (same object and start, or failing that the same object)."""
        unused = {
            r.id: r
            for r in sorted(self.relationships.values(), key=lambda r: r.id)
            if (r.from_id, r.label) == (from_id, label)
        }
        pairs: list[tuple[Interval, Relationship | None]] = []
        waiting: list[Interval] = []
        for interval in intervals:
            same = next(
                (
                    r
                    for r in unused.values()
                    if (r.to_id, r.valid_at) == (interval.to_id, interval.valid_at)
                ),
                None,
            )
            if same is None:
                waiting.append(interval)
            else:
                del unused[same.id]
                pairs.append((interval, same))
        for interval in waiting:
            other = next((r for r in unused.values() if r.to_id == interval.to_id), None)
            if other is not None:
                del unused[other.id]
            pairs.append((interval, other))
        for gone in unused:
            del self.relationships[gone]
        for interval, row in pairs:
            relationship_id = next(self._relationship_ids) if row is None else row.id
            self.relationships[relationship_id] = Relationship(
                relationship_id,
                from_id,
                interval.to_id,
                label,
                interval.notes,
                interval.mentions,
                interval.created_at or time.time() if row is None else row.created_at,
                interval.valid_at,
                interval.invalid_at,
                interval.asserted_by,
                interval.ended_by,
            )

    def delete_relationships(self, from_id: int, to_id: int, label: str) -> int:
        triple = (from_id, to_id, label)
        gone = 0
        for rows in (self.evidence, self.relationships):
            for row_id in [r.id for r in rows.values() if (r.from_id, r.to_id, r.label) == triple]:
                del rows[row_id]
                gone += rows is self.relationships
        return gone

    # Merges ----------------------------------------------------------------------

    def add_mentions(self, entity_id: int, count: int, notes: str | None = None) -> None:
        if entity_id in self.entities:
            e = self.entities[entity_id]
            self._change(
                entity_id,
                mention_count=max(e.mention_count + count, 0),
                notes=notes if e.notes is None else e.notes,
            )

    def set_notes(self, entity_id: int, notes: str | None) -> None:
        self._change(entity_id, notes=notes)

    def delete_entity_row(self, entity_id: int) -> None:
        if entity_id in self.entities:
            self._cascade(entity_id)

    def reinsert_entity(self, e: Entity) -> int:
        entity_id = e.id or next(self._entity_ids)
        self._put_entity(entity_id, e, f"{name_key(e.name, e.type)}#undo{e.id}")
        return entity_id

    def restore_name_key(self, entity_id: int) -> None:
        if entity_id not in self.entities:
            return
        e = self.entities[entity_id]
        key = name_key(e.name, e.type)
        if not self._key_taken(self._graph_of(entity_id), key, e.type, entity_id):
            self.name_keys[entity_id] = key

    def insert_merge(self, m: EntityMerge) -> int:
        """The sources are kept as the store's snapshot keeps them: without
        their aliases (their moved names are ``alias_names``)."""
        merge_id = next(self._merge_ids)
        self.merges[merge_id] = replace(
            m,
            id=merge_id,
            source_ids=tuple(m.source_ids),
            created_at=m.created_at or time.time(),
            sources=tuple(replace(s, entity=replace(s.entity, aliases=())) for s in m.sources),
        )
        return merge_id

    def get_merge(self, merge_id: int, tenant: str | None = None) -> EntityMerge:
        m = self.merges.get(merge_id)
        if m is None or (tenant is not None and m.tenant != tenant):
            raise NotFound(
                f"merge {merge_id} does not exist",
                resource_type="merge",
                resource_name=str(merge_id),
            )
        return m

    def merge_by_request(self, tenant: str, request_id: str) -> EntityMerge | None:
        return next((m for m in self.merges.values()
                     if (m.tenant, m.request_id) == (tenant, request_id)), None)  # fmt: skip

    def list_merges(
        self,
        graph: Graph | None,
        entity_id: int,
        after_id: int | None,
        limit: int,
        tenant: str | None,
    ) -> list[EntityMerge]:
        return [
            m
            for i, m in sorted(self.merges.items())
            if i > (after_id or 0)
            and (graph is None or (m.project_id, m.session_id) == tuple(graph))
            and (not entity_id or entity_id == m.target_id or entity_id in m.source_ids)
            and (tenant is None or m.tenant == tenant)
        ][:limit]

    def merges_after(self, merge: EntityMerge) -> list[EntityMerge]:
        return [
            m
            for i, m in sorted(self.merges.items())
            if (m.project_id, m.session_id) == (merge.project_id, merge.session_id)
            and i > merge.id
            and m.undone_at is None
        ]

    def mark_undone(self, merge_id: int) -> None:
        if merge_id in self.merges:
            self.merges[merge_id] = replace(self.merges[merge_id], undone_at=time.time())

    def _move_alias_rows(self, from_id: int, to_id: int, names: Sequence[str]) -> None:
        folded = {_ascii_lower(n) for n in names}
        for a in list(self.aliases.values()):
            if a.entity_id == from_id and _ascii_lower(a.name) in folded:
                self.aliases[a.id] = replace(a, entity_id=to_id)

    def move_aliases(self, source_id: int, target_id: int) -> list[str]:
        held = {_ascii_lower(a.name) for a in self.aliases.values() if a.entity_id == target_id}
        moved = [a.name for a in sorted(self.aliases.values(), key=lambda a: a.id)
                 if a.entity_id == source_id and _ascii_lower(a.name) not in held]  # fmt: skip
        self._move_alias_rows(source_id, target_id, moved)
        return moved

    def return_aliases(self, target_id: int, source_id: int, names: Sequence[str]) -> None:
        self._move_alias_rows(target_id, source_id, names)

    def move_episode_links(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]:
        mine = sorted(e for linked, e in self.episode_links if linked == source_id)
        moved = [e for e in mine if self._link(target_id, e)]
        shared = sorted(set(mine) - set(moved))
        self.episode_links = {link for link in self.episode_links if link[0] != source_id}
        return moved, shared

    def return_episode_links(
        self, target_id: int, source_id: int, moved: Sequence[int], shared: Sequence[int]
    ) -> None:
        for episode_id in [*moved, *shared]:
            if episode_id in self.episodes.rows:
                self._link(source_id, episode_id)
        self.episode_links -= {(target_id, e) for e in moved}

    def move_evidence(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]:
        ends: list[list[int]] = []
        for column in ("from_id", "to_id"):
            ids = sorted(e.id for e in self.evidence.values() if getattr(e, column) == source_id)
            for i in ids:
                self.evidence[i] = replace(self.evidence[i], **{column: target_id})
            ends.append(ids)
        return ends[0], ends[1]

    def return_evidence(
        self, source_id: int, from_ids: Sequence[int], to_ids: Sequence[int]
    ) -> None:
        for column, ids in (("from_id", from_ids), ("to_id", to_ids)):
            for i in ids:
                if i in self.evidence:
                    self.evidence[i] = replace(self.evidence[i], **{column: source_id})


def _holds(r: Relationship, when: When) -> bool:
    if when.history:
        return True
    if when.as_of is not None:
        return (
            r.valid_at is not None
            and r.valid_at <= when.as_of
            and (r.invalid_at is None or r.invalid_at > when.as_of)
        )
    return r.invalid_at is None


class FakeMemories:
    """Memories, their history, their usage, formation's candidates and
    selections' answers. Visibility is the domain's rule in Python
    (domain/memory_visibility.visible), with the caller's tenant and expiry
    as the store's SQL adds them. Keyword search matches a memory's title and
    content as FakeEpisodes' index matches an episode's turns (the same
    tokens, no stems), ranked as SQLite ranks: the IDF counted over the
    owners' memories (the user's USER memories in the caller's tenant and the
    project's PROJECT memories), the visibility rule deciding what is found.

    A write queues no index job: the domain queues it (domain/memory_upkeep.py).
    """

    def __init__(self) -> None:
        self.rows: dict[int, Memory] = {}
        self.history: dict[int, Revision] = {}
        self.usage: list[tuple[MemoryUsage, str, int, str]] = []  # row, user, project, tenant
        self.candidates: dict[int, str] = {}
        self.selections: list[tuple[SelectionKey, str, str, float]] = []
        self._next = _ids()
        self._revision_ids = _ids()
        self._usage_ids = _ids()

    # -- rows

    def insert(
        self,
        values: Mapping[str, Any],
        request_id: str | None,
        tenant: str,
        *,
        embedded: bool = False,
    ) -> Memory:
        at = time.time()
        memory = Memory(
            id=next(self._next),
            kind=values["kind"],
            title=values["title"],
            content=values["content"],
            tier=values["tier"],
            project_id=values["project_id"],
            agent_id=values["agent_id"],
            user_id=values["user_id"],
            session_id=values["session_id"],
            confidence=values["confidence"],
            metadata=json.loads(json.dumps(values["metadata"])),
            created_at=at,
            updated_at=at,
            request_id=request_id or None,
            tenant=tenant,
            expire_at=values.get("expire_at"),
            source=values.get("source", "client"),
            source_episode_id=values.get("source_episode_id"),
        )
        self.rows[memory.id] = memory
        return memory

    def find(self, memory_id: int) -> Memory | None:
        return self.rows.get(memory_id)

    def get(self, memory_id: int) -> Memory:
        memory = self.rows.get(memory_id)
        if memory is None:
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=str(memory_id),
            )
        return memory

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        return {i: self.rows[i] for i in ids if i in self.rows}

    def find_by_request_id(self, tenant: str, user_id: str, request_id: str) -> Memory | None:
        return next(
            (
                m
                for m in self.rows.values()
                if (m.tenant, m.user_id, m.request_id) == (tenant, user_id, request_id)
            ),
            None,
        )

    def update(self, memory_id: int, changes: Mapping[str, Any]) -> Memory:
        memory = self.get(memory_id)
        if changes:
            values = dict(changes)
            if "metadata" in values:
                values["metadata"] = json.loads(json.dumps(values["metadata"]))
            self.rows[memory_id] = replace(memory, **values, updated_at=time.time())
        return self.rows[memory_id]

    def delete(self, memory_id: int) -> None:
        self.get(memory_id)
        del self.rows[memory_id]
        # Its usage goes with it (the store's ON DELETE CASCADE); its history stays.
        self.usage = [u for u in self.usage if u[0].memory_id != memory_id]

    @staticmethod
    def _live(m: Memory | None, at: float) -> bool:
        return m is not None and (m.expire_at is None or m.expire_at > at)

    def count_in_cap_scope(
        self, kind: int, project_id: int, agent_id: str, user_id: str, tenant: str
    ) -> int:
        """As the store's: PROJECT memories per (project, agent), USER ones per
        (project, agent, user) in the tenant; live, ARCHIVE not counted."""
        at = time.time()
        return sum(
            1
            for m in self.rows.values()
            if m.kind == kind
            and (m.project_id, m.agent_id) == (project_id, agent_id)
            and (kind == MemoryKind.PROJECT or (m.user_id, m.tenant) == (user_id, tenant))
            and m.tier != Tier.ARCHIVE
            and self._live(m, at)
        )

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
    ) -> list[tuple[int, str, str]]:
        at = time.time()
        return [
            (m.id, m.title, m.content)
            for m in sorted(self.rows.values(), key=lambda m: m.id)
            if (m.tenant, m.kind, m.project_id, m.agent_id, m.user_id, m.tier)
            == (tenant, kind, project_id, agent_id, user_id, tier)
            and self._live(m, at)
            and session_id in (None, m.session_id)
            and all(word in _ascii_lower(m.content) for word in containing)
        ]

    def list_in_project(
        self, project_id: int, tenant: str | None, after_id: int | None, limit: int, at: float
    ) -> list[Memory]:
        return [
            m
            for m in sorted(self.rows.values(), key=lambda m: m.id)
            if m.project_id == project_id
            and m.id > (after_id or 0)
            and self._live(m, at)
            and tenant in (None, m.tenant)
        ][:limit]

    # -- what a scope sees

    def _visible(self, m: Memory, scope: MemoryScope, at: float | None) -> bool:
        tenant = tenancy.visible()
        return (
            memory_visibility.visible(
                scope,
                kind=m.kind,
                tier=m.tier,
                project_id=m.project_id,
                user_id=m.user_id,
                session_id=m.session_id,
                agent_id=m.agent_id,
            )  # fmt: skip
            and tenant in (None, m.tenant)
            and self._live(m, time.time() if at is None else at)
        )

    def list_visible(
        self,
        scope: MemoryScope,
        *,
        at: float | None = None,
        kind: int = 0,
        after_id: int | None = None,
        limit: int = 50,
        newest_first: bool = False,
    ) -> list[Memory]:
        found = sorted(
            (m for m in self.rows.values() if self._visible(m, scope, at) and kind in (0, m.kind)),
            key=lambda m: m.id,
            reverse=newest_first,
        )
        if newest_first:
            start = after_id if after_id is not None else 2**62
            return [m for m in found if m.id < start][:limit]
        return [m for m in found if m.id > (after_id or 0)][:limit]

    def get_visible(
        self, ids: Sequence[int], scope: MemoryScope, *, at: float | None = None
    ) -> dict[int, Memory]:
        return {
            i: self.rows[i]
            for i in ids
            if i in self.rows and self._visible(self.rows[i], scope, at)
        }

    def keyword_search(
        self, match: str, scope: MemoryScope, limit: int, *, at: float | None = None
    ) -> list[tuple[Memory, float]]:
        """(memory, score with higher better), best first, of those the scope sees."""
        phrases = _phrases(match)
        if not phrases or (not scope.project_id and not scope.user_id):
            return []
        tenant = tenancy.visible()
        total = sum(
            1
            for m in self.rows.values()
            if (
                m.kind == MemoryKind.USER
                and m.user_id == scope.user_id
                and tenant in (None, m.tenant)
            )
            or (m.kind == MemoryKind.PROJECT and m.project_id == scope.project_id)
        )
        columns = {
            m.id: [(m.title, 1.0), (m.content, 1.0)]
            for m in self.rows.values()
            if self._visible(m, scope, at)
        }
        return [(self.rows[i], s) for i, s in _keyword_ranked(columns, phrases, total, limit)]

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` that ``match`` matches, however they would rank."""
        phrases = _phrases(match)
        return {
            i
            for i in ids
            if i in self.rows
            and any(
                _holds_phrase(_tokens(text), p)
                for text in (self.rows[i].title, self.rows[i].content)
                for p in phrases
            )
        }

    def scope_sample(self, scope: MemoryScope, limit: int, *, at: float | None = None) -> list[str]:
        """As the store's: the scope's newest memories (its user's and its
        project's), title and content."""
        found = self.list_visible(scope, at=at, limit=limit, newest_first=True)
        return [f"{m.title}\n{m.content}" for m in found]

    # -- usage

    @staticmethod
    def _owned(row: tuple[MemoryUsage, str, int, str], owner: UsageOwner) -> bool:
        _, user_id, project_id, tenant = row
        return (user_id, project_id) == (owner.user_id, owner.project_id) and owner.tenant in (
            None,
            tenant,
        )

    def record_usage(
        self, thread_id: str, owner: UsageOwner, context: str, used: Sequence[UsageRecord]
    ) -> dict[int, Memory]:
        """As the store's: a usage row per live memory (in its tenant) and its
        counters; memories deleted or expired meanwhile are skipped."""
        at = time.time()
        live = [
            u for u in used if u.memory_id in self.rows and self._live(self.rows[u.memory_id], at)
        ]
        for u in live:
            memory = self.rows[u.memory_id]
            row = MemoryUsage(
                next(self._usage_ids), u.memory_id, thread_id, context, u.relevance, u.category, at
            )
            self.usage.append((row, owner.user_id, owner.project_id, memory.tenant))
            self.rows[u.memory_id] = replace(
                memory, use_count=memory.use_count + 1, last_used_at=at
            )
        return {u.memory_id: self.rows[u.memory_id] for u in live}

    def _usage(self, owner: UsageOwner, after_id: int | None, limit: int, **match: Any):
        return [
            row
            for row, *_ in (r for r in self.usage if self._owned(r, owner))
            if row.id > (after_id or 0) and all(getattr(row, k) == v for k, v in match.items())
        ][:limit]

    def usage_by_memory(
        self, memory_id: int, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        return self._usage(owner, after_id, limit, memory_id=memory_id)

    def usage_by_thread(
        self, thread_id: str, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        return self._usage(owner, after_id, limit, thread_id=thread_id)

    def usage_by_owner(
        self, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        return self._usage(owner, after_id, limit)

    def used_in_thread(self, thread_id: str, owner: UsageOwner, ids: Sequence[int]) -> set[int]:
        if not thread_id or not ids:
            return set()
        return {
            r.memory_id for r in self._usage(owner, None, len(self.usage), thread_id=thread_id)
        } & set(ids)

    # -- history

    def record(
        self,
        previous: Memory,
        action: int,
        changed: Sequence[str],
        by: ChangedBy,
        purge_after: float | None = None,
        at: float | None = None,
    ) -> None:
        revision = Revision(
            next(self._revision_ids), previous.id, action, list(changed),
            Memory(**json.loads(json.dumps(asdict(previous)))), by.request_id, by.principal,
            time.time() if at is None else at, purge_after, by.episode_id, by.reason,
        )  # fmt: skip
        self.history[revision.id] = revision

    def record_deletion(
        self, previous: Memory, by: ChangedBy, purge_after: float, action: int = DELETE
    ) -> None:
        self.record(previous, action, [], by, purge_after)
        for i, r in self.history.items():
            if r.memory_id == previous.id:
                self.history[i] = replace(r, purge_after=purge_after)

    def last(self, memory_id: int) -> Revision | None:
        mine = [r for _, r in sorted(self.history.items()) if r.memory_id == memory_id]
        return mine[-1] if mine else None

    def page(self, memory_id: int, after_id: int | None, limit: int) -> list[Revision]:
        return [
            r
            for _, r in sorted(self.history.items())
            if r.memory_id == memory_id and r.id > (after_id or 0)
        ][:limit]

    def purge(self, memory_ids: Sequence[int], at: float) -> int:
        gone = [
            i
            for i, r in self.history.items()
            if r.memory_id in set(memory_ids) and r.purge_after is not None and r.purge_after <= at
        ]
        for i in gone:
            del self.history[i]
        return len(gone)

    # -- formation's candidates, selections' answers

    def put_candidates(self, episode_id: int, candidates: list[dict[str, Any]]) -> None:
        self.candidates[episode_id] = json.dumps(candidates)

    def candidates_of(self, episode_id: int) -> list[dict[str, Any]] | None:
        held = self.candidates.get(episode_id)
        return None if held is None else list(json.loads(held))

    def find_selection(self, key: SelectionKey) -> tuple[str, SelectionAnswer] | None:
        since = time.time() - KEEP_SECONDS
        for held, digest, answer, at in self.selections:
            if held == key and at >= since:
                data = json.loads(answer)
                picks = [SelectionPick(**p) for p in data.pop("picks")]
                return digest, SelectionAnswer(picks, **data)
        return None

    def insert_selection(self, key: SelectionKey, digest: str, answer: SelectionAnswer) -> None:
        """As the store's: an answer past KEEP_SECONDS under the same key gives way."""
        at = time.time()
        self.selections = [
            s for s in self.selections if not (s[0] == key and s[3] < at - KEEP_SECONDS)
        ]
        self.selections.append((key, digest, json.dumps(asdict(answer)), at))


def _ascii_lower(text: str) -> str:
    """lower() as both databases fold: ASCII letters only."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class FakeSummaries:
    """Session summaries (a session's, its project read at query time) and
    project overviews (a project's alone)."""

    def __init__(self, projects: FakeProjects, sessions: FakeSessions, episodes: FakeEpisodes):
        self.rows: dict[int, Summary] = {}
        self._projects = projects
        self._sessions = sessions
        self._episodes = episodes
        self._next = _ids()

    def _read(self, row: Summary) -> Summary:
        """As the store reads it: a session summary in its session's project."""
        if not row.session_id:
            return row
        session = self._sessions.rows.get(row.session_id)
        return replace(row, project_id=0 if session is None else session.project_id)

    def _project_of(self, row: Summary) -> int:
        return self._read(row).project_id

    def tenant_of(self, row: Summary) -> str | None:
        session = self._sessions.rows.get(row.session_id)
        if session is not None:
            return session.tenant
        return self._projects.tenant_of(row.project_id)

    def past(self, row: Summary, cutoff: float) -> bool:
        """As the store's (summaries._PAST): last written before the cutoff;
        or its session is past it; or it names the episodes it covers and
        none of them is as recent."""
        session = self._sessions.rows.get(row.session_id)
        if row.updated_at < cutoff or (
            session is not None and self._sessions.past(session, 0.0, cutoff)
        ):
            return True
        return (
            bool(row.session_id)
            and row.last_episode_id > 0
            and not any(
                e.session_id == row.session_id
                and row.first_episode_id <= e.id <= row.last_episode_id
                and e.occur_at >= cutoff
                for e in self._episodes.rows.values()
            )
        )

    def _kept(self, row: Summary, retained_at: float | None) -> bool:
        if retained_at is None:
            return True
        project = self._projects.rows.get(self._project_of(row))
        return (
            project is None
            or project.retention is None
            or not self.past(row, retained_at - project.retention)
        )

    def _in_project(self, row: Summary, project_id: int) -> bool:
        if row.session_id:
            session = self._sessions.rows.get(row.session_id)
            return session is not None and bool(project_id) and session.project_id == project_id
        return row.project_id == project_id

    def _ordered(self) -> list[Summary]:
        return [self._read(r) for _, r in sorted(self.rows.items())]

    def insert(
        self,
        *,
        session_id: int,
        project_id: int,
        content: str,
        first_episode_id: int = 0,
        last_episode_id: int = 0,
        episode_count: int = 0,
    ) -> Summary:
        at = time.time()
        summary = Summary(
            next(self._next), session_id, 0 if session_id else project_id, content,
            first_episode_id, last_episode_id, episode_count, at, at,
        )  # fmt: skip
        self.rows[summary.id] = summary
        return self._read(summary)

    def find(
        self, summary_id: int, tenant: str | None = None, *, retained_at: float | None = None
    ) -> Summary | None:
        row = self.rows.get(summary_id)
        if row is None or (tenant is not None and self.tenant_of(row) != tenant):
            return None
        return self._read(row) if self._kept(row, retained_at) else None

    def get(
        self, summary_id: int, tenant: str | None = None, *, retained_at: float | None = None
    ) -> Summary:
        summary = self.find(summary_id, tenant, retained_at=retained_at)
        if summary is None:
            raise NotFound(
                f"summary {summary_id} does not exist",
                resource_type="summary",
                resource_name=str(summary_id),
            )
        return summary

    def update(
        self,
        summary_id: int,
        changes: Mapping[str, Any],
        tenant: str | None = None,
        *,
        retained_at: float | None = None,
    ) -> Summary:
        self.get(summary_id, tenant, retained_at=retained_at)
        if changes:
            row = self.rows[summary_id]
            self.rows[summary_id] = replace(row, **changes, updated_at=time.time())
        return self.get(summary_id)

    def delete(
        self, summary_id: int, tenant: str | None = None, *, retained_at: float | None = None
    ) -> None:
        self.get(summary_id, tenant, retained_at=retained_at)
        del self.rows[summary_id]

    def ids_of_session(self, session_id: int) -> list[int]:
        return sorted(i for i, r in self.rows.items() if r.session_id == session_id)

    def list_for_session(
        self, session_id: int, after_id: int | None, limit: int, *, retained_at: float | None = None
    ) -> list[Summary]:
        return [
            r
            for r in self._ordered()
            if r.session_id == session_id
            and r.id > (after_id or 0)
            and self._kept(self.rows[r.id], retained_at)
        ][:limit]

    def list_for_project(
        self, project_id: int, after_id: int | None, limit: int, *, retained_at: float | None = None
    ) -> list[Summary]:
        return [
            r
            for r in self._ordered()
            if self._in_project(self.rows[r.id], project_id)
            and r.id > (after_id or 0)
            and self._kept(self.rows[r.id], retained_at)
        ][:limit]

    def latest_for_session(
        self, session_id: int, *, retained_at: float | None = None
    ) -> Summary | None:
        mine = [
            r
            for r in self._ordered()
            if r.session_id == session_id and self._kept(self.rows[r.id], retained_at)
        ]
        return max(mine, key=lambda r: (r.last_episode_id, r.id), default=None)

    def overview(self, project_id: int, *, retained_at: float | None = None) -> Summary | None:
        mine = [
            r
            for r in self._ordered()
            if not r.session_id
            and r.project_id == project_id
            and self._kept(self.rows[r.id], retained_at)
        ]
        return mine[-1] if mine else None

    def project_session_summaries(
        self, project_id: int, *, retained_at: float | None = None
    ) -> list[Summary]:
        mine = [
            r
            for r in self._ordered()
            if r.session_id
            and self._in_project(self.rows[r.id], project_id)
            and self._kept(self.rows[r.id], retained_at)
        ]
        return sorted(mine, key=lambda r: (r.updated_at, r.id))

    def project_recent_episodes(
        self, project_id: int, limit: int, *, since: float | None = None
    ) -> list[tuple[int, str, str]]:
        sessions = set(self._sessions.project_session_ids(project_id))
        found = sorted(
            (e for e in self._episodes.rows.values() if e.session_id in sessions
             and (since is None or e.occur_at >= since)),
            key=lambda e: e.id,
        )[-limit:] if limit > 0 else []  # fmt: skip
        return [(e.id, e.user_message, e.ai_response) for e in found]

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        return [
            i
            for i, r in sorted(self.rows.items())
            if self._in_project(r, project_id) and self.past(r, cutoff)
        ][:limit]


class FakeMeta:
    """Facts about the database itself."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.rows.get(key)

    def put(self, key: str, value: str) -> None:
        self.rows[key] = value

    def probe(self) -> int:
        """The store counts its schema's objects; a fake's schema is its facts' table."""
        return 1

    def touch(self, at: float) -> None:
        self.put("write_probe", repr(at))


class FakeEvents:
    """The extraction events WatchExtractions replays: ids only grow, each
    event in its session's tenant, kept after the session goes."""

    def __init__(self, sessions: FakeSessions) -> None:
        self.rows: dict[int, tuple[ExtractionEvent, str]] = {}
        self._sessions = sessions
        self._next = _ids()

    def insert(
        self,
        episode_id: int,
        session_id: int,
        project_id: int,
        status: int,
        error: str = "",
        payload: dict[str, Any] | None = None,
    ) -> int:
        session = self._sessions.rows.get(session_id)
        event = ExtractionEvent(
            next(self._next), episode_id, session_id, project_id, status, error[:2000],
            json.loads(json.dumps(payload or {})), time.time(),
        )  # fmt: skip
        self.rows[event.id] = (event, "" if session is None else session.tenant)
        return event.id

    def page_after(self, after_id: int, where: EventFilter, limit: int) -> list[ExtractionEvent]:
        found = []
        for event, tenant in (self.rows[i] for i in sorted(self.rows)):
            if (
                event.id > after_id
                and where.episode_id in (0, event.episode_id)
                and where.session_id in (0, event.session_id)
                and where.project_id in (0, event.project_id)
                and where.tenant in (None, tenant)
                and (not where.since or event.created_at >= where.since)
            ):
                found.append(event)
        return found[:limit]

    def any_for_episode(self, episode_id: int, tenant: str | None = None) -> bool:
        return any(
            event.episode_id == episode_id and tenant in (None, owner)
            for event, owner in self.rows.values()
        )

    def delete_before(self, cutoff: float, limit: int) -> int:
        gone = [i for i in sorted(self.rows) if self.rows[i][0].created_at < cutoff][:limit]
        for i in gone:
            del self.rows[i]
        return len(gone)


class FakeErasures:
    """What an erasure needs of the store (store/erasure.py), on the fakes'
    rows: the receipts and buried request ids, what a user or a project
    holds (what domain/erasure.py plans and reports from), the request ids
    and formed memories of what goes, the graph an episode touched (its
    links, aliases, evidence and the facts it said), the formation events
    that name a memory (to scrub its words), a summary that may quote what
    went, the user's and the project's records, the index work still to run,
    a project being deleted, and the bulk deletes with what the store's
    foreign keys take with them (a row that only names a deleted episode
    keeps its row without it).

    Not kept: the keyword index, so a deleted episode's neighbours' context
    (``delete_episodes`` without ``whole_sessions``) has nothing to refresh
    here. Orders the store leaves to the database (a UNION, a query with no
    ORDER BY) are by id here; the contract compares them as sets.
    """

    def __init__(
        self,
        projects: FakeProjects,
        sessions: FakeSessions,
        episodes: FakeEpisodes,
        memories: FakeMemories,
        events: FakeEvents,
        graph: FakeGraph,
        summaries: FakeSummaries,
        jobs: FakeJobs,
        usage: FakeUsage,
    ) -> None:
        self.rows: dict[int, tuple[Erasure, str]] = {}  # the receipt, its user's digest
        self.buried_requests: dict[str, int] = {}
        self._projects = projects
        self._sessions = sessions
        self._episodes = episodes
        self._memories = memories
        self._events = events
        self._graph = graph
        self._summaries = summaries
        self._jobs = jobs
        self._usage = usage
        self._next = _ids()

    # -- receipts

    def start(self, target: Target, digest: str, principal: str) -> Erasure:
        erasure = Erasure(
            id=next(self._next),
            tenant=target.tenant,
            kind=target.kind,
            state=erasure_steps.RUNNING,
            phase=erasure_steps.PLANNED,
            user_id=target.user_id,
            project_id=target.project_id,
            principal=principal,
            started_at=time.time(),
        )
        self.rows[erasure.id] = (erasure, digest)
        return erasure

    def get(self, erasure_id: int) -> Erasure | None:
        held = self.rows.get(erasure_id)
        return None if held is None else held[0]

    def digest_of(self, erasure_id: int) -> str:
        held = self.rows.get(erasure_id)
        return "" if held is None else held[1]

    def _receipts(self) -> list[tuple[Erasure, str]]:
        return [self.rows[i] for i in sorted(self.rows)]

    def running_for(self, tenant: str, digest: str) -> list[Erasure]:
        return [
            r
            for r, d in self._receipts()
            if (r.tenant, d, r.state) == (tenant, digest, erasure_steps.RUNNING)
        ]

    def page(
        self, tenant: str | None, digest: str | None, before_id: int | None, limit: int
    ) -> list[Erasure]:
        """Newest first."""
        return [
            r
            for r, d in reversed(self._receipts())
            if (before_id is None or r.id < before_id)
            and tenant in (None, r.tenant)
            and digest in (None, d)
        ][:limit]

    def save(self, erasure: Erasure) -> None:
        """As the store's: what a step changes; its tenant, kind, project,
        principal and start stay as begun, and counts keep no zeros."""
        held, digest = self.rows[erasure.id]
        self.rows[erasure.id] = (
            replace(
                held,
                state=erasure.state,
                phase=erasure.phase,
                user_id=erasure.user_id,
                counts=Counts.from_dict(erasure.counts.as_dict()),
                planned=Counts.from_dict(erasure.planned.as_dict()),
                carry=json.loads(json.dumps(erasure.carry)),
                finished_at=erasure.finished_at,
            ),
            digest,
        )

    def forgotten(self, tenant: str) -> dict[str, float]:
        found: dict[str, float] = {}
        for r, digest in self._receipts():
            if (r.tenant, r.kind, r.state) == (tenant, erasure_steps.USER, erasure_steps.DONE):
                found[digest] = max(found.get(digest, r.started_at), r.started_at)
        return found

    def bury_requests(self, digests: Iterable[str], erasure_id: int) -> None:
        """The first erasure that took a request id keeps it."""
        for digest in digests:
            self.buried_requests.setdefault(digest, erasure_id)

    def buried(self, digest: str) -> int | None:
        return self.buried_requests.get(digest)

    # -- what a user holds

    def _user_sessions(self, tenant: str, user_id: str, project_id: int) -> list[Session]:
        return [
            s
            for _, s in sorted(self._sessions.rows.items())
            if (s.tenant, s.user_id) == (tenant, user_id)
            and (not project_id or s.project_id == project_id)
        ]

    def user_sessions(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        return [s.id for s in self._user_sessions(tenant, user_id, project_id) if s.id > after][
            :limit
        ]

    def episodes_in_sessions(
        self, session_ids: Sequence[int], limit: int, after: int = 0
    ) -> list[int]:
        wanted = set(session_ids)
        return sorted(
            i for i, e in self._episodes.rows.items() if e.session_id in wanted and i > after
        )[:limit]

    def _in_scope(self, e: Episode, tenant: str, project_id: int) -> Session | None:
        """The episode's session, where it is in the tenant (and the project)."""
        s = self._sessions.rows[e.session_id]
        mine = s.tenant == tenant and (not project_id or s.project_id == project_id)
        return s if mine else None

    def _elsewhere(self, tenant: str, user_id: str, project_id: int) -> list[Episode]:
        """Episodes written acting for the user in sessions that are not theirs."""
        return [
            e
            for _, e in sorted(self._episodes.rows.items())
            if e.acts_for == user_id
            and (s := self._in_scope(e, tenant, project_id)) is not None
            and s.user_id != user_id
        ]

    def user_episodes_elsewhere(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        return [e.id for e in self._elsewhere(tenant, user_id, project_id) if e.id > after][:limit]

    def _user_memories(self, tenant: str, user_id: str, project_id: int) -> list[Memory]:
        return [
            m
            for _, m in sorted(self._memories.rows.items())
            if (m.tenant, m.kind, m.user_id) == (tenant, MemoryKind.USER, user_id)
            and (not project_id or m.project_id == project_id)
        ]

    def user_memories(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        return [m.id for m in self._user_memories(tenant, user_id, project_id) if m.id > after][
            :limit
        ]

    def _user_usage(self, tenant: str, user_id: str, project_id: int) -> list[MemoryUsage]:
        """A use is the tenant's through the memory it used (as the store's)."""
        return sorted(
            (
                row
                for row, user, project, _ in self._memories.usage
                if user == user_id
                and (not project_id or project == project_id)
                and (m := self._memories.rows.get(row.memory_id)) is not None
                and m.tenant == tenant
            ),
            key=lambda row: row.id,
        )

    def user_usage(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[MemoryUsage]:
        return [u for u in self._user_usage(tenant, user_id, project_id) if u.id > after][:limit]

    def _user_selections(self, tenant: str, user_id: str, project_id: int) -> list[Any]:
        return [
            s
            for s in self._memories.selections
            if (s[0].tenant, s[0].user_id) == (tenant, user_id)
            and (not project_id or s[0].project_id == project_id)
        ]

    def user_holds(self, tenant: str, user_id: str, project_id: int) -> Counts:
        episodes = sum(
            1
            for e in self._episodes.rows.values()
            if (s := self._in_scope(e, tenant, project_id)) is not None
            and user_id in (s.user_id, e.acts_for)
        )
        return Counts(
            sessions=len(self._user_sessions(tenant, user_id, project_id)),
            episodes=episodes,
            memories=len(self._user_memories(tenant, user_id, project_id)),
            memory_usage=len(self._user_usage(tenant, user_id, project_id)),
            selections=len(self._user_selections(tenant, user_id, project_id)),
        )

    def users_in_project(self, project_id: int) -> list[str]:
        """Every user the project holds something of (a set: the store's UNION
        has no order)."""
        sessions = set(self._sessions.project_session_ids(project_id))
        users = (
            {s.user_id for i, s in self._sessions.rows.items() if i in sessions}
            | {
                m.user_id
                for m in self._memories.rows.values()
                if (m.project_id, m.kind) == (project_id, MemoryKind.USER)
            }
            | {e.acts_for for e in self._episodes.rows.values() if e.session_id in sessions}
        )
        return sorted(users - {""})

    def user_rows_before(
        self, project_id: int, user_id: str, before: float
    ) -> tuple[list[int], list[int], list[int]]:
        sessions = [
            s.id
            for _, s in sorted(self._sessions.rows.items())
            if project_id
            and (s.project_id, s.user_id) == (project_id, user_id)
            and s.created_at < before
        ]
        in_project = set(self._sessions.project_session_ids(project_id))
        elsewhere = [
            e.id
            for _, e in sorted(self._episodes.rows.items())
            if e.session_id in in_project
            and e.acts_for == user_id
            and self._sessions.rows[e.session_id].user_id != user_id
            and e.created_at < before
        ]
        memories = [
            m.id
            for _, m in sorted(self._memories.rows.items())
            if (m.project_id, m.kind, m.user_id) == (project_id, MemoryKind.USER, user_id)
            and m.created_at < before
        ]
        return sessions, elsewhere, memories

    # -- what a project holds

    def project_sessions(self, project_id: int, limit: int) -> list[int]:
        return sorted(self._sessions.project_session_ids(project_id))[:limit]

    def project_memories(self, project_id: int, limit: int) -> list[int]:
        return sorted(i for i, m in self._memories.rows.items() if m.project_id == project_id)[
            :limit
        ]

    def project_entities(self, project_id: int, limit: int) -> list[int]:
        return sorted(i for i, x in self._graph.entities.items() if x.project_id == project_id)[
            :limit
        ]

    def project_holds(self, project_id: int) -> Counts:
        sessions = set(self._sessions.project_session_ids(project_id))
        return Counts(
            sessions=len(sessions),
            episodes=sum(1 for e in self._episodes.rows.values() if e.session_id in sessions),
            memories=len(self.project_memories(project_id, len(self._memories.rows))),
            entities=len(self.project_entities(project_id, len(self._graph.entities))),
        )

    # -- what goes with episodes and memories

    def episode_requests(self, ids: Sequence[int]) -> list[tuple[str, int, str]]:
        """(tenant, session, request id) of each of these episodes written with one."""
        found = []
        for i in sorted(set(ids)):
            request_id = self._episodes.request_ids.get(i)
            if i in self._episodes.rows and request_id is not None:
                session_id = self._episodes.rows[i].session_id
                found.append((self._sessions.rows[session_id].tenant, session_id, request_id))
        return found

    def memories_formed_from(self, episode_ids: Sequence[int]) -> list[int]:
        """Memories one of these episodes formed or changed (a set, as the
        store's UNION)."""
        wanted = set(episode_ids)
        formed = {i for i, m in self._memories.rows.items() if m.source_episode_id in wanted}
        changed = {
            r.memory_id
            for r in self._memories.history.values()
            if r.episode_id in wanted and r.memory_id in self._memories.rows
        }
        return sorted(formed | changed)

    def memory_request_ids(self, ids: Sequence[int]) -> list[tuple[str, str, str]]:
        """(tenant, user id, request id) of each of these memories created with one."""
        return [
            (m.tenant, m.user_id, m.request_id)
            for i, m in sorted(self._memories.rows.items())
            if i in set(ids) and m.request_id is not None
        ]

    def events_naming_memories(self, memory_ids: Sequence[int]) -> list[tuple[int, dict[str, Any]]]:
        """As the store's: the events of the episodes that formed these
        memories (``source_episode_id``) or changed them (their history)."""
        wanted = set(memory_ids)
        episodes = {
            m.source_episode_id
            for m in self._memories.rows.values()
            if m.id in wanted and m.source_episode_id is not None
        } | {
            r.episode_id
            for r in self._memories.history.values()
            if r.memory_id in wanted and r.episode_id is not None
        }
        return [
            (event.id, copy.deepcopy(event.payload))
            for event, _ in (self._events.rows[i] for i in sorted(self._events.rows))
            if event.episode_id in episodes
        ]

    def rewrite_event(self, event_id: int, payload: dict[str, Any]) -> None:
        event, tenant = self._events.rows[event_id]
        self._events.rows[event_id] = (replace(event, payload=copy.deepcopy(payload)), tenant)

    def sessions_summarised_since(self, first_seen: dict[int, tuple[int, float]]) -> list[int]:
        """Of these sessions, those with a summary written since the time given."""
        return [
            session_id
            for session_id, (_, at) in sorted(first_seen.items())
            if any(
                r.session_id == session_id and r.updated_at >= at
                for r in self._summaries.rows.values()
            )
        ]

    # -- records

    def delete_user_usage(self, tenant: str, user_id: str, project_id: int) -> int:
        gone = {u.id for u in self._user_usage(tenant, user_id, project_id)}
        self._memories.usage = [r for r in self._memories.usage if r[0].id not in gone]
        return len(gone)

    def delete_user_selections(self, tenant: str, user_id: str, project_id: int) -> int:
        gone = self._user_selections(tenant, user_id, project_id)
        self._memories.selections = [s for s in self._memories.selections if s not in gone]
        return len(gone)

    def unlink_llm_calls(self, tenant: str, user_id: str, project_id: int) -> int:
        """Keep the calls' counts, with no link to the user."""
        unlinked = 0
        for n, c in enumerate(self._usage.rows):
            if (c.tenant, c.user_id) == (tenant, user_id) and (
                not project_id or c.project_id == project_id
            ):
                self._usage.rows[n] = replace(c, user_id="")
                unlinked += 1
        return unlinked

    def index_work_before(self, at: float) -> int:
        """Index jobs queued by ``at`` that are still to run."""
        kinds = (
            job_kinds.INDEX_EPISODE,
            job_kinds.INDEX_MEMORY,
            job_kinds.INDEX_ENTITY,
            job_kinds.INDEX_SUMMARY,
        )
        return sum(
            1
            for j in self._jobs.rows
            if j.kind in kinds and j.created_at <= at and j.state in ("pending", "running")
        )

    def overviews_since(self, since: dict[int, float]) -> list[int]:
        """As the store's: each project's overviews written since its time."""
        return [
            r.id
            for project_id, at in sorted(since.items())
            for r in sorted(self._summaries.rows.values(), key=lambda r: r.id)
            if not r.session_id and r.project_id == project_id and r.updated_at >= at
        ]

    def sessions_with_episodes(self, session_ids: Sequence[int]) -> list[int]:
        held = {e.session_id for e in self._episodes.rows.values()}
        return sorted({int(i) for i in session_ids} & held & set(self._sessions.rows))

    # -- a project being deleted

    def mark_project_deleting(self, project_id: int, erasure_id: int) -> None:
        """As the store's: hidden from every read, its name given back to its
        tenant (the one it holds meanwhile has a control character)."""
        project = self._projects.rows[project_id]
        self._projects.rows[project_id] = replace(project, name=f"\x1fdeleting {erasure_id}")
        self._projects.deleting[project_id] = erasure_id

    def delete_project_row(self, project_id: int) -> int:
        """The row; its overviews go with it (the store's ON DELETE CASCADE)."""
        if self._projects.rows.pop(project_id, None) is None:
            return 0
        self._projects.deleting.pop(project_id, None)
        for i in [i for i, r in self._summaries.rows.items() if r.project_id == project_id]:
            del self._summaries.rows[i]
        return 1

    def delete_project_records(self, project_id: int) -> Counts:
        """The events, selections and uses recorded in the project, and its
        pending retention sweep."""
        events = [i for i, (ev, _) in self._events.rows.items() if ev.project_id == project_id]
        for i in events:
            del self._events.rows[i]
        memories = self._memories
        selections = [s for s in memories.selections if s[0].project_id == project_id]
        memories.selections = [s for s in memories.selections if s[0].project_id != project_id]
        usage = [u for u in memories.usage if u[2] == project_id]
        memories.usage = [u for u in memories.usage if u[2] != project_id]
        return Counts(
            extraction_events=len(events),
            selections=len(selections),
            memory_usage=len(usage),
            jobs_cancelled=self._cancel((job_kinds.RETAIN_PROJECT,), [project_id]),
        )

    # -- the graph an episode touched

    def _episode_aliases(self, wanted: set[int]) -> list[EntityAlias]:
        return [a for _, a in sorted(self._graph.aliases.items()) if a.episode_id in wanted]

    def graph_of_episodes(
        self, ids: Sequence[int]
    ) -> tuple[list[EntityEpisode], list[EntityAlias], list[Evidence], list[int]]:
        """Their mentions (by entity, episode), the aliases and evidence they
        gave, and the relationships they asserted or ended (by id)."""
        wanted = {int(i) for i in ids}
        graph = self._graph
        mentions = [EntityEpisode(*link) for link in sorted(graph.episode_links)
                    if link[1] in wanted]  # fmt: skip
        evidence = [v for _, v in sorted(graph.evidence.items()) if v.episode_id in wanted]
        relationships = sorted(
            r.id for r in graph.relationships.values() if {r.asserted_by, r.ended_by} & wanted
        )
        return mentions, self._episode_aliases(wanted), evidence, relationships

    def episode_fallout(self, ids: Sequence[int]) -> EpisodeFallout:
        wanted = {int(i) for i in ids}
        graph = self._graph
        found = EpisodeFallout()
        found.groups = {(v.from_id, v.label) for v in graph.evidence.values()
                        if v.episode_id in wanted}  # fmt: skip
        for entity_id, episode_id in sorted(graph.episode_links):
            if episode_id in wanted:
                found.linked[entity_id] = found.linked.get(entity_id, 0) + 1
        found.aliases = [Alias(a.id, a.entity_id, a.name) for a in self._episode_aliases(wanted)]
        for i in sorted(wanted & set(self._episodes.rows)):
            episode = self._episodes.rows[i]
            session = self._sessions.rows[episode.session_id]
            held = found.first_seen.get(session.id)
            first = episode.created_at if held is None else min(held[1], episode.created_at)
            found.first_seen[session.id] = (session.project_id or 0, first)
        return found

    def _linked_episodes(self, entity_id: int, gone: set[int]) -> list[Episode]:
        """The episodes linked to the entity that are not in ``gone``, by id."""
        ids = sorted(e for linked, e in self._graph.episode_links
                     if linked == entity_id and e not in gone)  # fmt: skip
        return [self._episodes.rows[i] for i in ids if i in self._episodes.rows]

    def aliases_still_given(self, aliases: Sequence[Alias], gone: Sequence[int]) -> dict[int, int]:
        """For each alias, the first episode not in ``gone`` linked to its
        entity that says its name (folded as SQLite's lower())."""
        given: dict[int, int] = {}
        for alias in aliases:
            name = alias.name.lower()
            for e in self._linked_episodes(alias.entity_id, {int(i) for i in gone}):
                if name in _ascii_lower(e.user_message) or name in _ascii_lower(e.ai_response):
                    given[alias.id] = e.id
                    break
        return given

    def last_names(self, aliases: Sequence[Alias], gone: Sequence[int]) -> dict[int, int]:
        """Of these aliases, one per entity left with no other alias that
        episodes not in ``gone`` still link: the one it is shown under (else
        its first), with the first of those episodes."""
        by_entity: dict[int, list[Alias]] = {}
        for alias in aliases:
            by_entity.setdefault(alias.entity_id, []).append(alias)
        kept: dict[int, int] = {}
        for entity_id, doomed in sorted(by_entity.items()):
            going = {a.id for a in doomed}
            if any(a.entity_id == entity_id and a.id not in going
                   for a in self._graph.aliases.values()):  # fmt: skip
                continue
            links = sorted(e for linked, e in self._graph.episode_links
                           if linked == entity_id and e not in {int(i) for i in gone})  # fmt: skip
            if not links or entity_id not in self._graph.entities:
                continue
            name = self._graph.entities[entity_id].name
            shown = next((a for a in doomed if a.name == name), doomed[0])
            kept[shown.id] = links[0]
        return kept

    def give_alias(self, alias_id: int, episode_id: int) -> None:
        alias = self._graph.aliases.get(alias_id)
        if alias is not None:
            self._graph.aliases[alias_id] = replace(alias, episode_id=episode_id)

    def delete_aliases(self, alias_ids: Sequence[int]) -> int:
        """The alias rows alone (the domain rebuilds the survivors' tokens)."""
        gone = {int(i) for i in alias_ids} & set(self._graph.aliases)
        for alias_id in gone:
            del self._graph.aliases[alias_id], self._graph.alias_graphs[alias_id]
        return len(gone)

    def count_facts(self, groups: Iterable[tuple[int, str]]) -> int:
        return sum(
            1
            for from_id, label in groups
            for r in self._graph.relationships.values()
            if (r.from_id, r.label) == (from_id, label)
        )

    def unsupported_entities(self, ids: Sequence[int]) -> list[int]:
        """Of these, those extraction made that no episode link or evidence
        holds up (a set: the store's query has no order)."""
        graph = self._graph
        linked = {entity_id for entity_id, _ in graph.episode_links}
        evidenced = {i for v in graph.evidence.values() for i in (v.from_id, v.to_id)}
        return sorted(
            i
            for i in {int(i) for i in ids}
            if i in graph.entities
            and graph.entities[i].source == "extraction"
            and i not in linked | evidenced
        )

    def clear_entity_notes(self, ids: Sequence[int]) -> None:
        for entity_id in ids:
            self._graph._change(entity_id, notes=None)

    def drop_merges_touching(self, entity_ids: Sequence[int]) -> int:
        """Forget the merges whose target or a source is one of these."""
        touched = {int(i) for i in entity_ids}
        doomed = [i for i, m in self._graph.merges.items()
                  if m.target_id in touched or touched & set(m.source_ids)]  # fmt: skip
        for merge_id in doomed:
            del self._graph.merges[merge_id]
        return len(doomed)

    # -- the bulk deletes

    def _cancel(self, kinds: tuple[str, ...], targets: Iterable[int]) -> int:
        """Pending jobs of these kinds for these targets go; how many did."""
        wanted = {int(i) for i in targets}
        gone = [j for j in self._jobs.rows
                if j.state == "pending" and j.kind in kinds and j.target_id in wanted]  # fmt: skip
        self._jobs.rows = [j for j in self._jobs.rows if j not in gone]
        return len(gone)

    def _drop_episode_rows(self, wanted: set[int]) -> None:
        """The episode rows, and what the store's foreign keys do with them:
        links and formation candidates go; aliases, distinctions, evidence,
        facts and memories keep their row without the episode."""
        graph = self._graph
        for i in wanted & set(self._episodes.rows):
            del self._episodes.rows[i]
            self._episodes.request_ids.pop(i, None)
            self._memories.candidates.pop(i, None)
        graph.episode_links = {link for link in graph.episode_links if link[1] not in wanted}
        for pair, said in graph.distinction_episodes.items():
            graph.distinction_episodes[pair] = None if said in wanted else said
        for rows, columns in (
            (graph.aliases, ("episode_id",)),
            (graph.evidence, ("episode_id",)),
            (graph.relationships, ("asserted_by", "ended_by")),
            (self._memories.rows, ("source_episode_id",)),
        ):
            for row_id, row in list(rows.items()):
                cleared = {c: None for c in columns if getattr(row, c) in wanted}
                if cleared:
                    rows[row_id] = replace(row, **cleared)

    def delete_episodes(self, ids: Sequence[int], *, whole_sessions: bool) -> Counts:
        """As the store's: the episodes with their events, formation
        candidates, evidence, episode links (their entities' mention counts
        down) and distinctions, and their pending extraction and formation.
        ``whole_sessions`` only spares the neighbours' keyword context, which
        the fakes do not keep."""
        if not ids:
            return Counts()
        wanted = {int(i) for i in ids}
        graph = self._graph
        indexed = sum(1 for i in wanted if i in self._episodes.rows
                      and self._episodes.rows[i].embed_state == JobState.DONE)  # fmt: skip
        cancelled = self._cancel((job_kinds.EXTRACT_EPISODE, job_kinds.FORM_MEMORIES), wanted)
        events = [i for i, (ev, _) in self._events.rows.items() if ev.episode_id in wanted]
        for i in events:
            del self._events.rows[i]
        candidates = sum(1 for i in wanted if i in self._memories.candidates)
        evidence = [i for i, v in graph.evidence.items() if v.episode_id in wanted]
        for i in evidence:
            del graph.evidence[i]
        mentions: dict[int, int] = {}
        for entity_id, episode_id in graph.episode_links:
            if episode_id in wanted:
                mentions[entity_id] = mentions.get(entity_id, 0) + 1
        for entity_id, n in mentions.items():
            count = graph.entities[entity_id].mention_count
            graph._change(entity_id, mention_count=max(count - n, 0))
        said = [d for d, e in graph.distinction_episodes.items() if e in wanted]
        graph.distinctions -= set(said)
        for pair in said:
            del graph.distinction_episodes[pair]
        self._drop_episode_rows(wanted)
        return Counts(
            episodes=len(ids),
            extraction_events=len(events),
            formation_candidates=candidates,
            evidence=len(evidence),
            mentions=sum(mentions.values()),
            vectors=indexed,
            jobs_cancelled=cancelled,
        )

    def delete_sessions(self, ids: Sequence[int]) -> Counts:
        """As the store's: sessions whose episodes are gone, with their
        summaries, TASK-tier memories (``delete_memories``), own graph outside
        a project, extraction events and pending summaries."""
        if not ids:
            return Counts()
        wanted = {int(i) for i in ids}
        summaries = [i for i, r in self._summaries.rows.items() if r.session_id in wanted]
        own_graph = self._sessions._own_graph(wanted)
        for entity_id in own_graph:
            self._graph._cascade(entity_id)
        gone = self.delete_memories(self._sessions._task_memories(wanted, True))
        cancelled = self._cancel((job_kinds.SUMMARIZE_SESSION,), wanted)
        events = [i for i, (ev, _) in self._events.rows.items() if ev.session_id in wanted]
        for i in events:
            del self._events.rows[i]
        for i in summaries:
            del self._summaries.rows[i]
        left = {i for i, e in self._episodes.rows.items() if e.session_id in wanted}
        self._drop_episode_rows(left)
        sessions = [i for i in wanted if self._sessions.rows.pop(i, None) is not None]
        return gone + Counts(
            sessions=len(sessions),
            summaries_removed=len(summaries),
            entities=len(own_graph),
            jobs_cancelled=cancelled,
            extraction_events=len(events),
        )

    def delete_memories(self, ids: Sequence[int]) -> Counts:
        """As the store's: the memories with their whole history, their uses,
        and their pending expiry and history purge."""
        if not ids:
            return Counts()
        wanted = {int(i) for i in ids}
        memories = self._memories
        history = [i for i, r in memories.history.items() if r.memory_id in wanted]
        for i in history:
            del memories.history[i]
        usage = [u for u in memories.usage if u[0].memory_id in wanted]
        memories.usage = [u for u in memories.usage if u[0].memory_id not in wanted]
        cancelled = self._cancel((job_kinds.EXPIRE_MEMORY, job_kinds.PURGE_MEMORY_HISTORY), wanted)
        removed = [i for i in wanted if memories.rows.pop(i, None) is not None]
        return Counts(
            memories=len(removed),
            memory_history=len(history),
            memory_usage=len(usage),
            vectors=len(removed),
            jobs_cancelled=cancelled,
        )

    def delete_entities(self, ids: Sequence[int]) -> Counts:
        """As the store's: the entities with their aliases, tokens, links,
        distinctions, edges and evidence, and their pending resolution."""
        if not ids:
            return Counts()
        wanted = {int(i) for i in ids}
        graph = self._graph
        counted = [
            sum(1 for r in rows.values() if {r.from_id, r.to_id} & wanted)
            for rows in (graph.relationships, graph.evidence)
        ]
        aliases = sum(1 for a in graph.aliases.values() if a.entity_id in wanted)
        cancelled = self._cancel((job_kinds.RESOLVE_ENTITY,), wanted)
        removed = sorted(wanted & set(graph.entities))
        for entity_id in removed:
            graph._cascade(entity_id)
        return Counts(
            entities=len(removed),
            aliases=aliases,
            facts=counted[0],
            evidence=counted[1],
            vectors=len(removed),
            jobs_cancelled=cancelled,
        )


class FakeDocuments:
    """What each vector collection is built from, read from the fakes' rows as
    the store reads its tables (store/documents.py): text and payload made by
    core/documents.py; an entity's text names its aliases, first made first."""

    def __init__(
        self,
        episodes: FakeEpisodes,
        memories: FakeMemories,
        summaries: FakeSummaries,
        graph: FakeGraph,
    ) -> None:
        self._episodes = episodes
        self._memories = memories
        self._summaries = summaries
        self._graph = graph

    def all_ids(self, table: str) -> set[int]:
        rows: Mapping[str, Mapping[int, Any]] = {
            "episodes": self._episodes.rows,
            "entities": self._graph.entities,
            "summaries": self._summaries.rows,
            "memories": self._memories.rows,
        }
        if table not in rows:
            raise ValueError(table)
        return set(rows[table])

    def episodes(self, ids: Sequence[int]) -> dict[int, Document]:
        found = self._episodes.get_many(ids)
        return {
            i: (
                episode_text(e.user_message, e.ai_response),
                episode_payload(e.session_id, e.created_at, e.occur_at),
            )
            for i, e in found.items()
        }

    def entities(self, ids: Sequence[int]) -> dict[int, Document]:
        graph = self._graph
        return {
            i: (
                entity_text(e.name, e.type, e.notes, graph._read(i).aliases),
                entity_payload(e.project_id, e.session_id),
            )
            for i in ids
            if (e := graph.entities.get(i)) is not None
        }

    def summaries(self, ids: Sequence[int]) -> dict[int, Document]:
        """A session summary's project is its session's, read now."""
        found = (self._summaries.find(i) for i in ids)
        return {
            s.id: (s.content, {"sessionId": s.session_id, "projectId": s.project_id or 0})
            for s in found
            if s is not None
        }

    def memories(self, ids: Sequence[int]) -> dict[int, Document]:
        found = self._memories.get_many(ids)
        return {
            i: (
                memory_text(m.title, m.content),
                memory_payload(
                    m.kind, m.tier, m.project_id, m.user_id, m.session_id, m.agent_id, m.tenant
                ),
            )
            for i, m in found.items()
        }


class FakeRestore:
    """A restore's writes with the times and counters the export carried, as
    the store's (store/restore.py): a project or a session keeps its name or
    external id, refused where the tenant holds it; the graph's rows go into
    the graph's fake as the store's graph writes put them (an alias indexed,
    an episode link once)."""

    def __init__(
        self,
        projects: FakeProjects,
        sessions: FakeSessions,
        memories: FakeMemories,
        summaries: FakeSummaries,
        graph: FakeGraph,
    ) -> None:
        self._projects = projects
        self._sessions = sessions
        self._memories = memories
        self._summaries = summaries
        self._graph = graph

    def insert_project(
        self,
        values: Mapping[str, Any],
        created_at: float,
        updated_at: float,
        tenant: str,
    ) -> int:
        name = values["name"]
        held = [p.id for p in self._projects.rows.values() if (p.tenant, p.name) == (tenant, name)]
        if held:
            raise project_name_taken(name, held[0], RESTORE_KEEPS_NAME)
        labels = values.get("single_valued_labels")
        project = Project(
            id=next(self._projects._next),
            name=name,
            description=values["description"],
            colour=values["colour"],
            icon=values["icon"],
            notes=values["notes"],
            system_prompt=values["system_prompt"],
            created_at=created_at,
            updated_at=updated_at,
            tenant=tenant,
            retention=values["retention"],
            single_valued_labels=tuple(labels) if labels else None,
            memory_formation=values.get("memory_formation"),
        )
        self._projects.rows[project.id] = project
        return project.id

    def insert_session(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        created_at: float,
        tenant: str,
        user_id: str = "",
        agent_id: str = "",
    ) -> int:
        held = [
            s.id
            for s in self._sessions.rows.values()
            if (s.tenant, s.external_id) == (tenant, external_id)
        ]
        if held:
            raise AlreadyExists(
                f"a session with external_id {external_id!r} already exists (session {held[0]});"
                " a restore keeps its sessions' external_ids, so it cannot go into a server"
                " that already holds one of them"
            )
        session = Session(
            id=next(self._sessions._next),
            external_id=external_id,
            name=name,
            project_id=project_id,
            metadata=json.loads(json.dumps(metadata)),
            created_at=created_at,
            tenant=tenant,
            user_id=user_id,
            agent_id=agent_id,
        )
        self._sessions.rows[session.id] = session
        return session.id

    def insert_memory(self, m: Memory, tenant: str) -> int:
        """``m`` with its new project and session ids; its id and retry key go."""
        memory = replace(
            m,
            id=next(self._memories._next),
            metadata=json.loads(json.dumps(m.metadata)),
            request_id=None,
            tenant=tenant,
        )
        self._memories.rows[memory.id] = memory
        return memory.id

    def insert_revision(self, r: Revision) -> None:
        """``r`` with its new memory id, kept at its own time."""
        by = ChangedBy(r.request_id, r.principal, r.episode_id, r.reason)
        self._memories.record(r.previous, r.action, r.changed, by, at=r.changed_at)

    def insert_summary(self, s: Summary) -> int:
        """A session summary's project is its session's (read at query time)."""
        summary = replace(
            s, id=next(self._summaries._next), project_id=0 if s.session_id else s.project_id
        )
        self._summaries.rows[summary.id] = summary
        return summary.id

    def insert_entity(self, e: Entity, tenant: str) -> int:
        """``e`` with its new project id, in the project's graph; its own id is
        ignored, its times, counters, source and resolution kept."""
        entity_id = next(self._graph._entity_ids)
        self._graph._put_entity(
            entity_id, replace(e, session_id=0, tenant=tenant), name_key(e.name, e.type)
        )
        return entity_id

    def insert_alias(self, a: EntityAlias) -> None:
        """``a`` with its new entity and episode ids, and its words indexed."""
        self._graph.add_alias(
            a.entity_id, a.name, method=a.method, score=a.score, episode_id=a.episode_id,
            refresh=False, at=a.created_at,
        )  # fmt: skip

    def insert_episode_link(self, entity_id: int, episode_id: int) -> None:
        self._graph._link(entity_id, episode_id)

    def insert_merge(self, m: EntityMerge) -> int:
        return self._graph.insert_merge(m)

    def ensure_own_alias(self, entity_ids: Sequence[int]) -> None:
        """Entities restored without aliases (an older export) are known by their name."""
        graph = self._graph
        for entity_id in entity_ids:
            if not any(a.entity_id == entity_id for a in graph.aliases.values()):
                name = graph.entities[entity_id].name
                graph.add_alias(entity_id, name, method=METHOD_NEW, refresh=False)

    def insert_relationship(self, r: Relationship) -> int:
        relationship_id = next(self._graph._relationship_ids)
        self._graph.relationships[relationship_id] = replace(
            r, id=relationship_id, valid_at=r.created_at if r.valid_at is None else r.valid_at
        )
        return relationship_id

    def insert_evidence(self, e: Evidence) -> int:
        evidence_id = next(self._graph._evidence_ids)
        self._graph.evidence[evidence_id] = replace(e, id=evidence_id)
        return evidence_id


class FakeUsage:
    """The LLM's account, what the LLM work was for (episodes, memories
    formed, entities), and the tenants of LLM jobs' targets."""

    def __init__(
        self,
        projects: FakeProjects,
        sessions: FakeSessions,
        episodes: FakeEpisodes,
        graph: FakeGraph,
        jobs: FakeJobs,
    ) -> None:
        self.rows: list[LLMCall] = []
        self._projects = projects
        # Set by FakeUnitOfWork (the memories are made apart).
        self._memories: FakeMemories
        self._sessions = sessions
        self._episodes = episodes
        self._graph = graph
        self._jobs = jobs

    def insert(self, calls: Sequence[LLMCall]) -> None:
        self.rows.extend(calls)

    def spent(self, since: float, tenants: Sequence[str] | None = None) -> dict[str, int]:
        found: dict[str, int] = {}
        for c in self.rows:
            if c.at >= since:
                found[c.tenant] = found.get(c.tenant, 0) + c.prompt_tokens + c.completion_tokens
        if tenants is None:
            return found
        return {t: found.get(t, 0) for t in tenants}

    def spent_by_users(
        self, since: float, tenant: str, users: Sequence[str] | None = None
    ) -> dict[str, int]:
        found: dict[str, int] = {}
        for c in self.rows:
            if c.at >= since and c.tenant == tenant and c.user_id:
                found[c.user_id] = found.get(c.user_id, 0) + c.prompt_tokens + c.completion_tokens
        if users is None:
            return found
        return {u: found.get(u, 0) for u in users if u}

    def stage_buckets(
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = None,
        project_id: int | None = None,
        users: Sequence[str] | None = None,
    ) -> list[StageBucket]:
        groups: dict[tuple[int, str, str], list[LLMCall]] = {}
        for c in self.rows:
            mine = c.project_id == project_id if project_id is not None else c.tenant == tenant
            if users is not None and c.user_id not in users:
                mine = False
            if mine and start <= c.at < end:
                key = (int(c.at // bucket_seconds), c.stage, c.outcome)
                groups.setdefault(key, []).append(c)
        return [
            StageBucket(
                b,
                stage,
                outcome,
                len(calls),
                sum(c.prompt_tokens for c in calls),
                sum(c.completion_tokens for c in calls),
                sum(c.seconds for c in calls),
                sum(1 for c in calls if c.estimated),
            )
            for (b, stage, outcome), calls in sorted(groups.items())
        ]

    def activity_buckets(
        self,
        start: float,
        end: float,
        bucket_seconds: float,
        *,
        tenant: str | None = None,
        project_id: int | None = None,
        users: Sequence[str] | None = None,
    ) -> list[ActivityBucket]:
        """As the store's: episodes stored, memories formation created and
        entities created in [start, end) of one project or one tenant, by
        bucket; with ``users``, only what work for them made (their sessions'
        episodes, the memories formed from those or their USER memories
        formed, the entities those episodes mention)."""
        if users is not None and not users:
            return []
        named = None if users is None else set(users)
        sessions = self._sessions.rows

        def owned(project: int, owner_tenant: str) -> bool:
            return project == project_id if project_id is not None else owner_tenant == tenant

        def theirs(episode_id: int | None) -> bool:
            e = self._episodes.rows.get(episode_id) if episode_id is not None else None
            return e is not None and named is not None and sessions[e.session_id].user_id in named

        counts: dict[int, list[int]] = {}

        def count(at: float, column: int) -> None:
            if start <= at < end:
                counts.setdefault(int(at // bucket_seconds), [0, 0, 0])[column] += 1

        for e in self._episodes.rows.values():
            x = sessions[e.session_id]
            if owned(x.project_id, x.tenant) and (named is None or x.user_id in named):
                count(e.created_at, 0)
        for m in self._memories.rows.values():
            if owned(m.project_id, m.tenant) and m.source == "formation":
                if named is None or (
                    m.user_id in named if m.kind == MemoryKind.USER else
                    m.kind == MemoryKind.PROJECT and theirs(m.source_episode_id)
                ):  # fmt: skip
                    count(m.created_at, 1)
        for entity_id, n in self._graph.entities.items():
            if owned(n.project_id, n.tenant) and (
                named is None
                or any(theirs(ep) for i, ep in self._graph.episode_links if i == entity_id)
            ):
                count(n.created_at, 2)
        return [ActivityBucket(b, *counts[b]) for b in sorted(counts)]

    def _owner_of(self, kind: str, target_id: int) -> WorkOwner | None:
        if kind in (job_kinds.EXTRACT_EPISODE, job_kinds.FORM_MEMORIES):
            episode = self._episodes.rows.get(target_id)
            session = self._sessions.rows.get(episode.session_id) if episode else None
            return WorkOwner(session.tenant, session.user_id) if session else None
        if kind == job_kinds.SUMMARIZE_SESSION:
            session = self._sessions.rows.get(target_id)
            return WorkOwner(session.tenant, session.user_id) if session else None
        if kind == job_kinds.RESOLVE_ENTITY:
            entity = self._graph.entities.get(target_id)
            if entity is None:
                return None
            owner = self._projects.rows.get(entity.project_id) or self._sessions.rows.get(
                entity.session_id
            )
            return WorkOwner(owner.tenant if owner is not None else DEFAULT_TENANT)
        return None

    def job_owners(self, kind: str, target_ids: Sequence[int]) -> dict[int, WorkOwner]:
        found = {t: self._owner_of(kind, t) for t in set(target_ids)}
        return {t: owner for t, owner in found.items() if owner is not None}

    def defer_tenant_jobs(
        self, kind: str, tenant: str, until: float, error: str, user_id: str = ""
    ) -> list[Job]:
        if user_id and kind == job_kinds.RESOLVE_ENTITY:
            return []
        held = sorted(
            (
                j
                for j in self._jobs.rows
                if j.kind == kind
                and j.state == "pending"
                and j.run_after < until
                and (owner := self._owner_of(kind, j.target_id)) is not None
                and owner.tenant == tenant
                and (not user_id or owner.user_id == user_id)
            ),
            key=lambda j: (j.priority, j.run_after, j.id),
        )[:DEFER_SWEEP]
        for j in held:
            j.run_after, j.last_error = until, error
        return [Job(j.id, j.kind, j.target_id, 0, j.priority) for j in held]

    def deferred_jobs(self, kind: str, saying: str, after: float, after_id: int = 0) -> list[Job]:
        found = sorted(
            (
                j
                for j in self._jobs.rows
                if j.kind == kind
                and j.state == "pending"
                and j.run_after > after
                and j.id > after_id
                and saying in j.last_error
            ),
            key=lambda j: j.id,
        )[:DEFER_SWEEP]
        return [Job(j.id, j.kind, j.target_id, j.attempts, j.priority) for j in found]

    def resume_jobs(self, job_ids: Sequence[int], at: float) -> None:
        wanted = set(job_ids)
        for j in self._jobs.rows:
            if j.id in wanted and j.state == "pending":
                j.run_after, j.last_error = at, ""


class FakeVectors:
    """Vectors beside their rows, as PostgreSQL's pgvector tables keep them
    (store/postgres/vectors.py): a point per (collection, id), written
    again by a later put; a collection exists once the vector index made it
    (``make``, its ``ensure_collection``). A collection never made refuses
    the put as a missing table does (SQLite has no such repository)."""

    NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")

    def __init__(self) -> None:
        self.collections: dict[str, dict[int, tuple[list[float], dict[str, Any]]]] = {}

    def make(self, collection: str) -> None:
        self.collections.setdefault(collection, {})

    def put(
        self, collection: str, row_id: int, vector: Sequence[float], payload: Mapping[str, Any]
    ) -> None:
        if not self.NAME.fullmatch(collection):
            raise ValueError(f"bad collection name {collection!r}")
        points = self.collections.get(collection)
        if points is None:
            raise VectorTableMissing(f'relation "vectors_{collection}" does not exist')
        points[int(row_id)] = ([float(x) for x in vector], json.loads(json.dumps(dict(payload))))


@dataclass
class FakeUnitOfWork:
    """``core.repositories.UnitOfWork`` in memory: one "database" the unit
    tier's rules read and write, with savepoints that roll back alone."""

    projects: FakeProjects = field(default_factory=FakeProjects)
    sessions: FakeSessions = field(default_factory=FakeSessions)
    graph: FakeGraph = field(default_factory=FakeGraph)
    meta: FakeMeta = field(default_factory=FakeMeta)
    memories: FakeMemories = field(default_factory=FakeMemories)
    jobs: FakeJobs = field(init=False)
    episodes: FakeEpisodes = field(init=False)
    usage: FakeUsage = field(init=False)
    summaries: FakeSummaries = field(init=False)
    events: FakeEvents = field(init=False)
    erasures: FakeErasures = field(init=False)
    documents: FakeDocuments = field(init=False)
    restore: FakeRestore = field(init=False)
    vectors: FakeVectors = field(default_factory=FakeVectors)

    def __post_init__(self) -> None:
        self.jobs = FakeJobs(self.projects, self.sessions)
        self.episodes = FakeEpisodes(self.sessions, self.jobs)
        self.graph.projects, self.graph.sessions = self.projects, self.sessions
        self.graph.episodes = self.episodes
        self.jobs.episodes = self.episodes
        self.sessions.projects, self.sessions.episodes = self.projects, self.episodes
        self.usage = FakeUsage(self.projects, self.sessions, self.episodes, self.graph, self.jobs)
        self.summaries = FakeSummaries(self.projects, self.sessions, self.episodes)
        self.episodes.summaries = self.summaries
        self.events = FakeEvents(self.sessions)
        self.jobs.memories, self.jobs.summaries = self.memories, self.summaries
        self.erasures = FakeErasures(
            self.projects, self.sessions, self.episodes, self.memories, self.events, self.graph,
            self.summaries, self.jobs, self.usage,
        )  # fmt: skip
        self.projects.memories, self.projects.sessions = self.memories, self.sessions
        self.projects.graph = self.graph
        self.usage._memories = self.memories
        self.sessions.memories = self.memories
        self.documents = FakeDocuments(self.episodes, self.memories, self.summaries, self.graph)
        self.restore = FakeRestore(
            self.projects, self.sessions, self.memories, self.summaries, self.graph
        )
        self.sessions.summaries, self.sessions.graph = self.summaries, self.graph

    @contextlib.contextmanager
    def savepoint(self, name: str) -> Iterator[None]:
        kept = copy.deepcopy(self.__dict__)
        try:
            yield
        except BaseException:
            self.__dict__.update(kept)
            raise


def dumps(value: Any) -> str:
    """Rows as text, for comparing a fake's answer with a store's."""
    return json.dumps(value, sort_keys=True, default=str)


class FakeDatabase:
    """``core.storage.Database`` over one FakeUnitOfWork: each write or read
    runs its function on it (what the domain's queues and workers are handed)."""

    def __init__(self, uow: FakeUnitOfWork | None = None) -> None:
        self.uow = uow if uow is not None else FakeUnitOfWork()

    async def write(self, fn: Any) -> Any:
        return fn(self.uow)

    async def read(self, fn: Any) -> Any:
        return fn(self.uow)

    async def read_in_transaction(self, fn: Any) -> Any:
        return fn(self.uow)
