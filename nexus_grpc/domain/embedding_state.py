"""What an episode shows of its embedding (``Episode.embedding_state`` and
its error): set by the index worker in the transaction that finishes the
job, so the state never claims more than the index holds."""

from __future__ import annotations

from collections.abc import Sequence

from nexus_grpc.core.models import JobState
from nexus_grpc.core.storage import Connection
from nexus_grpc.store import episodes as episode_store


def embedded(conn: Connection, episode_ids: Sequence[int]) -> None:
    episode_store.set_embed_state(conn, list(episode_ids), JobState.DONE)


def failed(conn: Connection, episode_id: int, error: str) -> None:
    """Dead-lettered: the episode will not be found by meaning until reindexed."""
    episode_store.set_embed_state(conn, [episode_id], JobState.FAILED, error)


def retrying(conn: Connection, episode_id: int, error: str) -> None:
    """Still pending, with the last attempt's error."""
    episode_store.set_embed_state(conn, [episode_id], JobState.PENDING, error)
