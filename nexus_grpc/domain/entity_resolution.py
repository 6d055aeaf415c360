"""Resolving the names an extraction gave, as a use case: the rules of
domain/resolution_rules.py, the entity vectors, and at most one LLM question an
episode; then writing what was decided.

It runs twice for an episode. Before the write, outside any transaction
(``ask``): the rules read the graph, names the rules leave open or that are
new but have a near neighbour by vector become questions, and all of them go
to the LLM in one call. In the write's transaction (``settle``): the rules
run again on what the graph holds now, and the LLM's answers settle what the
rules cannot. A name the LLM was not asked about or did not answer for is
never merged on a guess: it becomes an entity of its own, marked pending,
and a ``resolve:entity`` job asks again later (``resolve_pending``), merging
it (domain/merges.py) if the answer names another entity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nexus_grpc.core import documents, jobs, llm_usage
from nexus_grpc.core.graph import (
    MERGE_LLM,
    METHOD_LLM,
    METHOD_NEW,
    PENDING,
    RESOLVED,
    SOURCE_EXTRACTION,
    CandidateRow,
    Entity,
)
from nexus_grpc.core.names import compatible_types, display_form
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import entity_writes, merges
from nexus_grpc.domain.resolution_rules import (
    BLOCK_LIMIT,
    Match,
    Mention,
    Novel,
    Resolver,
    Unsure,
    blocks,
    lookups,
)
from nexus_grpc.embedding import Embedder
from nexus_grpc.errors import DependencyError
from nexus_grpc.llm import LLMClient, LLMError, LLMUnreachable
from nexus_grpc.llm.resolution_prompts import (
    MAX_QUESTIONS,
    RESOLUTION_OPTIONS,
    RESOLUTION_SCHEMA,
    Candidate,
    Question,
    build_resolution_messages,
    parse_resolution,
)
from nexus_grpc.vectors import Filter, MatchAny, VectorIndex

log = logging.getLogger(__name__)

ENTITIES = "entities"
# Cosine similarity of two entities' texts (name, aliases, type, notes) at
# which the vector neighbour of a new name becomes a question for the LLM;
# never a merge on its own: "Lisbon" and "Porto" are close by vector.
# Measured with MiniLM on the graph evaluation's dev set (docs/graph.md).
VECTOR_ASK = 0.86
VECTOR_NEIGHBOURS = 3
CONTEXT_CHARS = 2000

Graph = tuple[int, int]
NameKey = tuple[str, str]  # (name key, type)


@dataclass(frozen=True)
class Answers:
    """What the LLM said about the names the rules could not settle."""

    # Name -> the entity it is, or 0 for none of those it was shown.
    chosen: dict[NameKey, int] = field(default_factory=dict)
    # Name -> the candidates it was asked about.
    asked: dict[NameKey, tuple[int, ...]] = field(default_factory=dict)
    llm_calls: int = 0


NO_ANSWERS = Answers()


def _name(m: Mention) -> NameKey:
    return (m.key, m.type)


def _placeholder(entity_id: int, m: Mention) -> CandidateRow:
    """A name that will be a new entity, as later names of the episode see it."""
    key = m.key
    return CandidateRow(
        entity_id,
        display_form(m.surface, m.type),
        key,
        m.type,
        m.notes,
        RESOLVED,
        frozenset({key}),
        frozenset(),
    )


class EntityResolution:
    def __init__(
        self,
        db: Database,
        llm: LLMClient | None,
        *,
        model: str,
        timeout: float,
        embedder: Embedder | None = None,
        index: VectorIndex | None = None,
    ) -> None:
        self.db = db
        self._llm = llm
        self.model = model
        self.timeout = timeout
        self.embedder = embedder
        self.index = index

    # Before the write --------------------------------------------------------

    async def ask(self, graph: Graph, mentions: Sequence[Mention], context: str) -> Answers:
        """The one LLM question of an episode, if the rules leave any name open."""
        if not mentions:
            return NO_ANSWERS
        ruled = await self.db.read(lambda c: _open_names(c, graph, mentions))
        novel = [m for m, candidates in ruled if candidates is None]
        near = await self._neighbours(graph, novel)
        open_names: list[tuple[Mention, tuple[int, ...]]] = []
        for m, candidates in ruled:
            found = candidates if candidates is not None else near.get(_name(m), ())
            if found:
                open_names.append((m, found))
        open_names = open_names[:MAX_QUESTIONS]
        if not open_names or self._llm is None:
            return NO_ANSWERS
        questions = await self.db.read(lambda c: _questions(c, open_names))
        asked = {_name(m): ids for m, ids in open_names}
        try:
            # Asked during another stage's work (an episode's extraction):
            # its own stage in the same account.
            with llm_usage.stage(llm_usage.RESOLUTION):
                answer = await self._llm.chat_json(
                    self.model,
                    build_resolution_messages(_clip(context, CONTEXT_CHARS), questions),
                    RESOLUTION_SCHEMA,
                    temperature=RESOLUTION_OPTIONS["temperature"],
                    num_predict=RESOLUTION_OPTIONS["num_predict"],
                    timeout=self.timeout,
                )
            by_number = parse_resolution(answer, questions)
        except LLMError as exc:
            # The names it would have settled stay apart, pending; a
            # resolve:entity job asks again later.
            log.warning("entity resolution question failed; names stay apart: %s", exc)
            return Answers({}, {}, llm_calls=1)
        chosen = {
            _name(m): by_number[q.number]
            for (m, _), q in zip(open_names, questions, strict=True)
            if q.number in by_number
        }
        return Answers(chosen, asked, llm_calls=1)

    async def _neighbours(
        self, graph: Graph, mentions: Sequence[Mention]
    ) -> dict[NameKey, tuple[int, ...]]:
        """Entities close to new names by vector: questions, never answers.
        The names are embedded in one batch (one model run an episode)."""
        if not mentions or self.embedder is None or self.index is None:
            return {}
        texts = [
            documents.entity_text(display_form(m.surface, m.type), m.type, m.notes)
            for m in mentions
        ]
        graph_filter = Filter(
            must=(MatchAny("projectId", (graph[0],)), MatchAny("sessionId", (graph[1],)))
        )
        close: dict[NameKey, list[int]] = {}
        try:
            vectors = await self.embedder.embed(texts)
            for m, vector in zip(mentions, vectors, strict=True):
                hits = await self.index.search(
                    ENTITIES, vector, filter=graph_filter, limit=VECTOR_NEIGHBOURS
                )
                close[_name(m)] = [h.id for h in hits if h.score >= VECTOR_ASK]
        except DependencyError as exc:  # the embedder or the index
            log.debug("no vector neighbours for this episode's new names: %s", exc)
            return {}
        ids = sorted({i for found in close.values() for i in found})
        if not ids:
            return {}
        rows = {r.id: r for r in await self.db.read(lambda c: c.graph.candidate_rows(ids))}
        return {
            name: tuple(i for i in found if i in rows and rows[i].type in compatible_types(name[1]))
            for name, found in close.items()
        }

    # Later: a pending entity -------------------------------------------------

    async def resolve_pending(self, entity_id: int) -> Callable[[UnitOfWork], None] | None:
        """Ask again about an entity kept apart; returns the write that merges
        or settles it (None: nothing left to do). Raises ``LLMError`` for the
        worker to retry or wait on."""
        found = await self.db.read(lambda c: _pending_view(c, entity_id))
        if found is None:
            return None
        entity, decision = found
        # A graph's entity is no user's: its question is work done for none.
        llm_usage.attribute(entity.project_id, entity.tenant)
        mention = Mention(entity.name, entity.type, entity.notes)
        if isinstance(decision, Match):
            target, method = decision.entity_id, decision.method
            return lambda c: _merge_pending(c, entity_id, target, method)
        if isinstance(decision, Novel):
            return lambda c: c.graph.set_resolution(entity_id, RESOLVED)
        if self._llm is None:
            raise LLMUnreachable("no LLM server configured")
        questions = await self.db.read(lambda c: _questions(c, [(mention, decision.candidates)]))
        context = "\n".join(await self.db.read(lambda c: c.graph.recent_mentions(entity_id, 3)))
        answer = await self._llm.chat_json(
            self.model,
            build_resolution_messages(_clip(context, CONTEXT_CHARS), questions),
            RESOLUTION_SCHEMA,
            temperature=RESOLUTION_OPTIONS["temperature"],
            num_predict=RESOLUTION_OPTIONS["num_predict"],
            timeout=self.timeout,
        )
        chosen = parse_resolution(answer, questions).get(1)
        if chosen:
            return lambda c: _merge_pending(c, entity_id, chosen, METHOD_LLM)
        candidates = decision.candidates

        def settle_apart(uow: UnitOfWork) -> None:
            if uow.graph.entity_graph(entity_id) is None:
                return
            for other in candidates:
                if uow.graph.entity_graph(other) is not None:
                    uow.graph.add_distinction(entity_id, other)
            uow.graph.set_resolution(entity_id, RESOLVED)

        return settle_apart


def resolver_for(
    uow: UnitOfWork,
    graph: Graph,
    mentions: Sequence[Mention],
    exclude: set[int] | frozenset[int] = frozenset(),
) -> Resolver:
    """A resolver over the candidates these names reach, reading a name's
    near-duplicate blocks on ``uow`` only when it needs them."""

    def keep(rows: Sequence[CandidateRow]) -> list[CandidateRow]:
        return [r for r in rows if r.id not in exclude]

    def nearby(m: Mention) -> list[CandidateRow]:
        return keep(
            uow.graph.block_candidates(
                graph, blocks(m), compatible_types(m.type), limit=BLOCK_LIMIT
            )
        )

    first = uow.graph.resolution_candidates(graph, *lookups(mentions), word_limit=BLOCK_LIMIT + 1)
    return Resolver(keep(first), nearby)


def _open_names(
    uow: UnitOfWork, graph: Graph, mentions: Sequence[Mention]
) -> list[tuple[Mention, tuple[int, ...] | None]]:
    """The names the rules leave open, with their candidates (None: new to
    the rules, so its vector neighbours are looked up)."""
    resolver = resolver_for(uow, graph, mentions)
    found: list[tuple[Mention, tuple[int, ...] | None]] = []
    placeholder = 0
    for m in mentions:
        decision = resolver.decide(m)
        if isinstance(decision, Match):
            continue
        if isinstance(decision, Unsure):
            real = tuple(i for i in decision.candidates if i > 0)
            if real:
                found.append((m, real))
        else:
            found.append((m, None))
        # Later names of the episode see this one as the entity it will be.
        placeholder -= 1
        resolver.add(_placeholder(placeholder, m))
    return found


# In the write ----------------------------------------------------------------


def settle(
    uow: UnitOfWork,
    graph: Graph,
    mentions: Sequence[Mention],
    answers: Answers,
    episode_id: int | None,
) -> dict[NameKey, int]:
    """Write each name as a mention of the entity it resolved to (a new
    one where none); returns name -> entity id."""
    resolver = resolver_for(uow, graph, mentions)
    resolved: dict[NameKey, int] = {}
    for m in mentions:
        name = _name(m)
        if name in resolved:
            continue
        entity_id = _settle_one(uow, graph, m, resolver, answers, episode_id)
        resolved[name] = entity_id
        for row in uow.graph.candidate_rows([entity_id]):
            resolver.add(row)
    return resolved


def _settle_one(
    uow: UnitOfWork,
    graph: Graph,
    m: Mention,
    resolver: Resolver,
    answers: Answers,
    episode_id: int | None,
) -> int:
    decision = resolver.decide(m)
    name = _name(m)
    if isinstance(decision, Match):
        return _attach(uow, decision.entity_id, m, decision.method, decision.score, episode_id)
    answer = answers.chosen.get(name)
    if answer and uow.graph.entity_graph(answer) == graph:
        chosen = resolver.row(answer) or uow.graph.candidate_rows([answer])[0]
        if chosen.type in compatible_types(m.type):
            return _attach(uow, answer, m, METHOD_LLM, 1.0, episode_id)
    if answer == 0:
        entity_id = _create(uow, graph, m, episode_id, RESOLVED, METHOD_LLM)
        for other in answers.asked.get(name, ()):
            if resolver.row(other) is not None:
                uow.graph.add_distinction(entity_id, other, episode_id)
        return entity_id
    if isinstance(decision, Unsure) or name in answers.asked:
        # Open and unanswered: kept apart until the LLM can say.
        entity_id = _create(uow, graph, m, episode_id, PENDING, METHOD_NEW)
        uow.jobs.enqueue(jobs.RESOLVE_ENTITY, [entity_id])
        return entity_id
    assert isinstance(decision, Novel)
    return _create(uow, graph, m, episode_id, RESOLVED, METHOD_NEW)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attach(
    uow: UnitOfWork,
    entity_id: int,
    m: Mention,
    method: str,
    score: float,
    episode_id: int | None,
) -> int:
    entity_writes.mention(uow, entity_id, m.notes, episode_id=episode_id)
    entity_writes.add_alias(
        uow, entity_id, m.surface, method=method, score=score, episode_id=episode_id
    )
    return entity_id


def _create(
    uow: UnitOfWork,
    graph: Graph,
    m: Mention,
    episode_id: int | None,
    resolution: str,
    method: str,
) -> int:
    # A pending name may meet an entity holding its own key (a pending one
    # from an earlier episode): one entity per key and type in a graph.
    existing = uow.graph.entity_id_of(m.key, m.type, *graph)
    if existing is not None:
        return _attach(uow, existing, m, method, 1.0, episode_id)
    return entity_writes.insert(
        uow,
        graph,
        m.surface,
        m.type,
        m.notes,
        source=SOURCE_EXTRACTION,
        method=method,
        episode_id=episode_id,
        resolution=resolution,
    )


def _questions(
    uow: UnitOfWork, open_names: Sequence[tuple[Mention, tuple[int, ...]]]
) -> list[Question]:
    ids = sorted({i for _, cands in open_names for i in cands})
    entities = uow.graph.get_entities(ids)
    said = {i: uow.graph.recent_mentions(i, 2) for i in ids}
    questions = []
    for number, (m, cands) in enumerate(open_names, 1):
        shown = [
            Candidate(e.id, e.name, e.type, e.aliases, e.notes, said.get(e.id, ()))
            for e in (entities.get(i) for i in cands)
            if e is not None
        ]
        questions.append(Question(number, m.surface, m.type, m.notes, shown))
    return questions


def _pending_view(uow: UnitOfWork, entity_id: int) -> tuple[Entity, Match | Unsure | Novel] | None:
    """A pending entity and what the rules say of it now, against every
    other entity but those it was found distinct from."""
    try:
        entity = uow.graph.get_entity(entity_id)
    except Exception:  # noqa: BLE001 - deleted meanwhile: nothing to resolve
        return None
    if entity.resolution != PENDING:
        return None
    mention = Mention(entity.name, entity.type, entity.notes)
    graph = (entity.project_id, entity.session_id)
    mine = uow.graph.candidate_rows([entity_id])
    distinct = mine[0].distinct_from if mine else frozenset()
    resolver = resolver_for(uow, graph, [mention], exclude={entity_id, *distinct})
    return entity, resolver.decide(mention)


def _merge_pending(uow: UnitOfWork, entity_id: int, target_id: int, method: str) -> None:
    """The pending entity turned out to be ``target``: fold it in, recorded."""
    if uow.graph.entity_graph(entity_id) is None:
        return
    if uow.graph.entity_graph(target_id) != uow.graph.entity_graph(entity_id):
        uow.graph.set_resolution(entity_id, RESOLVED)
        return
    merges.merge_into(
        uow,
        target_id,
        [entity_id],
        method=MERGE_LLM,
        reason=f"resolved by {method}: kept apart until then",
    )
