"""What an episode shows of its embedding (``Episode.embedding_state`` and
its error): set by the index worker in the transaction that finishes the
job, so the state never claims more than the index holds."""

from __future__ import annotations

from collections.abc import Sequence

from nexus_grpc.core.models import JobState
from nexus_grpc.core.repositories import UnitOfWork


def embedded(uow: UnitOfWork, episode_ids: Sequence[int]) -> None:
    uow.episodes.set_embed_state(list(episode_ids), JobState.DONE)


def failed(uow: UnitOfWork, episode_id: int, error: str) -> None:
    """Dead-lettered: the episode will not be found by meaning until reindexed."""
    uow.episodes.set_embed_state([episode_id], JobState.FAILED, error)


def retrying(uow: UnitOfWork, episode_id: int, error: str) -> None:
    """Still pending, with the last attempt's error."""
    uow.episodes.set_embed_state([episode_id], JobState.PENDING, error)
