"""Every search, declared in one place: for each kind, its candidate paths and
its stages in order (graphiti's search_config_recipes are the model).

A mode picks paths: keyword or semantic mode runs that one path and none of
the hybrid-only stages (fusion, cohesion, the keyword lead, the reranker);
the default (hybrid) runs them all. Adding a path is a module like
keyword.py or vector.py plus a line in ``paths`` (and its weight in
``Fusion``) for each kind it serves; adding a stage is a module like
rerank.py plus a line in ``stages``.
"""

from __future__ import annotations

from nexus_grpc.core.models import SearchSource
from nexus_grpc.domain.retrieval import entity_kind, episode_kind, memory_kind
from nexus_grpc.domain.retrieval.cohesion import GroupCohesion
from nexus_grpc.domain.retrieval.filters import Hydrate, Keep
from nexus_grpc.domain.retrieval.fusion import Fusion
from nexus_grpc.domain.retrieval.hits import EntityHit, EpisodeHit, MemoryHit
from nexus_grpc.domain.retrieval.keyword import EntityNames, EpisodeKeyword, MemoryKeyword
from nexus_grpc.domain.retrieval.keyword_lead import KeywordLead
from nexus_grpc.domain.retrieval.page import Page
from nexus_grpc.domain.retrieval.pipeline import Recipe
from nexus_grpc.domain.retrieval.ranking import HYBRID_CANDIDATE_FACTOR, KEYWORD_WEIGHT
from nexus_grpc.domain.retrieval.rerank import Rerank
from nexus_grpc.domain.retrieval.scores import CallerScores
from nexus_grpc.domain.retrieval.snippets import KeywordSnippets
from nexus_grpc.domain.retrieval.vector import EntityVector, EpisodeVector, MemoryVector

#: Keywords weigh more than meaning (tuned on the LoCoMo dev split, docs/recall.md).
WEIGHTS = {SearchSource.KEYWORD: KEYWORD_WEIGHT, SearchSource.SEMANTIC: 1.0 - KEYWORD_WEIGHT}

#: Entity search ranks fewer candidates per hit: a graph's names are few and exact.
ENTITY_CANDIDATE_FACTOR = 2

EPISODES: Recipe[EpisodeHit] = Recipe(
    kind=episode_kind.Episodes(),
    paths=(EpisodeKeyword(), EpisodeVector()),
    stages=(
        Fusion(WEIGHTS),
        GroupCohesion(lambda uow, ids: uow.episodes.sessions_of(ids)),
        KeywordLead(),
        Hydrate(
            lambda uow, ids: uow.episodes.get_many(ids),
            (episode_kind.in_scope, episode_kind.in_window, episode_kind.retained),
        ),
        Rerank(),
        Page(),
        KeywordSnippets(
            lambda uow, match, ids: uow.episodes.snippets(match, ids), episode_kind.keyword_match
        ),
        CallerScores(bm25=True),
    ),
    candidates=HYBRID_CANDIDATE_FACTOR,
)

MEMORIES: Recipe[MemoryHit] = Recipe(
    kind=memory_kind.Memories(),
    paths=(MemoryKeyword(), MemoryVector()),
    stages=(
        Fusion(WEIGHTS),
        KeywordLead(),
        Keep((memory_kind.visible_now,)),  # scope, tier, tenant and expiry: one rule
        Rerank(),
        Page(),
        CallerScores(bm25=True),
    ),
    candidates=HYBRID_CANDIDATE_FACTOR,
)

ENTITIES: Recipe[EntityHit] = Recipe(
    kind=entity_kind.Entities(),
    paths=(EntityNames(), EntityVector()),
    stages=(
        Fusion(WEIGHTS),
        KeywordLead(),
        Keep((entity_kind.in_graph,)),
        Rerank(),
        Page(),
        CallerScores(bm25=False),
    ),
    candidates=ENTITY_CANDIDATE_FACTOR,
    unavailable_alone=True,
)
