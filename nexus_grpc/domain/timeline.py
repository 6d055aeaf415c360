"""When a fact held: relationship intervals derived from their evidence.

A relationship is a fact with a time: it holds from the moment an episode
says it began (the episode's ``occur_time``) until a later episode ends it.
What episodes say is kept as evidence (an assertion or an end, at a time);
the intervals are a pure function of it, recomputed for one subject and label
whenever its evidence changes. So the order episodes arrive in does not
matter: an episode imported late slots in at its own time, and can end only
what held at that time, never a fact that began after it.

- A single-valued label (``lives_in``) holds one value at a time: asserting a
  new value ends the current one at the new one's time.
- Any label's fact ends at an explicit end ("Priya left Acme") that falls
  inside its interval.
- Asserting a value that already holds is one more mention of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nexus_grpc.core.graph import END, Evidence, Interval


def _order(e: Evidence) -> tuple[float, int, int, int, int]:
    # Ends before assertions at one instant: "left Acme" and "joined Acme"
    # at the same time keep the fact rather than an empty interval.
    return (e.at, 0 if e.kind == END else 1, e.episode_id or 0, e.to_id, e.id)


def intervals(evidence: Iterable[Evidence], *, single_valued: bool) -> list[Interval]:
    """Every interval of one subject and label, ordered by start then object."""
    ordered = sorted(evidence, key=_order)
    if single_valued:
        done = _walk(ordered)
    else:
        by_object: dict[int, list[Evidence]] = {}
        for e in ordered:
            by_object.setdefault(e.to_id, []).append(e)
        done = [i for group in by_object.values() for i in _walk(group)]
    return sorted(done, key=lambda i: (i.valid_at, i.to_id))


def _walk(ordered: Sequence[Evidence]) -> list[Interval]:
    """One timeline where at most one object holds at a time."""
    done: list[Interval] = []
    current: Interval | None = None

    def close(at: float, episode_id: int | None) -> None:
        nonlocal current
        assert current is not None
        if at > current.valid_at:
            current.invalid_at = at
            current.ended_by = episode_id
            done.append(current)
        # else: begun and ended at one instant, so nothing held.
        current = None

    for e in ordered:
        if e.kind == END:
            if current is not None and current.to_id == e.to_id:
                close(e.at, e.episode_id)
            continue
        if current is not None and current.to_id != e.to_id:
            close(e.at, e.episode_id)
        if current is None:
            current = Interval(e.to_id, e.at, asserted_by=e.episode_id, created_at=e.created_at)
        current.mentions += e.mentions
        if e.notes:
            current.notes = e.notes
    if current is not None:
        done.append(current)
    return done


def holds_at(valid_at: float | None, invalid_at: float | None, at: float) -> bool:
    """Whether an interval [valid_at, invalid_at) contains ``at``."""
    return (valid_at is None or valid_at <= at) and (invalid_at is None or at < invalid_at)
