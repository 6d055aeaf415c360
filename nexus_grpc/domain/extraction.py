"""Entity extraction, the use case: one episode in, graph upserts and an event out.

``run`` does the slow part (the LLM calls: the extraction, and at most one
question about names the resolution rules cannot settle) outside any
transaction and returns a write function; the job worker commits that write
in the same transaction as the job's deletion, so the graph, the episode's
state, the event and the entity index jobs land together or not at all.

Re-running an episode is idempotent: mention counts move only for
(entity, episode) links that are new, and the facts the episode asserted or
ended are replaced, not added to (its evidence is dropped and written again,
and the intervals derived anew).

Memory formation rides on the same call and the same write; extraction meets
it through one interface, ``FormationHandoff`` (answered by
``formation.HANDOFF``): what the prompt asks for, the candidates to keep, a
failed extraction and a re-run. Nothing else of domain/formation.py is called
here, and formation calls nothing of this module.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any, Protocol

from nexus_grpc.core import jobs, llm_usage, tenancy
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.graph import ASSERT, END, Entity, Relationship
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.models import Episode, JobState, Session
from nexus_grpc.core.names import name_key, search_key
from nexus_grpc.core.records import EXTRACTION_DONE, EXTRACTION_FAILED
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import facts
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.entity_resolution import (
    NO_ANSWERS,
    Answers,
    EntityResolution,
    settle,
)
from nexus_grpc.domain.formation import HANDOFF
from nexus_grpc.domain.resolution_rules import Mention
from nexus_grpc.domain.session_rights import require_may_write
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.llm import LLMClient, LLMInputTooLong, LLMUnreachable, tokens
from nexus_grpc.llm.extraction_prompts import (
    ENTITY_TYPES,
    EXTRACTION_OPTIONS,
    MAX_CURRENT_FACTS,
    MAX_KNOWN_ENTITIES,
    CurrentFact,
    ExtractionResult,
    KnownEntity,
    build_extraction_part_messages,
    exchange_text,
    extraction_schema,
    merge_results,
    parse_extraction,
)
from nexus_grpc.llm.formation_prompts import MemoryCandidate

log = logging.getLogger(__name__)
_ENTITY_FIELDS = frozenset(f.name for f in fields(Entity))
WriteFn = Callable[[UnitOfWork], Any]
# Words in a row looked up as names known to the graph: "New York City".
MAX_NAME_WORDS = 3


class FormationHandoff(Protocol):
    """All that extraction asks of memory formation (domain/formation.py's
    ``ExtractionHandoff`` answers it)."""

    def prompt(self, uow: UnitOfWork, session: Session, episode: Episode) -> str | None:
        """The memory candidates the episode's prompt asks for; None: none."""

    def extracted(
        self, uow: UnitOfWork, episode: Episode, memories: Sequence[MemoryCandidate], priority: int
    ) -> None:
        """In the extraction's write: keep its candidates, queue formation."""

    def extraction_failed(self, uow: UnitOfWork, episode_id: int, error: str) -> None:
        """The extraction was dead-lettered."""

    def extraction_requeued(self, uow: UnitOfWork, session: Session, episode_id: int) -> None:
        """The episode is queued for extraction again."""


#: Memory formation, as extraction sees it.
FORMATION: FormationHandoff = HANDOFF


@dataclass(frozen=True)
class _EpisodeContext:
    user_message: str
    ai_response: str
    graph: tuple[int, int]
    known: list[KnownEntity]
    facts: list[CurrentFact]
    # The memory candidates the prompt asks for (None: formation does not apply).
    formation: str | None = None
    # Whose work this is, for the LLM's account: the session's user's.
    project_id: int = 0
    tenant: str = ""
    user_id: str = ""


def episode_scope(uow: UnitOfWork, episode_id: int) -> tuple[int, int] | None:
    """(session id, project id or 0) of an episode, or None if it is gone."""
    return uow.episodes.scope_of(episode_id)


def graph_of(session_id: int, project_id: int) -> tuple[int, int]:
    """The graph an episode's facts go to, as (project_id, session_id).

    A project's sessions share the project's graph. A session outside any
    project has its own: the project isolation rule keeps such a session's memory to
    itself,
    and a shared pool would put one session's names in another's prompt.
    """
    return (project_id, 0) if project_id else (0, session_id)


def _phrase_keys(text: str) -> list[str]:
    words = search_key(text).split()
    return sorted(
        {
            " ".join(words[i : i + size])
            for size in range(1, MAX_NAME_WORDS + 1)
            for i in range(len(words) - size + 1)
        }
    )


