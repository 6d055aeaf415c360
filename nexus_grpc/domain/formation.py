"""Memories that form themselves: what a user tells the assistant becomes a
USER (or PROJECT) memory, kept true over time.

An episode's extraction call also proposes memory candidates when formation
applies to it (``forms_for``): its project forms memories (its setting, or
the default: USER) and its session names its user (for USER memories) or
the project forms PROJECT memories too. The candidates are checked as they
are parsed (llm/formation_prompts.parse_memories: the user's own quoted words, no
questions, no assistant claims) and kept for this module's durable job,
which decides, for each, against the owner's most similar live memories:

- an identical memory exists (its words, case and punctuation aside): NOTHING;
- nothing similar exists: ADD;
- otherwise the LLM chooses, in one call for all of an episode's open
  candidates: ADD, UPDATE a memory (its content replaced, history kept),
  SUPERSEDE one (archived, the new one added) or NOTHING.

The owner is the session's user (USER) or the project and the session's
agent (PROJECT); what the LLM is shown is only that owner's memories, found
with the visibility rule bound to the episode's tenant. A candidate older
than the memory it would change never changes it (an imported exchange from
before a newer fact), and episodes of one session form in ``occur_time``
order, so a later fact supersedes an earlier one and not the reverse.

Every change is a history entry naming the episode and the reason; every
new memory carries ``source`` formation and its episode. Re-running an
episode's formation finds its memories already there and changes nothing.
At the memory cap, the episode's formation is refused as a whole, recorded
in its ``memory_error``. Its end is announced on the extraction event
stream with the operations applied.

Extraction meets formation through one interface: ``ExtractionHandoff``
(``HANDOFF``), the four things extraction asks (what its prompt asks for,
keep an extraction's candidates, its failure, its re-run), declared on
extraction's side as ``extraction.FormationHandoff``. Formation's words to
the LLM, the candidates' included, are llm/formation_prompts.py's.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from nexus_grpc.core import jobs, llm_usage, tenancy
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.models import (
    DEFAULT_MEMORY_FORMATION,
    Episode,
    JobState,
    MemoryFormation,
    MemoryKind,
    Session,
    Tier,
)
from nexus_grpc.core.records import EXTRACTION_DONE, EXTRACTION_FAILED, ChangedBy, Memory
from nexus_grpc.core.records import UPDATE as REVISED
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.memory_visibility import MemoryScope
from nexus_grpc.domain.retrieval import memory_ranking
from nexus_grpc.domain.retrieval.search import MemorySearch
from nexus_grpc.llm import LLMBadOutput, LLMClient, LLMUnreachable
from nexus_grpc.llm.formation_prompts import (
    ADD,
    FORM_USER,
    FORM_USER_AND_PROJECT,
    FORMATION_OPTIONS,
    FORMATION_SCHEMA,
    NOTHING,
    SUPERSEDE,
    UPDATE,
    Kept,
    MemoryCandidate,
    Question,
    build_formation_messages,
    parse_formation,
)

log = logging.getLogger(__name__)
WriteFn = Callable[[UnitOfWork], Any]
SIMILAR = 5
# An episode waiting for an earlier one of its session tries again this soon.
DEFER_SECONDS = 1.0
TIERS = {"longterm": Tier.LONGTERM, "session": Tier.SESSION, "task": Tier.TASK}
FORMATION = "formation"
#: How formation's own error begins when the extraction it needed failed.
EXTRACTION_FAILED_PREFIX = "extraction failed: "


@dataclass(frozen=True)
class Forms:
    """What an episode forms: USER memories (of ``user_id``), PROJECT ones."""

    user_id: str
    project: bool

    @property
    def prompt(self) -> str | None:
        if self.project:
            return FORM_USER_AND_PROJECT
        return FORM_USER if self.user_id else None

    def allows(self, about: str) -> bool:
        return bool(self.user_id) if about == "user" else self.project


def forms_for(uow: UnitOfWork, session: Session, episode: Episode | None) -> Forms | None:
    """What the episode of the session forms now; None: nothing.

    USER memories form only for the user the episode's writer acted for
    (``Episode.acts_for``, checked when it was written): this job runs with
    no caller, so the right is checked again here rather than trusted to
    the edge alone (docs/security.md). With no episode: what the session's
    episodes form, their writers' rights aside (``due``)."""
    if not session.project_id:
        return None
    setting = uow.projects.memory_formation(session.project_id)
    mode = MemoryFormation(setting) if setting else DEFAULT_MEMORY_FORMATION
    if mode == MemoryFormation.OFF:
        return None
    acted = episode is None or episode.acts_for == session.user_id
    user_id = session.user_id if acted else ""
    forms = Forms(user_id, mode == MemoryFormation.USER_AND_PROJECT)
    return forms if forms.prompt else None


