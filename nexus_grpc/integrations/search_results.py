"""A search of episodes, memories or entities, as text with its score, sources and ids.

The retrievers (LangChain's ``Document``, LlamaIndex's ``NodeWithScore``)
are the same search in two shapes; this is the search, once. Each hit's
metadata carries what a caller needs to cite it or act on it: ``kind``
(``episode``, ``memory``, ``entity``), its ``id``, the ``score`` (higher is
better; the fused 0..1 score in the default hybrid mode, see the README),
the ``sources`` that found it (``keyword``, ``semantic``), ``reranked``, a
``degraded_reason`` when the answer was less than the whole pipeline, and
the ids it belongs to (session, project, user).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Literal

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

__all__ = ["KINDS", "MODES", "Hit", "Scope", "search"]

Kind = Literal["episodes", "memories", "entities"]
Mode = Literal["hybrid", "keyword", "semantic"]
KINDS: tuple[Kind, ...] = ("episodes", "memories", "entities")
MODES: dict[str, memory_pb2.SearchMode.ValueType] = {
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
}
#: The most hits one search returns (the server's limit).
MAX_HITS = 100

_SOURCES = {
    memory_pb2.SEARCH_SOURCE_KEYWORD: "keyword",
    memory_pb2.SEARCH_SOURCE_SEMANTIC: "semantic",
}


@dataclass(frozen=True)
class Hit:
    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scope:
    """Whose records a search reads: the project's, and a user's USER memories."""

    project_id: int
    user_id: str = ""
    agent_id: str = ""
    include_archived: bool = False


def check_search(kind: str, mode: str, k: int) -> None:
    """``ValueError`` for what the server would refuse, before any call."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_HITS:
        raise ValueError(f"k must be an integer from 1 to {MAX_HITS}; got {k!r}")


def _time(ts: Timestamp) -> str | None:
    if not ts.seconds and not ts.nanos:
        return None
    return ts.ToDatetime(tzinfo=UTC).isoformat()


def _common(hit: Any, kind: str, record_id: int, sources: list[str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": kind, "id": record_id, "score": hit.score}
    if sources is not None:
        meta["sources"] = sources
    meta["reranked"] = hit.reranked
    if hit.degraded_reason:
        meta["degraded_reason"] = hit.degraded_reason
    return meta


def episode_text(user: str, assistant: str) -> str:
    return f"User: {user}\nAssistant: {assistant}" if assistant else f"User: {user}"


async def search(
    client: NexusClient, kind: str, query: str, k: int, scope: Scope, mode: str = "hybrid"
) -> list[Hit]:
    """The best ``k`` hits for ``query`` in ``scope``, best first."""
    check_search(kind, mode, k)
    out: list[Hit] = []
    if kind == "episodes":
        # Every session of the project: a session in a project sees them all.
        async for hit in client.search_episodes(
            query=query, project_id=scope.project_id, limit=k, mode=MODES[mode]
        ):
            ep = hit.episode
            meta = _common(hit, "episode", ep.id, [_SOURCES[s] for s in hit.sources])
            meta.update(
                session_id=ep.session_id,
                project_id=scope.project_id,
                occur_time=_time(ep.occur_time),
                snippet=hit.snippet,
            )
            out.append(
                Hit(str(ep.id), episode_text(ep.user_message, ep.ai_response), hit.score, meta)
            )
    elif kind == "memories":
        memory_scope = memory_pb2.MemoryScope(
            project_id=scope.project_id,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            include_archived=scope.include_archived,
        )
        async for mhit in client.search_memories(
            query=query, scope=memory_scope, limit=k, mode=MODES[mode]
        ):
            m = mhit.memory
            meta = _common(mhit, "memory", m.id, [_SOURCES[s] for s in mhit.sources])
            meta.update(memory_fields(m))
            out.append(Hit(str(m.id), m.content, mhit.score, meta))
    else:
        async for ehit in client.search_entities(query=query, project_id=scope.project_id, limit=k):
            e = ehit.entity
            meta = _common(ehit, "entity", e.id, None)
            meta.update(
                name=e.name,
                type=e.type,
                aliases=list(e.aliases),
                mention_count=e.mention_count,
                project_id=e.project_id,
            )
            text = f"{e.name} ({e.type})" + (f": {e.notes}" if e.notes else "")
            out.append(Hit(str(e.id), text, ehit.score, meta))
    return out


def memory_fields(m: memory_pb2.Memory) -> dict[str, Any]:
    """A memory's own fields, as a hit's or a selection's metadata carries them."""
    return {
        "title": m.title,
        "memory_kind": memory_pb2.MemoryKind.Name(m.kind).removeprefix("MEMORY_KIND_").lower(),
        "tier": memory_pb2.Tier.Name(m.tier).removeprefix("TIER_").lower(),
        "project_id": m.project_id,
        "user_id": m.user_id,
        "agent_id": m.agent_id,
        "session_id": m.session_id,
        "create_time": _time(m.create_time),
        "update_time": _time(m.update_time),
    }
