"""ImportEpisodes' rules: how a stream of episodes is written, and the most one call takes.

Items are written in batches of IMPORT_BATCH, each in one transaction
(Conversations.import_episodes) while the next batch is read, so the stream
and the store work at once; the outcomes come back in stream order once every
batch is durable. A call past MAX_IMPORT_EPISODES keeps what it stored and
says so; the answer holds an id (and maybe an error) for each item, which
bounds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable

from nexus_grpc.domain.conversations import Conversations, EpisodeInput, Imported
from nexus_grpc.errors import InvalidArgument, NexusError

#: Episodes written per transaction, and the most one call may stream.
IMPORT_BATCH = 256
MAX_IMPORT_EPISODES = 10_000

Item = EpisodeInput | NexusError
Outcome = Imported | NexusError


class EpisodeImport:
    """One ImportEpisodes call: one batch is written while the next is read."""

    def __init__(self, conv: Conversations) -> None:
        self.conv = conv
        self.outcomes: list[tuple[Item, Outcome]] = []
        self._writing: tuple[asyncio.Task[list[Outcome]], list[Item]] | None = None

    async def run(
        self, items: AsyncIterable[Item], before_last: Callable[[], None] = lambda: None
    ) -> list[tuple[Item, Outcome]]:
        """Every item with its outcome, in stream order. ``before_last`` runs
        before the last batch is written (the caller may have gone)."""
        try:
            batch: list[Item] = []
            received = 0
            async for item in items:
                if received >= MAX_IMPORT_EPISODES:
                    await self._write(batch)
                    await self._settle()
                    raise InvalidArgument(
                        f"at most {MAX_IMPORT_EPISODES} episodes per ImportEpisodes call;"
                        f" the first {len(self.outcomes)} were stored and the rest not read."
                        " Send the rest in another call (resending stored items is safe:"
                        " their request_ids answer with the episodes already stored)"
                    )
                received += 1
                batch.append(item)
                if len(batch) >= IMPORT_BATCH:
                    await self._write(batch)
                    batch = []
            before_last()
            await self._write(batch)
            await self._settle()
        finally:
            self._abandon()
        return self.outcomes

    async def _write(self, batch: list[Item]) -> None:
        """Start writing ``batch`` once the one before it is written."""
        await self._settle()
        if batch:
            self._writing = (asyncio.create_task(self.conv.import_episodes(batch)), batch)

    async def _settle(self) -> None:
        if self._writing is None:
            return
        task, items = self._writing
        outcomes = await task
        self._writing = None
        self.outcomes += zip(items, outcomes, strict=True)

    def _abandon(self) -> None:
        """The call ended early (cancelled, or the stream failed): the batch
        being written commits or not as a whole, and nobody waits for it."""
        if self._writing is not None:
            self._writing[0].cancel()