def due(uow: UnitOfWork, session: Session) -> bool:
    """Whether the session's new episodes are due a formation: their project
    forms memories and the session names its user (or the project forms
    PROJECT memories too). The writer's right is checked when it runs, which
    then says why nothing formed."""
    return forms_for(uow, session, None) is not None


@dataclass(frozen=True)
class Operation:
    action: str
    memory_id: int = 0
    related_memory_id: int = 0
    content: str = ""
    reason: str = ""
    user_id: str = ""


@dataclass(frozen=True)
class _Planned:
    candidate: MemoryCandidate
    action: str
    memory_id: int
    reason: str


@dataclass(frozen=True)
class _Context:
    episode_id: int
    session: Session
    occur_at: float
    forms: Forms | None
    candidates: list[MemoryCandidate]
    waiting_on: int | None
    #: The user the episode's writer acted for (``Episode.acts_for``).
    acts_for: str = ""


def _context(uow: UnitOfWork, episode_id: int) -> _Context | None:
    episode = uow.episodes.find(episode_id)
    if episode is None or episode.memory_state != JobState.PENDING:
        return None
    session = uow.sessions.get(episode.session_id)
    raw = uow.memories.candidates_of(episode_id) or []
    return _Context(
        episode_id,
        session,
        episode.occur_at,
        forms_for(uow, session, episode),
        [MemoryCandidate(**c) for c in raw],
        uow.episodes.formation_ahead(episode),
        episode.acts_for,
    )


def _key(text: str) -> str:
    """Words of a memory, case and punctuation aside: identical memories meet."""
    return " ".join(re.findall(r"\w+", text.lower()))


def _date(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).date().isoformat()


