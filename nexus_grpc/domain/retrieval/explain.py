"""``explain``: what each stage of the pipeline made of each hit.

A search asked with ``explain`` carries a ``Trace`` on its call (and only
then: without it nothing is computed for it, and the default search costs
what it did). The recorder around the pipeline's steps
(explain_recorder.py) records, as each step ends:

- each candidate path's own ranking (``keyword``: bm25; ``semantic``:
  cosine), before fusion rescores the candidates;
- ``fused``: the order fusion, session cohesion and the keyword lead left
  (hybrid only), with the fused likelihood;
- ``filtered``: the order after the exact filters (scope, time window,
  retention, expiry), and how many candidates they dropped;
- ``reranked``: the cross-encoder's order and relevance (hybrid, when a
  reranker is configured), or why it did not run.

A hit's explanation lists those stages in that order; a stage that did not
find the hit gives it rank 0. ``note`` holds what a person needs: the words
that matched, what the filters dropped, a stage skipped and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from nexus_grpc.domain.retrieval.hits import StageScore

KEYWORD = "keyword"
SEMANTIC = "semantic"
FUSED = "fused"
FILTERED = "filtered"
RERANKED = "reranked"
#: The order the stages run in; a stage added later follows them.
ORDER = (KEYWORD, SEMANTIC, FUSED, FILTERED, RERANKED)


@dataclass
class _Stage:
    #: key -> (rank, score) among the stage's own candidates.
    ranks: dict[int, tuple[int, float]] = field(default_factory=dict)
    #: Said of every hit (a skip, what the filters dropped).
    note: str = ""
    #: Said of a hit the stage did not find.
    missing: str = ""
    #: Said instead of ``missing`` of these hits: why the stage did not find them.
    why_missing: dict[int, str] = field(default_factory=dict)


class Trace:
    """The stages a call ran, in order, and what each made of each candidate."""

    def __init__(self) -> None:
        self._stages: dict[str, _Stage] = {}
        #: The query's words a keyword hit may have matched (lower case).
        self.words: tuple[str, ...] = ()

    def _stage(self, name: str) -> _Stage:
        stage = self._stages.get(name)
        if stage is None:
            stage = self._stages[name] = _Stage()
        return stage

    def ranked(self, name: str, pairs: Iterable[tuple[int, float]], missing: str = "") -> None:
        """``name`` ranked these (key, score), best first."""
        stage = self._stage(name)
        stage.ranks = {}
        for rank, (key, score) in enumerate(pairs, start=1):
            stage.ranks.setdefault(key, (rank, score))
        if missing:
            stage.missing = missing

    def missed(self, name: str, key: int, why: str) -> None:
        """``name`` did not find ``key``, for this reason (rather than its
        ``missing`` note)."""
        self._stage(name).why_missing[key] = why

    def note(self, name: str, note: str) -> None:
        """Something every hit's entry for ``name`` says (a skip and why)."""
        stage = self._stage(name)
        stage.note = f"{stage.note}; {note}" if stage.note else note

    def explanation(self, key: int, matched: Iterable[str] = ()) -> tuple[StageScore, ...]:
        """The hit's entry for every stage, in the order they ran."""
        out = []
        known = {name: i for i, name in enumerate(ORDER)}
        names = sorted(self._stages, key=lambda n: known.get(n, len(ORDER)))
        for name in names:
            stage = self._stages[name]
            rank, score = stage.ranks.get(key, (0, 0.0))
            notes = [stage.note] if stage.note else []
            if rank == 0 and (stage.why_missing.get(key) or stage.missing):
                notes.append(stage.why_missing.get(key) or stage.missing)
            if name == KEYWORD and rank:
                words = sorted(set(matched))
                notes.insert(
                    0,
                    f"matched: {', '.join(words)}"
                    if words
                    else "matched in its neighbouring turns or its other names",
                )
            out.append(StageScore(name, rank, score, "; ".join(notes)))
        return tuple(out)
