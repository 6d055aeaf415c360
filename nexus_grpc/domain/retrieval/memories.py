"""Memories (SearchMemories): the one visibility rule of ``memory_scope``
(owner, tier, agent, tenant, expiry), resolved once per call.

Both paths apply the rule in their own query (``sql_where``, and the vector
filter plus the SQLite re-check), so they rank only what the caller may see;
the filters check it again on each row before the page.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nexus_grpc.core import tenancy
from nexus_grpc.domain import fts
from nexus_grpc.domain.common_terms import without
from nexus_grpc.domain.memory_scope import (
    MemoryScope,
    check_scope,
    sql_where,
    vector_filter,
    visible,
)
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.hits import MemoryHit
from nexus_grpc.domain.retrieval.pipeline import Engine
from nexus_grpc.store import documents
from nexus_grpc.store import memories as memory_store
from nexus_grpc.store.memories import Memory
from nexus_grpc.vectors import Filter


@dataclass(frozen=True)
class MemorySearchScope:
    scope: MemoryScope
    #: ``sql_where(scope)``: the rule as SQL, for both paths.
    where: str
    params: tuple[object, ...]
    #: The rule over vector payloads; None sees nothing.
    vector_filter: Filter | None
    #: The tenant the caller sees (None: every tenant).
    tenant: str | None
    #: The time ``where`` judges expiry at.
    now: float
    #: The keyword query (FTS5), None when no word is left to search.
    match: str | None
    #: The vector query: the text less the scope's common words.
    semantic_text: str


class Memories:
    async def open(self, engine: Engine[Any], call: Call) -> bool:
        call.scope = await search_scope(engine, call.text, check_scope(call.request))
        return True

    def document(self, row: Memory) -> str:
        return documents.memory_text(row.title, row.content)

    def hit(self, candidate: Candidate, call: Call) -> MemoryHit:
        return MemoryHit(
            candidate.row,
            candidate.score,
            candidate.sources,
            degraded_reason=call.degraded_reason,
            reranked=candidate.reranked,
        )


async def search_scope(engine: Engine[Any], text: str, scope: MemoryScope) -> MemorySearchScope:
    """What both paths search with, for ``scope`` (already checked)."""
    now = time.time()
    where, params = sql_where(scope, now=now)
    # Words on more than half the scope's memories ("user", "likes"...) rank
    # nothing and would make FTS5 walk every memory in the scope. Cached per
    # tenant too: one scope's user id names a different user in each tenant,
    # and one tenant's words must not shape another's search.
    tenant = tenancy.visible()
    common = await engine.vocabulary.common(
        (tenant, scope),
        lambda size: engine.db.read(
            lambda c: memory_store.scope_sample(
                c, scope.project_id, scope.user_id, where, params, size
            )
        ),
    )
    return MemorySearchScope(
        scope=scope,
        where=where,
        params=params,
        vector_filter=vector_filter(scope),
        tenant=tenant,
        now=now,
        match=fts.match_expression(text, drop=common),
        semantic_text=without(text, common),
    )


# Filters (filters.py): the last word on each row, before the page.


def in_scope(row: Memory, call: Call) -> bool:
    s: MemorySearchScope = call.scope
    return (s.tenant is None or row.tenant == s.tenant) and visible(
        s.scope,
        kind=row.kind,
        tier=row.tier,
        project_id=row.project_id,
        user_id=row.user_id,
        session_id=row.session_id,
        agent_id=row.agent_id,
    )


def unexpired(row: Memory, call: Call) -> bool:
    return not row.expired(call.scope.now)
