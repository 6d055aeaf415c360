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
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from nexus_grpc.core import jobs as job_kinds
from nexus_grpc.core import tenancy
from nexus_grpc.core.erasure import RemovalTargets
from nexus_grpc.core.graph import (
    CURRENT,
    Entity,
    Evidence,
    Interval,
    Relationship,
    When,
)
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.llm_usage import LLMCall, StageBucket, WorkOwner
from nexus_grpc.core.models import (
    Episode,
    JobState,
    MemoryKind,
    MemoryScope,
    NewEpisode,
    Project,
    Session,
    SummaryProgress,
    Tier,
)
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
from nexus_grpc.domain import memory_visibility
from nexus_grpc.errors import AlreadyExists, NotFound, ResourceInfo
from nexus_grpc.store.projects import COLUMNS as PROJECT_COLUMNS
from nexus_grpc.store.selections import KEEP_SECONDS
from nexus_grpc.store.usage import DEFER_SWEEP


def _ids() -> Iterator[int]:
    """Ids from 1, as a table's; copied with the rest by a savepoint."""
    return itertools.count(1)


class FakeProjects:
    def __init__(self) -> None:
        self.rows: dict[int, Project] = {}
        self._next = _ids()
        # Set by FakeUnitOfWork (the owners read memories and sessions).
        self.memories: FakeMemories
        self.sessions: FakeSessions

    def insert(self, values: Mapping[str, Any], tenant: str = DEFAULT_TENANT) -> Project:
        held = [p.id for p in self.rows.values() if (p.tenant, p.name) == (tenant, values["name"])]
        if held:
            raise AlreadyExists(
                f"a project named {values['name']!r} already exists in this tenant:"
                f" project {held[0]}",
                details=(ResourceInfo("project", str(held[0])),),
            )
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

    def get(self, project_id: int, tenant: str | None = None) -> Project:
        project = self.rows.get(project_id)
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
            if p.id > (after_id or 0) and tenant in (None, p.tenant)
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
            raise AlreadyExists(
                f"a project named {name!r} already exists in this tenant: project {held[0]}",
                details=(ResourceInfo("project", str(held[0])),),
            )
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
        project = self.rows.get(project_id)
        return project is not None and (tenant is None or project.tenant == tenant)

    def tenant_of(self, project_id: int) -> str | None:
        project = self.rows.get(project_id)
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
        return (tenant is None or session.tenant == tenant) and not (
            retained_at is not None and self.past(session, retained_at)
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
    def __init__(self, sessions: FakeSessions, jobs: FakeJobs) -> None:
        self.rows: dict[int, Episode] = {}
        self.request_ids: dict[int, str | None] = {}
        self._sessions = sessions
        self._jobs = jobs
        self._next = _ids()

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
            self.request_ids[episode.id] = row.request_id
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
        """As the store's, with no summaries stored: every episode is new."""
        if self._jobs.pending_job(job_kinds.SUMMARIZE_SESSION, session_id) is not None:
            return SummaryProgress(True, 0, 0)
        mine = sorted((e for e in self.rows.values() if e.session_id == session_id),
                      key=lambda e: e.id)  # fmt: skip
        new = min(len(mine), enough_episodes)
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
            if self._sessions.rows[episode.session_id].tenant != tenant:
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
        self.rows[episode_id] = replace(episode, extract_state=state, extract_error=error)

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
    def __init__(self) -> None:
        self.entities: dict[int, Entity] = {}
        self.evidence: dict[int, Evidence] = {}
        self.relationships: dict[int, Relationship] = {}
        self._entity_ids = _ids()
        self._evidence_ids = _ids()
        self._relationship_ids = _ids()

    def insert_entity(
        self,
        graph: tuple[int, int],
        surface: str,
        etype: str,
        notes: str | None,
        *,
        source: str,
        **_: Any,
    ) -> int:
        entity_id = next(self._entity_ids)
        at = time.time()
        self.entities[entity_id] = Entity(
            entity_id, surface, etype, notes, 1, None, source, at, at, graph[0], graph[1]
        )
        return entity_id

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

    def evidence_of(self, from_id: int, label: str) -> list[Evidence]:
        return [e for e in self.evidence.values() if (e.from_id, e.label) == (from_id, label)]

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


def _holds(r: Relationship, when: When) -> bool:
    if when.history:
        return True
    if when.as_of is not None:
        return r.valid_at <= when.as_of and (r.invalid_at is None or r.invalid_at > when.as_of)
    return r.invalid_at is None


class FakeMemories:
    """Memories, their history, their usage, formation's candidates and
    selections' answers. Visibility is the domain's rule in Python
    (domain/memory_visibility.visible), with the caller's tenant and expiry
    as the store's SQL adds them. Keyword search (the stores' own full-text
    ranking) is not faked: a rule that needs it has a whole-server test.

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
    """Of what an erasure needs of the store, what an ordinary delete uses:
    the formation events that name a memory, to scrub its words from them;
    and the reads of the summaries an erased episode may be quoted in."""

    def __init__(self, memories: FakeMemories, events: FakeEvents) -> None:
        self._memories = memories
        self._events = events
        # Set by FakeUnitOfWork (what a removal's summaries are read from).
        self.sessions: FakeSessions
        self.episodes: FakeEpisodes
        self.summaries: FakeSummaries

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

    def overviews_since(self, since: dict[int, float]) -> list[int]:
        """As the store's: each project's overviews written since its time."""
        return [
            r.id
            for project_id, at in sorted(since.items())
            for r in sorted(self.summaries.rows.values(), key=lambda r: r.id)
            if not r.session_id and r.project_id == project_id and r.updated_at >= at
        ]

    def sessions_with_episodes(self, session_ids: Sequence[int]) -> list[int]:
        held = {e.session_id for e in self.episodes.rows.values()}
        return sorted({int(i) for i in session_ids} & held & set(self.sessions.rows))


class FakeUsage:
    """The LLM's account, and the tenants of LLM jobs' targets."""

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

    def __post_init__(self) -> None:
        self.jobs = FakeJobs(self.projects, self.sessions)
        self.episodes = FakeEpisodes(self.sessions, self.jobs)
        self.jobs.episodes = self.episodes
        self.sessions.projects, self.sessions.episodes = self.projects, self.episodes
        self.usage = FakeUsage(self.projects, self.sessions, self.episodes, self.graph, self.jobs)
        self.summaries = FakeSummaries(self.projects, self.sessions, self.episodes)
        self.events = FakeEvents(self.sessions)
        self.jobs.memories, self.jobs.summaries = self.memories, self.summaries
        self.erasures = FakeErasures(self.memories, self.events)
        self.projects.memories, self.projects.sessions = self.memories, self.sessions
        self.sessions.memories = self.memories
        self.sessions.summaries, self.sessions.graph = self.summaries, self.graph
        self.erasures.sessions, self.erasures.episodes = self.sessions, self.episodes
        self.erasures.summaries = self.summaries

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
