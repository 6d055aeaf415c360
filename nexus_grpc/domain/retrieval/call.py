"""One search in flight: what was asked, and the candidates as they are ranked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.core.models import SearchMode, SearchSource
from nexus_grpc.domain.retrieval.explain import Trace


@dataclass(slots=True)
class Candidate:
    """One hit being ranked: its id, its score so far, the paths that found it,
    and its row once read (some paths read rows as they rank, others leave it
    to the hydrate stage)."""

    key: int
    score: float
    sources: tuple[SearchSource, ...]
    row: Any = None
    #: The matching text, for kinds that have one (episodes' keyword hits).
    snippet: str | None = None
    #: The reranker ordered it: ``score`` is then its relevance score.
    reranked: bool = False


Ranked = list[Candidate]


def rescored(ranked: Ranked, scored: list[tuple[int, float]]) -> Ranked:
    """``ranked``'s candidates in the order and with the scores of ``scored``
    (a ranking function's (key, score) answer over the same keys)."""
    by_key = {c.key: c for c in ranked}
    out = []
    for key, score in scored:
        candidate = by_key[key]
        candidate.score = score
        out.append(candidate)
    return out


@dataclass
class Call:
    """A search request as every stage sees it.

    ``request`` is the kind's own part (which sessions, which memory scope,
    which graph); the kind's ``open`` validates it and sets ``scope``, what
    the paths push down and the filters check."""

    text: str
    limit: int
    mode: SearchMode
    request: Any
    #: False: the caller opted out of the reranker (``skip_rerank``).
    rerank: bool = True
    on_degraded: Callable[[str], None] | None = None
    #: The caller asked what each stage made of each hit (``explain``): the
    #: pipeline then runs its steps through a recorder (explain_recorder.py).
    explain: bool = False
    #: What each stage made of each candidate, kept only when ``explain``.
    trace: Trace | None = None
    scope: Any = None
    #: Each path's candidates as it ranked them, best first, in the recipe's
    #: path order (fusion then scores the same objects anew).
    found: dict[SearchSource, Ranked] = field(default_factory=dict)
    #: Each path's (key, raw score) list as fusion read it (the keyword lead
    #: needs bm25's own order).
    raw: dict[SearchSource, list[tuple[int, float]]] = field(default_factory=dict)
    #: (key, score) of the nearest neighbours a path left out below the
    #: embedder's floor (vector.py), for ``explain`` to say why.
    below_floor: dict[SearchSource, list[tuple[int, float]]] = field(default_factory=dict)
    #: How many filtered candidates the stages after hydration need: the page,
    #: or the reranker's candidates when it runs.
    depth: int = 0
    degraded: list[str] = field(default_factory=list)
    #: Every reason so far, as each hit and the trailer carry it ("" when none).
    degraded_reason: str = ""

    def degrade(self, reason: str) -> None:
        """A stage could not run and the search goes on without it: every hit
        says why (``degraded_reason``), and so does the call's trailer."""
        self.degraded.append(reason)
        self.degraded_reason = "; ".join(self.degraded)
        if self.on_degraded is not None:
            self.on_degraded(self.degraded_reason)
