"""Filters: the exact, last check of scope, time window, retention and expiry
on each candidate's row, before the page is cut.

Each kind's paths push the same conditions down (SQL, the vector filter), so
their top n are already in scope and in time; the filters are the last word,
because the vector index is derived and may briefly hold a point whose row
is gone or changed. Because they run before the page, no filter can leave a
page short while candidates that pass remain: ``Hydrate`` reads rows in ranked
order until the call's depth (the page, or the reranker's candidates) is filled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval import explain
from nexus_grpc.domain.retrieval.call import Call, Candidate, Ranked
from nexus_grpc.domain.retrieval.explain import Trace
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage

#: A row the call may return.
Filter = Callable[[Any, Call], bool]
#: The rows among some ids, by id (absent: gone).
Rows = Callable[[UnitOfWork, Sequence[int]], Mapping[int, Any]]
#: Candidates read past the depth, to stand in for rows the filters drop.
SPARE = 5


class Kept(list[Candidate]):
    """A filter stage's candidates, and how many it read and dropped on the way."""

    dropped = 0


class _Filters(Stage):
    explains = explain.FILTERED
    filters: tuple[Filter, ...]
    #: How ``explain`` names what a candidate dropped was, beside failing a filter.
    gone = ""

    def explain(self, trace: Trace, ranked: Ranked) -> None:
        """The order kept, and how many candidates the filters dropped on the way."""
        super().explain(trace, ranked)
        dropped = ranked.dropped if isinstance(ranked, Kept) else 0
        if dropped:
            names = ", ".join(f.__name__.replace("_", " ") for f in self.filters)
            were = (
                "candidate above the last kept was"
                if dropped == 1
                else "candidates above the last kept were"
            )
            trace.note(
                explain.FILTERED, f"{dropped} {were} {self.gone}dropped by its filters ({names})"
            )


class Hydrate(_Filters):
    """Reads the rows of candidates the paths ranked by id, and filters them."""

    reads = True
    gone = "gone or "

    def __init__(self, rows: Rows, filters: tuple[Filter, ...]) -> None:
        self.rows = rows
        self.filters = filters

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        assert uow is not None
        kept = Kept()
        start = 0
        while start < len(ranked) and len(kept) < call.depth:
            chunk = ranked[start : start + call.depth - len(kept) + SPARE]
            start += len(chunk)
            rows = self.rows(uow, [c.key for c in chunk if c.row is None])
            for c in chunk:
                row = c.row if c.row is not None else rows.get(c.key)
                if row is not None and _passes(self.filters, row, call):
                    c.row = row
                    kept.append(c)
        kept.dropped = start - len(kept)
        return kept


class Keep(_Filters):
    """Filters candidates whose paths read their rows already, in ranked order
    until the call's depth is filled (no later stage reads past it)."""

    def __init__(self, filters: tuple[Filter, ...]) -> None:
        self.filters = filters

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        kept = Kept()
        seen = 0
        for c in ranked:
            seen += 1
            if _passes(self.filters, c.row, call):
                kept.append(c)
                if len(kept) == call.depth:
                    break
        kept.dropped = seen - len(kept)
        return kept


def _passes(filters: tuple[Filter, ...], row: Any, call: Call) -> bool:
    for keeps in filters:
        if not keeps(row, call):
            return False
    return True
