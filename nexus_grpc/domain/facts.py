"""Facts with time: which labels hold one value at a time, and re-deriving a
subject's intervals after its evidence changed (domain/timeline.py says how)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import timeline
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.llm.text import to_snake_case

# A person lives in one city, works at one place, is married to one person
# and reports to one manager at a time; a thing is located in one place. A
# project that disagrees (two jobs at once) sets its own list.
DEFAULT_SINGLE_VALUED_LABELS: tuple[str, ...] = (
    "lives_in",
    "works_at",
    "located_in",
    "married_to",
    "reports_to",
)
MAX_LABELS = 100
MAX_LABEL_CHARS = 64


def check_labels(field: str, labels: Sequence[str]) -> tuple[str, ...] | None:
    """A project's single-valued labels: each a snake_case label, once (what
    is stored is what was sent); an empty list means the defaults (None)."""
    if len(labels) > MAX_LABELS:
        raise InvalidArgument(
            f"{field} has {len(labels)} labels; at most {MAX_LABELS}", field=field
        )
    for label in labels:
        if not isinstance(label, str) or len(label) > MAX_LABEL_CHARS:
            raise InvalidArgument(
                f"{field}: each label is text of at most {MAX_LABEL_CHARS} chars", field=field
            )
        snake = to_snake_case(label)
        if not snake:
            raise InvalidArgument(
                f"{field}: label {label[:40]!r} has no letters or digits", field=field
            )
        if snake != label:
            raise InvalidArgument(
                f"{field}: label {label[:40]!r} is not snake_case; the label is {snake!r}",
                field=field,
            )
    if len(set(labels)) != len(labels):
        raise InvalidArgument(f"{field} names a label twice", field=field)
    return tuple(labels) or None


def single_valued(uow: UnitOfWork, graph: tuple[int, int]) -> frozenset[str]:
    """The single-valued labels of a graph: its project's, or the defaults (a
    session's own graph, or a project that kept them)."""
    project_id = graph[0]
    own = uow.projects.single_valued_labels(project_id) if project_id else None
    return frozenset(own if own is not None else DEFAULT_SINGLE_VALUED_LABELS)


def rederive(uow: UnitOfWork, groups: Iterable[tuple[int, str]], labels: frozenset[str]) -> None:
    """Write the intervals of each (from, label) again from its evidence."""
    for from_id, label in sorted(set(groups)):
        evidence = uow.graph.evidence_of(from_id, label)
        uow.graph.write_intervals(
            from_id,
            label,
            timeline.intervals(
                (e for e in evidence if e.from_id != e.to_id),
                single_valued=label in labels,
            ),
        )
