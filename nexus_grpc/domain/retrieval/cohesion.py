"""A hit whose group (an episode's session) holds other strong candidates
moves up (``ranking.with_group_cohesion``: evidence sits in the session where
it was discussed; docs/recall.md has the figures)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval.call import Call, Ranked, rescored
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage
from nexus_grpc.domain.retrieval.ranking import with_group_cohesion

#: Each existing candidate's group, read by primary key (no row text).
Groups = Callable[[UnitOfWork, Sequence[int]], Mapping[int, Hashable]]


class GroupCohesion(Stage):
    reads = True

    def __init__(self, groups: Groups) -> None:
        self.groups = groups

    def applies(self, engine: Engine[Any], call: Call) -> bool:
        return len(engine.recipe.paths_for(call.mode)) > 1

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        assert uow is not None
        groups = self.groups(uow, [c.key for c in ranked])
        # A candidate whose row is gone gets a group of its own; hydration drops it.
        scored = with_group_cohesion(
            [(c.key, c.score) for c in ranked], lambda key: groups.get(key, -key)
        )
        return rescored(ranked, scored)
