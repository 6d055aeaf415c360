"""SelectMemories: two-pass LLM selection, usage log, degradation.

1. Read the live titles the scope may see (ARCHIVE only with include_archived).
2. Pass 1 (selection model): prompt + titles (+ thread summary, with the
   memories already used in the thread marked) -> ids, relevance, category.
   The titles are read in batches, each sized in tokens to fit the model's
   context whole (``title_batches`` in the answer says how many), and the
   picks of all batches are merged: a prompt is never cut to fit.
3. Pass 2 (same model): the picks with their content -> final relevance.
   Picks whose content does not fit the context keep their pass-1 relevance.
4. Memories already used in the thread get their relevance halved, so fresh
   matches come first unless the old ones are clearly more relevant (the
   ranking is ``retrieval/memory_ranking.selection_order``).
5. Usage is recorded in one transaction (a row per memory, use_count + 1,
   last_used_at), then the results stream, most relevant first.

A call with a ``request_id`` is safe to retry (the clients retry reads, and
fill one in): its answer is kept in the transaction that records its usage
(``store/selections.py``), and a retry is answered from it, recording
nothing again. The same id with a different request is ALREADY_EXISTS, as a
create's is.

Without a model (none configured, unreachable, or answering garbage), or
while the tenant's LLM token budget for the day is spent, or the selecting
user's share of it (domain/budgets.py), the selection falls back to semantic
ranking over the same scope and says so in ``method="semantic"`` and
``degraded_reason``, on each selection and on the stream (``on_degraded``,
the ``x-nexus-degraded`` trailer), so an empty one says it too: never
silently. The calls
it made are accounted (stage ``selection``) in the transaction that records
its usage, or in one of their own when it ends otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from nexus_grpc.core import llm_usage, tenancy
from nexus_grpc.core.models import MemoryCategory
from nexus_grpc.core.records import (
    Memory,
    SelectionAnswer,
    SelectionKey,
    SelectionPick,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import accounting, empty_answers
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.budgets import Budgets
from nexus_grpc.domain.memories import usage_owner
from nexus_grpc.domain.memory_visibility import MemoryScope, check_scope
from nexus_grpc.domain.retrieval import memory_ranking
from nexus_grpc.domain.retrieval.search import MemorySearch
from nexus_grpc.errors import AlreadyExists
from nexus_grpc.llm import LLMClient, LLMError, LLMInputTooLong, tokens
from nexus_grpc.llm import selection_prompts as prompts

log = logging.getLogger(__name__)
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
    title_batches: int = 0


class Selector:
    def __init__(
        self,
        db: Database,
        memories: MemorySearch,
        llm: LLMClient | None,
        model: str,
        *,
        timeout: float | None = None,
        default_tenant: str = tenancy.DEFAULT_TENANT,
        budgets: Budgets | None = None,
    ) -> None:
        self.db = db
        self.budgets = budgets or Budgets(db)
        # Selection's fallback reads the memories most like the prompt.
        self.memories = memories
        self.llm = llm
        self.model = model
        self.timeout = timeout
        self.default_tenant = default_tenant

    async def select(
        self,
        prompt: str,
        scope: MemoryScope,
        thread_id: str,
        thread_summary: str,
        limit: int,
        request_id: str = "",
        *,
        on_method: Callable[[str], None] | None = None,
        on_empty: Callable[[str], None] | None = None,
        on_degraded: Callable[[str], None] | None = None,
    ) -> AsyncIterator[Selection]:
        """The selected memories, most relevant first. ``on_method`` hears how
        the selection was (or, with nothing to choose from, would have been)
        made, before the first one; ``on_empty`` why nothing was selected
        when the memories were there (the model chose none, or semantic
        ranking found none related). With no memory in scope it hears
        nothing: EmptyAnswers.memories says why. ``on_degraded`` hears why
        the selection fell back to semantic ranking (no model, a failing
        one, a spent budget), whether or not anything is selected: the
        stream's own reason, beside each selection's."""
        async with accounting.accounted(self.db, llm_usage.SELECTION):
            async for selected in self._select(
                prompt,
                scope,
                thread_id,
                thread_summary,
                limit,
                request_id,
                on_method=on_method,
                on_empty=on_empty,
                on_degraded=on_degraded,
            ):
                yield selected

    async def _select(
        self,
        prompt: str,
        scope: MemoryScope,
        thread_id: str,
        thread_summary: str,
        limit: int,
        request_id: str = "",
        *,
        on_method: Callable[[str], None] | None = None,
        on_empty: Callable[[str], None] | None = None,
        on_degraded: Callable[[str], None] | None = None,
    ) -> AsyncIterator[Selection]:
        def method_is(method: str, reason: str = "") -> None:
            if on_method is not None:
                on_method(method)
            if reason and on_degraded is not None:
                on_degraded(reason)

        v.text("prompt", prompt, limit=v.MAX_SHORT_TEXT_CHARS, required=True)
        v.identifier("thread_id", thread_id)
        v.text("thread_summary", thread_summary, limit=v.MAX_SHORT_TEXT_CHARS)
        v.identifier("request_id", request_id)
        n = v.search_limit(limit)
        check_scope(scope)
        owner = usage_owner(scope)
        key = digest = None
        if request_id:
            # The usage log's owner: a retry key names one user's selection in
            # one project of the caller's own tenant.
            key = SelectionKey(
                tenancy.own(self.default_tenant), scope.user_id, scope.project_id, request_id
            )
            digest = _request_digest(prompt, scope, thread_id, thread_summary, n)
            stored = await self.db.read(lambda c: c.memories.find_selection(key))
            if stored is not None:
                method_is(stored[1].method, stored[1].degraded_reason)
                async for replayed in self._replay(stored, digest, request_id, scope):
                    yield replayed
                return

        candidates, used, tenant = await self._candidates(scope, thread_id, owner)
        llm_usage.attribute(scope.project_id, tenant, scope.user_id)
        if not candidates:
            method_is(METHOD_LLM if self.llm is not None else METHOD_SEMANTIC)
            return
        picks, method, reason, batches = await self._picks(
            prompt, scope, tenant, candidates, used, thread_summary, n
        )
        method_is(method, reason)
        ranked = memory_ranking.selection_order(picks, used, n)
        if not ranked:
            if on_empty is not None:
                why = (
                    empty_answers.model_chose_none(len(candidates))
                    if method == METHOD_LLM
                    else empty_answers.semantic_found_none(len(candidates))
                )
                on_empty(str(why))
            return
        answer = SelectionAnswer(
            [SelectionPick(mid, rel, int(cat), mid in used) for mid, rel, cat in ranked],
            method,
            reason,
            batches,
        )
        outcome = await self._record(prompt, thread_id, owner, key, digest, ranked, answer)
        if isinstance(outcome, tuple):
            assert digest is not None
            method_is(outcome[1].method, outcome[1].degraded_reason)
            async for replayed in self._replay(outcome, digest, request_id, scope):
                yield replayed
            return
        for mid, rel, cat in ranked:
            if mid in outcome:
                yield Selection(outcome[mid], rel, cat, mid in used, method, reason, batches)

    async def _candidates(
        self, scope: MemoryScope, thread_id: str, owner: UsageOwner
    ) -> tuple[list[Memory], set[int], str]:
        """The memories the scope may see (the newest MAX_TITLES), those of
        them already used in the thread, and the tenant whose budget pays."""
        own = tenancy.own(self.default_tenant)

        def read(uow: UnitOfWork) -> tuple[list[Memory], set[int], str]:
            # Whose budget pays: the project's tenant (an admin's call on
            # another tenant's project is that tenant's work), else the caller's.
            tenant = (uow.projects.tenant_of(scope.project_id) if scope.project_id else None) or own
            # Past MAX_TITLES, the newest memories are the ones offered.
            rows = uow.memories.list_visible(scope, limit=MAX_TITLES, newest_first=True)
            # Without a thread there is no conversation to have used anything in:
            # the thread-less selections of one user must not deprioritise each other.
            used = (
                uow.memories.used_in_thread(thread_id, owner, [m.id for m in rows])
                if thread_id
                else set()
            )
            return rows, used, tenant

        return await self.db.read_in_transaction(read)

    async def _picks(
        self,
        prompt: str,
        scope: MemoryScope,
        tenant: str,
        candidates: list[Memory],
        used: set[int],
        thread_summary: str,
        n: int,
    ) -> tuple[list[tuple[int, float, MemoryCategory]], str, str, int]:
        """The model's picks, or semantic ranking's where there is no model,
        the budget is spent or the model failed: (picks, method, the reason
        for falling back or "", title batches)."""
        picks: list[tuple[int, float, MemoryCategory]] | None = None
        reason = ""
        batches = 0
        spent = (
            await self.budgets.exhausted(tenant, scope.user_id) if self.llm is not None else None
        )
        if self.llm is None:
            reason = "no LLM configured (--ollama-url or --llm-url); ranked by semantic similarity"
        elif spent is not None:
            reason = f"{spent.reason()}; ranked by semantic similarity"
        else:
            try:
                picks, batches = await self._two_pass(prompt, candidates, used, thread_summary)
            except LLMError as exc:
                log.warning("memory selection fell back to semantic ranking: %s", exc)
                reason = f"selection model failed ({exc}); ranked by semantic similarity"
        if picks is not None:
            return picks, METHOD_LLM, reason, batches
        hits = await self.memories.semantic(prompt, scope, n * 2)
        picks = [
            (h.memory.id, max(0.0, min(1.0, h.score)), MemoryCategory.SUPPORTING) for h in hits
        ]
        return picks, METHOD_SEMANTIC, reason, batches

    async def _record(
        self,
        prompt: str,
        thread_id: str,
        owner: UsageOwner,
        key: SelectionKey | None,
        digest: str | None,
        ranked: list[tuple[int, float, MemoryCategory]],
        answer: SelectionAnswer,
    ) -> dict[int, Memory] | tuple[str, SelectionAnswer]:
        """Records the selection's usage, its LLM calls and (with a request_id)
        its answer in one transaction: the memories as updated, or the answer
        a retry that arrived while this call ran recorded first."""
        records = [UsageRecord(mid, rel, int(cat)) for mid, rel, cat in ranked]
        context = prompt[:2000]
        calls = accounting.pending()

        def record(uow: UnitOfWork) -> dict[int, Memory] | tuple[str, SelectionAnswer]:
            # The calls were made whichever answer is sent: kept either way.
            uow.usage.insert(calls)
            if key is not None:
                # A retry that arrived while this call ran has recorded first.
                earlier = uow.memories.find_selection(key)
                if earlier is not None:
                    return earlier
            updated = uow.memories.record_usage(thread_id, owner, context, records)
            if key is not None and digest is not None:
                uow.memories.insert_selection(key, digest, answer)
            return updated

        outcome = await self.db.write(record)
        accounting.written(calls)
        return outcome

    async def _replay(
        self, stored: tuple[str, SelectionAnswer], digest: str, request_id: str, scope: MemoryScope
    ) -> AsyncIterator[Selection]:
        """The stored answer of a request_id, as it was sent: the memories as
        they are now (one deleted or out of scope since is left out)."""
        their_digest, answer = stored
        if their_digest != digest:
            raise AlreadyExists(
                f"request_id {v.quoted(request_id)} was already used for another"
                " SelectMemories request (a different prompt, thread, summary, scope or"
                " limit); use a new request_id for a new selection"
            )
        ids = [p.memory_id for p in answer.picks]
        rows = await self.db.read(lambda c: c.memories.get_visible(ids, scope))
        for p in answer.picks:
            if p.memory_id in rows:
                yield Selection(
                    rows[p.memory_id],
                    p.relevance,
                    MemoryCategory(p.category),
                    p.previously_used,
                    answer.method,
                    answer.degraded_reason,
                    answer.title_batches,
                )

    async def _two_pass(
        self, prompt: str, candidates: list[Memory], used: set[int], thread_summary: str
    ) -> tuple[list[tuple[int, float, MemoryCategory]], int]:
        """The picks, and how many batches pass 1 read the titles in."""
        llm = self.llm
        assert llm is not None
        opts = prompts.SELECTION_OPTIONS
        fixed = prompts.build_selection_messages(prompt, [], thread_summary, used)
        budget = await llm.input_budget(
            self.model, fixed, opts["num_predict"], timeout=self.timeout
        )
        batches = _batches(candidates, used, budget, self.model)
        if len(batches) > 1:
            log.info("memory selection read %d titles in %d batches", len(candidates), len(batches))
        selected: list[prompts.Selected] = []
        for batch in batches:
            answer = await llm.chat_json(
                self.model,
                prompts.build_selection_messages(
                    prompt, [(m.id, m.title) for m in batch], thread_summary, used
                ),
                prompts.SELECTION_SCHEMA,
                timeout=self.timeout,
                **opts,
            )
            selected += prompts.parse_selection(answer, {m.id for m in batch})
        if not selected:
            return [], len(batches)
        selected = memory_ranking.by_relevance(selected, lambda s: s.relevance)
        by_id = {m.id: m for m in candidates}
        fixed = prompts.build_ranking_messages(prompt, [], thread_summary)
        room = await llm.input_budget(
            self.model, fixed, prompts.RANKING_OPTIONS["num_predict"], timeout=self.timeout
        )
        # The most relevant picks first, as many as fit whole and one answer holds.
        ranked_input: list[tuple[int, str, str]] = []
        for s in selected[: prompts.MAX_PICKS_PER_ANSWER]:
            m = by_id[s.id]
            cost = tokens.estimate_tokens(prompts.ranking_block(m.id, m.title, m.content)) + 2
            if cost > room:
                break
            room -= cost
            ranked_input.append((m.id, m.title, m.content))
        ranking: dict[int, float] = {}
        if ranked_input:
            answer = await llm.chat_json(
                self.model,
                prompts.build_ranking_messages(prompt, ranked_input, thread_summary),
                prompts.RANKING_SCHEMA,
                timeout=self.timeout,
                **prompts.RANKING_OPTIONS,
            )
            ranking = prompts.parse_ranking(answer, {mid for mid, _, _ in ranked_input})
        picks = [
            (
                s.id,
                ranking.get(s.id, s.relevance),
                MemoryCategory.NECESSARY
                if s.category == "necessary"
                else MemoryCategory.SUPPORTING,
            )
            for s in selected
        ]
        return picks, len(batches)


def _request_digest(
    prompt: str, scope: MemoryScope, thread_id: str, thread_summary: str, limit: int
) -> str:
    """What a retry must repeat to be one (the owner and the id are the key)."""
    fields = [
        prompt,
        thread_id,
        thread_summary,
        limit,
        scope.session_id,
        scope.agent_id,
        scope.include_archived,
    ]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def _batches(
    candidates: list[Memory], used: set[int], budget: int, model: str
) -> list[list[Memory]]:
    """Consecutive batches of titles, each within ``budget`` tokens."""
    batches: list[list[Memory]] = []
    current: list[Memory] = []
    room = budget
    for m in candidates:
        # +1: the newline that joins the lines.
        cost = tokens.estimate_tokens(prompts.title_line(m.id, m.title, m.id in used)) + 1
        if cost > budget:
            raise LLMInputTooLong(
                f"memory {m.id}'s title alone does not fit {model}'s context next to the prompt"
            )
        if cost > room:
            batches.append(current)
            current, room = [], budget
        current.append(m)
        room -= cost
    if current:
        batches.append(current)
    return batches