def _since(at: float | None) -> str:
    return "" if not at else datetime.fromtimestamp(at, UTC).date().isoformat()


def _context(uow: UnitOfWork, episode_id: int) -> _EpisodeContext | None:
    scope = episode_scope(uow, episode_id)
    if scope is None:
        return None
    episode = uow.episodes.get(episode_id)
    # Only entities of the episode's own graph: another project's names must
    # not leak into this one's prompt (and from there into its graph).
    graph = graph_of(*scope)
    # The entities the exchange names come first (with what holds about
    # them now, so the model can end it), then the graph's most recent.
    named = uow.graph.entities_named(
        *graph,
        _phrase_keys(f"{episode.user_message}\n{episode.ai_response}"),
        MAX_KNOWN_ENTITIES,
    )
    recent = uow.graph.recent_entities(graph[0], MAX_KNOWN_ENTITIES, session_id=graph[1])
    shown = {e.id: e for e in named}
    for e in reversed(recent):
        if len(shown) >= MAX_KNOWN_ENTITIES:
            break
        shown.setdefault(e.id, e)
    known = [KnownEntity(e.name, e.type, e.aliases) for e in reversed(list(shown.values()))]
    current = [
        CurrentFact(f, label, t, _since(at))
        for f, label, t, at in uow.graph.current_facts([e.id for e in named], MAX_CURRENT_FACTS)
    ]
    session = uow.sessions.get(episode.session_id)
    return _EpisodeContext(
        episode.user_message,
        episode.ai_response,
        graph,
        known,
        current,
        FORMATION.prompt(uow, session, episode),
        scope[1],
        session.tenant,
        session.user_id,
    )


# The types a label's ends have, where the label says (from, to); an answer
# naming "Jordan" the person and "Jordan" the place gives edges whose ends are
# names only, and "located_in Jordan" means the place.
LABEL_END_TYPES: dict[str, tuple[str | None, str | None]] = {
    "lives_in": ("person", "place"),
    "born_in": ("person", "place"),
    "travelled_to": ("person", "place"),
    "traveled_to": ("person", "place"),
    "visited": ("person", "place"),
    "located_in": (None, "place"),
    "works_at": ("person", "organization"),
    "founded": ("person", "organization"),
    "married_to": ("person", "person"),
    "reports_to": ("person", "person"),
    "knows": ("person", "person"),
    "friend_of": ("person", "person"),
    "manages": ("person", "person"),
}


Named = dict[str, list[tuple[int, str]]]  # surface (lower case) -> [(entity id, type)]


def _pick(found: list[tuple[int, str]], wanted: str | None, other: int | None) -> int | None:
    """One of the answer's entities of a name: the only one, else the one of
    the type the label wants, else the one that is not the edge's other end
    when that leaves one; otherwise none: a fact on a guessed entity is worse
    than a missing one."""
    ids = list(dict.fromkeys(entity_id for entity_id, _ in found))
    if len(ids) == 1:
        return ids[0]
    typed = [entity_id for entity_id, etype in found if etype == wanted]
    if len(typed) == 1:
        return typed[0]
    rest = [entity_id for entity_id in ids if entity_id != other]
    return rest[0] if other is not None and len(rest) == 1 else None


def _edge_ends(
    uow: UnitOfWork,
    graph: tuple[int, int],
    source: str,
    target: str,
    label: str,
    named: Named,
) -> tuple[int | None, int | None]:
    """An edge's ends: names of this answer (of the label's types where a name
    is two entities), else exactly one entity of the graph with that key (of
    any type); otherwise unknown."""
    wanted_from, wanted_to = LABEL_END_TYPES.get(label, (None, None))
    src = _known(uow, graph, source) if source.lower() not in named else None
    dst = _known(uow, graph, target) if target.lower() not in named else None
    if target.lower() in named:
        dst = _pick(named[target.lower()], wanted_to, src)
    if source.lower() in named:
        src = _pick(named[source.lower()], wanted_from, dst)
    return src, dst


def _known(uow: UnitOfWork, graph: tuple[int, int], surface: str) -> int | None:
    found = {
        i
        for etype in ENTITY_TYPES
        for i in uow.graph.entities_with_key(graph, name_key(surface, etype), [etype])
    }
    return found.pop() if len(found) == 1 else None


