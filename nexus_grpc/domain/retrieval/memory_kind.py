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
from nexus_grpc.core.documents import memory_text
from nexus_grpc.core.records import Memory
from nexus_grpc.domain.memory_visibility import (
    MemoryScope,
    check_scope,
    vector_filter,
    visible,
)
from nexus_grpc.domain.retrieval import keyword_query
from nexus_grpc.domain.retrieval.call import Call, Candidate
from nexus_grpc.domain.retrieval.common_terms import without
from nexus_grpc.domain.retrieval.hits import MemoryHit
from nexus_grpc.domain.retrieval.pipeline import Engine
from nexus_grpc.vectors import Filter


@dataclass(frozen=True)
class MemorySearchScope:
    scope: MemoryScope
    #: The tenant the caller sees (None: every tenant).
    tenant: str | None
    #: The time the visibility rule judges expiry at, on both paths.
    now: float
    #: Words on more than half the scope's memories.
    common: frozenset[str]
    #: The keyword query (FTS5), None when no word is left to search.
    match: str | None

    # The vector path's own: a keyword search never builds them.

    @property
    def vector_filter(self) -> Filter | None:
        """The rule over vector payloads; None sees nothing."""
        return vector_filter(self.scope)

    def semantic_text(self, text: str) -> str:
        """The vector query: the text less the scope's common words."""
        return without(text, self.common)


class Memories:
    async def open(self, engine: Engine[Any], call: Call) -> bool:
        call.scope = await search_scope(engine, call.text, check_scope(call.request))
        return True

    def document(self, row: Memory) -> str:
        return memory_text(row.title, row.content)

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
    # Words on more than half the scope's memories ("user", "likes"...) rank
    # nothing and would make FTS5 walk every memory in the scope. Cached per
    # tenant too: one scope's user id names a different user in each tenant,
    # and one tenant's words must not shape another's search.
    tenant = tenancy.visible()
    common = await engine.vocabulary.common(
        (tenant, scope),
        lambda size: engine.db.read(lambda c: c.memories.scope_sample(scope, size, at=now)),
    )
    return MemorySearchScope(
        scope=scope,
        tenant=tenant,
        now=now,
        common=common,
        match=keyword_query.match_expression(text, drop=common),
    )


# Filters (filters.py): the last word on each row, before the page.


def visible_now(row: Memory, call: Call) -> bool:
    """memory_scope's rule, whole: owner, tier, agent, tenant, and expiry (at
    the time the paths' SQL judged it)."""
    s: MemorySearchScope = call.scope
    if row.expire_at is not None and row.expire_at <= s.now:
        return False
    if s.tenant is not None and row.tenant != s.tenant:
        return False
    return visible(
        s.scope,
        kind=row.kind,
        tier=row.tier,
        project_id=row.project_id,
        user_id=row.user_id,
        session_id=row.session_id,
        agent_id=row.agent_id,
    )
