"""The embedder and the vector index as a semantic search calls them, for the
unit tier: every query embeds to the same vector, and the index answers with
the hits it was given. Not a test module: the entity, episode and memory
searches' unit tests share them (tests/unit/test_rules_entity_search.py,
test_rules_semantic_searches.py), so each rule is tested on the same stand-ins."""

from __future__ import annotations

from nexus_grpc.core.vectors import VectorHit, VectorIndexUnavailable


class Embedder:
    """Embeds every query to [1, 0], with the search's floor and temperature."""

    similarity_floor = 0.1
    similarity_temperature = 0.05

    async def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


class Index:
    """Answers with ``hits`` ((id, cosine) pairs), or is down; counts its
    searches in ``searched``."""

    def __init__(self, *hits: tuple[int, float], down: bool = False) -> None:
        self.hits = [VectorHit(i, s, {}) for i, s in hits]
        self.down = down
        self.searched = 0

    async def search(self, collection: str, vector, *, filter, limit: int):
        self.searched += 1
        if self.down:
            raise VectorIndexUnavailable("qdrant timed out")
        return self.hits[:limit]
