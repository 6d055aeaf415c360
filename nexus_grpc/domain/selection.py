"""SelectMemories (seed 003): two-pass LLM selection, usage log, degradation.

1. Read the live titles the scope may see (ARCHIVE only with include_archived).
2. Pass 1 (selection model): prompt + titles (+ thread summary, with the
   memories already used in the thread marked) -> ids, relevance, category.
3. Pass 2 (same model): the picks with their content -> final relevance.
4. Memories already used in the thread get their relevance halved, so fresh
   matches come first unless the old ones are clearly more relevant.
5. Usage is recorded in one transaction (a row per memory, use_count + 1,
   last_used_at), then the results stream, most relevant first.

Without a model (none configured, unreachable, or answering garbage) the
selection falls back to semantic ranking over the same scope and says so in
``method="semantic"`` and ``degraded_reason``: never silently.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nexus_grpc.domain import validation as v
from nexus_grpc.domain.memories import Memories, usage_owner
from nexus_grpc.domain.memory_scope import MemoryScope, check_scope, sql_where
from nexus_grpc.domain.models import MemoryCategory
from nexus_grpc.llm import LLMClient, LLMError
from nexus_grpc.llm import selection as prompts
from nexus_grpc.store import Database
from nexus_grpc.store import memories as memory_store
from nexus_grpc.store.memories import Memory, UsageRecord

log = logging.getLogger(__name__)
USED_PENALTY = 0.5
# Titles read for pass 1 (the cap keeps a project and agent at 1000; a scope
# also sees the user's own memories).
MAX_TITLES = 2000
METHOD_LLM = "llm"
METHOD_SEMANTIC = "semantic"


@dataclass(frozen=True)
class Selection:
    memory: Memory
    relevance: float
    category: MemoryCategory
    previously_used: bool
    method: str
    degraded_reason: str = ""


class Selector:
    def __init__(
        self,
        db: Database,
        memories: Memories,
        llm: LLMClient | None,
        model: str,
        *,
        timeout: float | None = None,
    ) -> None:
        self.db = db
        self.memories = memories
        self.llm = llm
        self.model = model
        self.timeout = timeout

    async def select(
        self,
        prompt: str,
        scope: MemoryScope,
        thread_id: str,
        thread_summary: str,
        limit: int,
    ) -> AsyncIterator[Selection]:
        v.text("prompt", prompt, limit=v.MAX_SHORT_TEXT_CHARS, required=True)
        v.identifier("thread_id", thread_id)
        v.text("thread_summary", thread_summary, limit=v.MAX_SHORT_TEXT_CHARS)
        n = v.search_limit(limit)
        check_scope(scope)
        where, params = sql_where(scope)
        owner = usage_owner(scope)

        def read(conn: sqlite3.Connection) -> tuple[list[Memory], set[int]]:
            # Past MAX_TITLES, the newest memories are the ones offered.
            rows = memory_store.list_visible(
                conn, where, params, limit=MAX_TITLES, newest_first=True
            )
            # Without a thread there is no conversation to have used anything in:
            # the thread-less selections of one user must not deprioritise each other.
            used = (
                memory_store.used_in_thread(conn, thread_id, owner, [m.id for m in rows])
                if thread_id
                else set()
            )
            return rows, used

        candidates, used = await self.db.read_in_transaction(read)
        if not candidates:
            return
        picks: list[tuple[int, float, MemoryCategory]] | None = None
        reason = ""
        if self.llm is None:
            reason = "no LLM configured (--ollama-url); ranked by semantic similarity"
        else:
            try:
                picks = await self._two_pass(prompt, candidates, used, thread_summary)
            except LLMError as exc:
                log.warning("memory selection fell back to semantic ranking: %s", exc)
                reason = f"selection model failed ({exc}); ranked by semantic similarity"
        method = METHOD_LLM
        if picks is None:
            method = METHOD_SEMANTIC
            hits = await self.memories.semantic(prompt, scope, n * 2)
            picks = [
                (h.memory.id, max(0.0, min(1.0, h.score)), MemoryCategory.SUPPORTING) for h in hits
            ]
        ranked = sorted(
            ((mid, rel * (USED_PENALTY if mid in used else 1.0), cat) for mid, rel, cat in picks),
            key=lambda p: p[1],
            reverse=True,
        )[:n]
        if not ranked:
            return
        records = [UsageRecord(mid, rel, int(cat)) for mid, rel, cat in ranked]
        context = prompt[:2000]
        updated = await self.db.write(
            lambda c: memory_store.record_usage(c, thread_id, owner, context, records)
        )
        for mid, rel, cat in ranked:
            if mid in updated:
                yield Selection(updated[mid], rel, cat, mid in used, method, reason)

    async def _two_pass(
        self, prompt: str, candidates: list[Memory], used: set[int], thread_summary: str
    ) -> list[tuple[int, float, MemoryCategory]]:
        assert self.llm is not None
        valid = {m.id for m in candidates}
        answer = await self.llm.chat_json(
            self.model,
            prompts.build_selection_messages(
                prompt, [(m.id, m.title) for m in candidates], thread_summary, used
            ),
            prompts.SELECTION_SCHEMA,
            timeout=self.timeout,
            **prompts.SELECTION_OPTIONS,
        )
        selected = prompts.parse_selection(answer, valid)
        if not selected:
            return []
        by_id = {m.id: m for m in candidates}
        answer = await self.llm.chat_json(
            self.model,
            prompts.build_ranking_messages(
                prompt,
                [(s.id, by_id[s.id].title, by_id[s.id].content) for s in selected],
                thread_summary,
            ),
            prompts.RANKING_SCHEMA,
            timeout=self.timeout,
            **prompts.RANKING_OPTIONS,
        )
        ranking = prompts.parse_ranking(answer, {s.id for s in selected})
        return [
            (
                s.id,
                ranking.get(s.id, s.relevance),
                MemoryCategory.NECESSARY
                if s.category == "necessary"
                else MemoryCategory.SUPPORTING,
            )
            for s in selected
        ]