class MemoryFormationJob:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        events: EventBroadcaster,
        llm: LLMClient | None,
        memories: Memories,
        similar: MemorySearch,
        *,
        model: str,
        timeout: float,
    ) -> None:
        self.db = db
        self.signals = signals
        self.events = events
        self._llm = llm
        self.memories = memories
        # The owner's similar memories, read through the search's own paths.
        self.similar = similar
        self.model = model
        self.timeout = timeout

    async def run(self, episode_id: int, priority: int = jobs.LIVE) -> WriteFn | None:
        """Decide the episode's memory operations; returns the write that
        applies them. Raises ``LLMError`` (or ``Unavailable`` for the index)
        for the worker to retry or wait on."""
        ctx = await self.db.read_in_transaction(lambda c: _context(c, episode_id))
        if ctx is None:
            return None
        # The session's user's work, whether or not the writer's right lets
        # it form USER memories: a key that may not act for them reads none of it.
        llm_usage.attribute(ctx.session.project_id, ctx.session.tenant, ctx.session.user_id)
        if ctx.waiting_on is not None:
            # An earlier exchange of this session forms first.
            return lambda c: c.jobs.enqueue(
                jobs.FORM_MEMORIES,
                [episode_id],
                run_after=time.time() + DEFER_SECONDS,
                priority=priority,
            )
        forms = ctx.forms
        if forms is None:
            why = "memory formation is off for this episode"
            if ctx.session.user_id and ctx.acts_for != ctx.session.user_id:
                why = (
                    "no USER memory forms from this episode: the key that wrote it could not"
                    " act for the session's user"
                )
            return lambda c: _finish(c, ctx, [], 0, why)
        candidates = [c for c in ctx.candidates if forms.allows(c.about)]
        planned: list[_Planned] = []
        questions: list[tuple[MemoryCandidate, list[Memory]]] = []
        for candidate in candidates:
            similar = await self._similar(ctx, candidate)
            same = next((m for m in similar if _key(m.content) == _key(candidate.content)), None)
            if same is not None:
                planned.append(_Planned(candidate, NOTHING, same.id, "already known"))
            elif not similar:
                planned.append(_Planned(candidate, ADD, 0, "nothing similar known"))
            else:
                questions.append((candidate, similar))
        llm_calls = 0
        if questions:
            planned += await self._ask(ctx, questions)
            llm_calls = 1
        return lambda c: _apply(c, ctx, planned, llm_calls, self.memories.cap)

    async def _similar(self, ctx: _Context, c: MemoryCandidate) -> list[Memory]:
        """The owner's most similar live memories: the same user's USER
        memories, or the same project and agent's PROJECT memories, seen with
        the visibility rule bound to the episode's tenant."""
        session = ctx.session
        if c.about == "user":
            scope = MemoryScope(session.project_id, session.user_id, session.id)
            kind = MemoryKind.USER
        else:
            scope = MemoryScope(session.project_id, "", session.id, session.agent_id)
            kind = MemoryKind.PROJECT
        token = tenancy.bind(tenancy.Caller(tenant=session.tenant))
        try:
            keyword = await self.similar.keyword(c.content, scope, SIMILAR * 2)
            semantic = await self.similar.semantic(c.content, scope, SIMILAR * 2)
        finally:
            tenancy.reset(token)
        pool: dict[int, Memory] = {}
        for m in (h.memory for h in [*semantic, *keyword]):
            if m.kind != kind or (kind == MemoryKind.USER and m.user_id != session.user_id):
                continue
            pool.setdefault(m.id, m)
        if not pool:
            return []
        # The search's scores are made for ranking (its query leaves out the
        # scope's common words); how alike two memories are is measured on
        # their whole texts.
        vectors = await self.memories.embedder.embed(
            [c.content, *(m.content for m in pool.values())]
        )
        return memory_ranking.most_similar(
            vectors[0], zip(vectors[1:], pool.values(), strict=True), SIMILAR
        )

    async def _ask(
        self, ctx: _Context, questions: Sequence[tuple[MemoryCandidate, list[Memory]]]
    ) -> list[_Planned]:
        if self._llm is None:
            raise LLMUnreachable("no LLM server configured")
        since = await self.db.read(
            lambda c: {m.id: _memory_time(c, m) for _, similar in questions for m in similar}
        )
        asked = [
            Question(
                n,
                candidate.content,
                _date(ctx.occur_at),
                [Kept(m.id, m.content, _date(since[m.id])) for m in similar],
            )
            for n, (candidate, similar) in enumerate(questions, 1)
        ]
        answer = await self._llm.chat_json(
            self.model,
            build_formation_messages(asked),
            FORMATION_SCHEMA,
            temperature=FORMATION_OPTIONS["temperature"],
            num_predict=FORMATION_OPTIONS["num_predict"],
            timeout=self.timeout,
        )
        decided = parse_formation(answer, asked)
        planned = []
        for q, (candidate, _) in zip(asked, questions, strict=True):
            d = decided.get(q.number)
            if d is None:
                # No usable answer for it: never added blindly next to a
                # similar memory it may contradict; the job is retried.
                raise LLMBadOutput(f"formation answer decided nothing for candidate {q.number}")
            if d.action in (UPDATE, SUPERSEDE) and since[d.memory_id] > ctx.occur_at:
                # The memory is newer than what this exchange says.
                planned.append(
                    _Planned(candidate, NOTHING, d.memory_id, f"older than memory {d.memory_id}")
                )
                continue
            planned.append(_Planned(candidate, d.action, d.memory_id, d.reason or d.action.lower()))
        return planned

    def committed(self) -> None:
        self.signals.wake(jobs.INDEX_MEMORY, jobs.EXPIRE_MEMORY)
        self.events.notify()


