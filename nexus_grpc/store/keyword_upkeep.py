"""Keeps the SQLite keyword indexes merged while the server runs.

Each commit adds a segment to the FTS5 indexes it touches, and a search pays
for every segment (store/keyword_index.py). After any commit, this loop merges
in small steps, each its own short write through the shared writer, until a
step finds nothing to merge: a live write waits for one step at most, and an
idle server does nothing. It starts with a pass, so an index left fragmented
by a bulk load or an older version is merged once the server is up.

Merging changes how the index is stored, never what it holds: results and
scores are the same before and after. A failed step is logged and retried on
the next pass; the index stays correct, only slower to search.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nexus_grpc.core.storage import Connection
from nexus_grpc.store import keyword_index
from nexus_grpc.store.sqlite.database import Database

log = logging.getLogger(__name__)

#: How often to look for commits since the last pass (seconds).
INTERVAL = 2.0
#: Pages written per step: ~1–5 ms of the writer's time on 2 cores.
PAGES = 64


class KeywordIndexUpkeep:
    def __init__(self, db: Database, *, interval: float = INTERVAL, pages: int = PAGES) -> None:
        self.db = db
        self.interval = interval
        self.pages = pages
        self.steps = 0  # merge steps that did work, since start (for tests and stats)
        self._prepared = False
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="keyword index upkeep")

    async def stop(self) -> None:
        """Stops after the step in flight, if any: no merge commits once this returns."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        """A pass at start, then one after any commit, until stopped."""
        seen = -1
        while not self._stopping.is_set():
            if self.db.commits != seen:
                try:
                    await self.settle()
                except Exception:
                    log.warning("keyword index merge failed; retrying later", exc_info=True)
                # Its own commits included: only later ones call for another pass.
                seen = self.db.commits
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval)
            except TimeoutError:
                pass

    async def settle(self) -> int:
        """Merge every keyword index until a step finds nothing; returns the
        steps that did work."""
        if not self._prepared:
            await self.db.write_sql(self._prepare)
            self._prepared = True
        steps = 0
        for table in keyword_index.TABLES:
            while not self._stopping.is_set() and await self.db.write_sql(self._merge_step(table)):
                steps += 1
        self.steps += steps
        return steps

    def _merge_step(self, table: str) -> Callable[[Connection], bool]:
        return lambda conn: keyword_index.merge_step(conn, table, self.pages)

    @staticmethod
    def _prepare(conn: Connection) -> None:
        for table in keyword_index.TABLES:
            keyword_index.prepare(conn, table)