def apply_result(
    uow: UnitOfWork,
    episode_id: int,
    result: ExtractionResult,
    answers: Answers = NO_ANSWERS,
    llm_calls: int = 1,
    priority: int = jobs.LIVE,
) -> int | None:
    """Resolve and upsert what was extracted, record the facts it asserted
    and ended, mark the episode done and log the event.

    Returns the event id, or None when the episode was deleted meanwhile.
    """
    scope = episode_scope(uow, episode_id)
    if scope is None:
        return None
    session_id, project_id = scope
    graph = graph_of(session_id, project_id)
    episode = uow.episodes.get(episode_id)
    at = episode.occur_at
    mentions = [Mention(e.name, e.type, e.notes) for e in result.entities]
    resolved = settle(uow, graph, mentions, answers, episode_id)
    named: Named = {}
    entity_ids: list[int] = []
    for m in mentions:
        entity_id = resolved[(m.key, m.type)]
        entity_ids.append(entity_id)
        named.setdefault(m.surface.lower(), []).append((entity_id, m.type))

    groups = uow.graph.drop_episode_evidence(episode_id)
    asserted: list[tuple[int, int, str]] = []
    for kind, edges in ((ASSERT, result.relationships), (END, result.ended)):
        for r in edges:
            src, dst = _edge_ends(uow, graph, r.source, r.target, r.label, named)
            if src is None or dst is None or src == dst:
                continue
            uow.graph.add_evidence(
                src, dst, r.label, kind, at, episode_id=episode_id, notes=r.notes
            )
            groups.add((src, r.label))
            if kind == ASSERT:
                asserted.append((src, dst, r.label))
    facts.rederive(uow, groups, facts.single_valued(uow, graph))

    entities = uow.graph.get_entities(entity_ids)
    relationships = [
        rel
        for src, dst, label in dict.fromkeys(asserted)
        if (rel := uow.graph.relationship_at(src, dst, label, at)) is not None
    ]
    payload = {
        "parts": result.parts,
        "llm_calls": llm_calls,
        "entities": [
            entity_to_dict(entities[i]) for i in dict.fromkeys(entity_ids) if i in entities
        ],
        "relationships": [rel_to_dict(r) for r in relationships],
    }
    uow.episodes.set_extract_state(episode_id, JobState.DONE)
    event_id = uow.events.insert(
        episode_id, session_id, project_id, EXTRACTION_DONE, payload=payload
    )
    FORMATION.extracted(uow, episode, result.memories, priority)
    return event_id


def mark_failed(uow: UnitOfWork, job: Job, error: str) -> None:
    """Dead letter: the episode shows FAILED with the error, and watchers hear
    it; its memory formation, which needed the extraction, fails with it."""
    scope = episode_scope(uow, job.target_id)
    if scope is None:
        return
    uow.episodes.set_extract_state(job.target_id, JobState.FAILED, error)
    uow.events.insert(job.target_id, scope[0], scope[1], EXTRACTION_FAILED, error=error)
    FORMATION.extraction_failed(uow, job.target_id, error)


def note_retry(uow: UnitOfWork, job: Job, error: str) -> None:
    """Still pending, but the last error is visible on the episode."""
    uow.episodes.set_extract_state(job.target_id, JobState.PENDING, error)


def entity_to_dict(e: Entity) -> dict[str, Any]:
    return asdict(e)


def entity_from_dict(d: dict[str, Any]) -> Entity:
    values = {k: v for k, v in d.items() if k in _ENTITY_FIELDS}
    values["aliases"] = tuple(values.get("aliases", ()))  # JSON gives a list back
    return Entity(**values)


def rel_to_dict(r: Relationship) -> dict[str, Any]:
    return asdict(r)


def rel_from_dict(d: dict[str, Any]) -> Relationship:
    return Relationship(**d)