def _memory_time(uow: UnitOfWork, m: Memory) -> float:
    """When what a memory says was said: its episode's time, else its last write."""
    if m.source_episode_id:
        at = uow.episodes.occur_at_of(m.source_episode_id)
        if at is not None:
            return at
    return m.updated_at or m.created_at


def _row(ctx: _Context, c: MemoryCandidate) -> dict[str, Any]:
    session = ctx.session
    user = c.about == "user"
    return {
        "kind": int(MemoryKind.USER if user else MemoryKind.PROJECT),
        "title": c.title,
        "content": c.content,
        "tier": int(TIERS.get(c.tier, Tier.LONGTERM)),
        "project_id": session.project_id,
        "agent_id": "" if user else session.agent_id,
        "user_id": session.user_id if user else "",
        "session_id": session.id,
        "confidence": 1.0,
        "metadata": {},
        "expire_at": None,
        "source": FORMATION,
        "source_episode_id": ctx.episode_id,
    }


def _apply(
    uow: UnitOfWork,
    ctx: _Context,
    planned: Sequence[_Planned],
    llm_calls: int,
    cap: int,
) -> None:
    """Write the operations, the episode's state and the event, together."""
    episode = uow.episodes.find(ctx.episode_id)
    if episode is None or episode.memory_state != JobState.PENDING:
        return
    tenant = ctx.session.tenant
    # What each owner gains: an ADD, or a change to a memory gone meanwhile
    # (added instead); a SUPERSEDE archives one for the one it adds.
    growth: dict[tuple[int, int, str, str], int] = {}
    for p in planned:
        gone = p.memory_id and uow.memories.find(p.memory_id) is None
        if p.action == ADD or (p.action in (UPDATE, SUPERSEDE) and gone):
            row = _row(ctx, p.candidate)
            owner = (row["kind"], row["project_id"], row["agent_id"], row["user_id"])
            growth[owner] = growth.get(owner, 0) + 1
    for (kind, project_id, agent_id, user_id), more in growth.items():
        count = uow.memories.count_in_cap_scope(kind, project_id, agent_id, user_id, tenant)
        if count + more > cap:
            error = (
                f"memory cap reached: {count} memories already held for this owner and"
                f" {more} more would form (the limit is {cap}); nothing was formed from"
                " this episode"
            )
            _finish(uow, ctx, [], llm_calls, error, state=JobState.FAILED, proposed=len(planned))
            return
    done: list[Operation] = []
    for p in planned:
        c = p.candidate
        user_id = ctx.session.user_id if c.about == "user" else ""
        by = ChangedBy(episode_id=ctx.episode_id, reason=p.reason)
        current = uow.memories.find(p.memory_id) if p.memory_id else None
        if p.action == NOTHING:
            done.append(Operation(NOTHING, 0, p.memory_id, c.content, p.reason, user_id))
        elif p.action == UPDATE and current is not None:
            changes = {"title": c.title, "content": c.content}
            changed = [k for k, val in changes.items() if getattr(current, k) != val]
            if changed:
                uow.memories.record(current, REVISED, changed, by)
                memory_upkeep.update(uow, current.id, changes)
            done.append(Operation(UPDATE, current.id, 0, c.content, p.reason, user_id))
        else:
            related = 0
            if p.action == SUPERSEDE and current is not None:
                if current.tier != Tier.ARCHIVE:
                    uow.memories.record(current, REVISED, ["tier"], by)
                    memory_upkeep.update(uow, current.id, {"tier": int(Tier.ARCHIVE)})
                related = current.id
            added = memory_upkeep.insert(uow, _row(ctx, c), None, tenant)
            action = SUPERSEDE if related else ADD
            done.append(Operation(action, added.id, related, c.content, p.reason, user_id))
    _finish(uow, ctx, done, llm_calls, "")


