"""One retrieval pipeline for SearchEpisodes, SearchMemories and SearchEntities.

A search is a recipe (recipes.py, one per kind, all in one place) run by one
dispatcher (``pipeline.Engine.search``)::

    open: validate, resolve the scope (sessions, retention, memory rule, graph)
      -> candidate paths: keyword, vector (hybrid: both at once)
      -> fusion -> session cohesion -> the keyword lead        (hybrid only)
      -> filters: scope, time window, retention, expiry        (before the page)
      -> rerank: a cross-encoder on the LAN                    (hybrid, optional)
      -> page -> snippets -> hits

Paths and stages are modules of this package; a kind's module (episodes,
memories, entities) holds what only it knows: its request, its scope, its
filters, its text for the reranker and its hit.
"""

from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.entity_kind import GraphRequest
from nexus_grpc.domain.retrieval.episode_kind import EpisodeRequest
from nexus_grpc.domain.retrieval.hits import EntityHit, MemoryHit
from nexus_grpc.domain.retrieval.pipeline import Engine, Recipe
from nexus_grpc.domain.retrieval.recipes import ENTITIES, EPISODES, MEMORIES

__all__ = [
    "ENTITIES",
    "EPISODES",
    "MEMORIES",
    "Call",
    "Candidate",
    "Engine",
    "EntityHit",
    "EpisodeRequest",
    "GraphRequest",
    "MemoryHit",
    "Recipe",
]