class Extraction:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        events: EventBroadcaster,
        llm: LLMClient | None,
        *,
        model: str,
        timeout: float,
        resolution: EntityResolution | None = None,
    ) -> None:
        self.db = db
        self.signals = signals
        self.events = events
        self._llm = llm
        self.model = model
        self.timeout = timeout
        self.resolution = resolution or EntityResolution(db, llm, model=model, timeout=timeout)

    async def run(self, episode_id: int, priority: int = jobs.LIVE) -> WriteFn | None:
        """Extract one episode; returns the write that records the outcome.

        Raises an ``LLMError`` for the worker to retry or wait on.
        """
        ctx = await self.db.read_in_transaction(lambda c: _context(c, episode_id))
        if ctx is None:
            return None  # deleted: nothing left to extract
        llm_usage.attribute(ctx.project_id, ctx.tenant, ctx.user_id)
        llm = self._llm
        if llm is None:
            raise LLMUnreachable("no LLM server configured")
        exchange = exchange_text(ctx.user_message, ctx.ai_response)
        num_predict = EXTRACTION_OPTIONS["num_predict"]
        # The fixed prompt is measured as a part's, with the longest known
        # list: what is left is the room for the exchange itself.
        fixed = build_extraction_part_messages(
            "", ctx.known, part=(999, 999), facts=ctx.facts, formation=ctx.formation
        )
        budget = await llm.input_budget(self.model, fixed, num_predict, timeout=self.timeout)
        if budget <= 0:
            raise LLMInputTooLong(
                f"{self.model}'s context has no room for an episode next to the instructions"
            )
        pieces = tokens.split_to_budget(exchange, budget)
        results: list[ExtractionResult] = []
        # Every part gets the same known list and facts (the budget was
        # measured with them); the merge joins names the parts spell alike.
        for i, piece in enumerate(pieces, 1):
            part = (i, len(pieces)) if len(pieces) > 1 else None
            answer = await llm.chat_json(
                self.model,
                build_extraction_part_messages(
                    piece, ctx.known, part, facts=ctx.facts, formation=ctx.formation
                ),
                extraction_schema(ctx.formation),
                temperature=EXTRACTION_OPTIONS["temperature"],
                num_predict=num_predict,
                timeout=self.timeout,
            )
            results.append(parse_extraction(answer, ctx.user_message, ctx.formation))
        result = results[0] if len(results) == 1 else merge_results(results)
        if result.parts > 1:
            log.info("episode %d was extracted in %d parts", episode_id, result.parts)
        mentions = [Mention(e.name, e.type, e.notes) for e in result.entities]
        answers = await self.resolution.ask(ctx.graph, mentions, exchange)
        llm_calls = len(pieces) + answers.llm_calls
        log.debug(
            "episode %d: %d entities, %d relationships, %d ended, %d LLM calls",
            episode_id,
            len(result.entities),
            len(result.relationships),
            len(result.ended),
            llm_calls,
        )
        return lambda uow: apply_result(uow, episode_id, result, answers, llm_calls, priority)

    def committed(self) -> None:
        """After the worker committed outcomes: index the entities, wake watchers."""
        self.signals.wake(jobs.INDEX_ENTITY, jobs.RESOLVE_ENTITY, jobs.FORM_MEMORIES)
        self.events.notify()

    async def requeue(self, episode_id: int, all_failed: bool) -> int:
        """ExtractEpisode: queue one episode again, or every failed one."""
        if all_failed:
            if episode_id:
                raise InvalidArgument(
                    "give episode_id or all_failed, not both", fields=("episode_id", "all_failed")
                )
            tenant = tenancy.visible()
            if tenant is None:
                queued = await self.db.write(_requeue_all_failed)
            else:
                queued = await self.db.write(
                    functools.partial(_requeue_tenant_failed, tenant=tenant)
                )
        else:
            v.positive_id("episode_id", episode_id)
            tenant = tenancy.visible()
            queued = await self.db.write(lambda c: _requeue_one(c, episode_id, tenant))
        self.signals.wake(jobs.EXTRACT_EPISODE)
        return queued


def _requeue_one(uow: UnitOfWork, episode_id: int, tenant: str | None = None) -> int:
    episode = uow.episodes.get(episode_id, tenant)  # NOT_FOUND, another tenant's too
    # A new extraction forms the session's user's memories again.
    require_may_write(uow.sessions.get(episode.session_id), "extract episodes of")
    uow.jobs.requeue_failed(jobs.EXTRACT_EPISODE, episode_id)
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [episode_id])  # coalesces with a pending one
    uow.episodes.set_extract_state(episode_id, JobState.PENDING)
    FORMATION.extraction_requeued(uow, uow.sessions.get(episode.session_id), episode_id)
    return 1


def _requeue_tenant_failed(uow: UnitOfWork, tenant: str) -> int:
    """``all_failed`` for a caller confined to one tenant: only its episodes."""
    # Only the episodes the caller may write into: those of sessions with no
    # user, or of a user its key may act for; the others stay failed.
    mine = [
        episode_id
        for episode_id, user_id in uow.episodes.failed_extractions(tenant)
        if not user_id or tenancy.may_act_for(user_id)
    ]
    for episode_id in mine:
        _requeue_one(uow, episode_id)
    return len(mine)


def _requeue_all_failed(uow: UnitOfWork) -> int:
    """``all_failed`` for a caller who sees every tenant: every failed episode
    pending again, each with its extract job (coalescing with a pending one,
    as ``_requeue_one``'s does)."""
    uow.jobs.requeue_failed(jobs.EXTRACT_EPISODE)
    episode_ids = uow.episodes.reset_failed_extractions()
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episode_ids)
    return len(episode_ids)