def _finish(
    uow: UnitOfWork,
    ctx: _Context,
    operations: Sequence[Operation],
    llm_calls: int,
    error: str,
    *,
    state: JobState = JobState.DONE,
    proposed: int | None = None,
) -> None:
    """Ends the episode's formation: its state, and the event that says what
    was proposed and decided (on DONE, ``error`` is a note: why nothing was)."""
    uow.episodes.set_memory_state(ctx.episode_id, state, error)
    done = state == JobState.DONE
    formed: dict[str, Any] = {
        "operations": [asdict(o) for o in operations],
        "llm_calls": llm_calls,
        "proposed": len(operations) if proposed is None else proposed,
        # Whose memories formation weighed: watchers that may not act for
        # this user see none of its detail (domain/graph.py).
        "user_id": ctx.session.user_id,
    }
    if done and error:
        formed["note"] = error
    uow.events.insert(
        ctx.episode_id,
        ctx.session.id,
        ctx.session.project_id,
        EXTRACTION_DONE if done else EXTRACTION_FAILED,
        error="" if done else error,
        payload={FORMATION: formed},
    )


def note_retry(uow: UnitOfWork, episode_id: int, error: str) -> None:
    """Formation failed an attempt and runs again: still pending, but the last
    error shows on the episode."""
    episode = uow.episodes.find(episode_id)
    if episode is not None and episode.memory_state == JobState.PENDING:
        uow.episodes.set_memory_state(episode_id, JobState.PENDING, error)


def mark_failed(uow: UnitOfWork, episode_id: int, error: str) -> None:
    """Formation cannot happen (its job, or its extraction, was dead-lettered):
    the episode shows FAILED, and watchers hear it."""
    ctx = _context(uow, episode_id)
    if ctx is None:
        return
    _finish(uow, ctx, [], 0, error, state=JobState.FAILED)


def candidates_for(forms: Forms | None, memories: Sequence[MemoryCandidate]) -> list[dict]:
    """What extraction keeps for formation: only what formation may form."""
    if forms is None:
        return []
    return [asdict(c) for c in memories if forms.allows(c.about)]


class ExtractionHandoff:
    """Where extraction meets formation, and the only place: extraction calls
    these (``extraction.FormationHandoff`` declares them) and nothing else of
    this module, and this module calls nothing of extraction. Whether an
    episode forms memories, and what follows, is decided here."""

    def prompt(self, uow: UnitOfWork, session: Session, episode: Episode) -> str | None:
        """The memory candidates the episode's extraction prompt asks for
        (``FORM_USER`` or ``FORM_USER_AND_PROJECT``); None: none."""
        if episode.memory_state != JobState.PENDING:
            return None
        forms = forms_for(uow, session, episode)
        return forms.prompt if forms is not None else None

    def extracted(
        self, uow: UnitOfWork, episode: Episode, memories: Sequence[MemoryCandidate], priority: int
    ) -> None:
        """The episode's extraction is being written: what formation may form
        of its candidates is kept, and formation's durable job queued, in the
        same transaction (at the extraction's priority: an import's forms
        behind live traffic)."""
        if episode.memory_state != JobState.PENDING:
            return
        forms = forms_for(uow, uow.sessions.get(episode.session_id), episode)
        uow.memories.put_candidates(episode.id, candidates_for(forms, memories))
        uow.jobs.enqueue(jobs.FORM_MEMORIES, [episode.id], priority=priority)

    def extraction_failed(self, uow: UnitOfWork, episode_id: int, error: str) -> None:
        """The episode's extraction was dead-lettered: its formation, which
        needed it, fails with it."""
        # The extraction worker's reason already names its stage when it
        # gave up on a dependency ("extraction failed: ..."): said once.
        reason = error.removeprefix(EXTRACTION_FAILED_PREFIX)
        mark_failed(uow, episode_id, f"{EXTRACTION_FAILED_PREFIX}{reason}")

    def extraction_requeued(self, uow: UnitOfWork, session: Session, episode_id: int) -> None:
        """The episode is extracted again: its memories form again from the
        new answer (what they already hold is found and left as it is)."""
        if due(uow, session):
            uow.episodes.set_memory_pending([episode_id])


#: The one ``ExtractionHandoff`` (it holds nothing).
HANDOFF = ExtractionHandoff()
