"""Python function calls a search makes on the event loop, per kind and mode.

A deterministic measure of the Python work one search adds, where the shared
cores make CPU-time figures move by tens of per cent: an in-process App on a
fresh data directory (the tests' hashing embedder, so nothing depends on a
model), 400 episodes and 200 PROJECT memories of random words, then 200
searches of each kind and mode under cProfile (which counts the calls made on
the loop's thread; SQLite's and the index's threads are not counted). Run it
against another tree to compare:

    PYTHONPATH=/tmp/old .venv/bin/python bench/search_calls.py   # a checkout of the old commit
    .venv/bin/python bench/search_calls.py

``--cpu N`` times N searches of each instead (process CPU a search, every
thread, no profiler), for old and new run in alternate fresh interpreters.

An old tree whose servicer applied the retention (Conversations.retained_window)
is called the same way here, so both count a whole SearchEpisodes' domain work.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

from nexus_grpc.app import App
from nexus_grpc.core.models import SearchMode, TimeWindow
from nexus_grpc.domain.memory_visibility import MemoryScope
from nexus_grpc.runtime.config import Settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support import HashingEmbedder, wait_until  # noqa: E402

WORDS = [f"w{i}" for i in range(400)] + ["postgres", "replication", "zebra", "falcon", "river"]
SEARCHES = 200


async def main(cpu: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = App(Settings(data_dir=Path(tmp), listen="127.0.0.1:0"), embedder=HashingEmbedder())
        await app.start(reconcile=False)
        try:
            rng = random.Random(1)
            session = await app.conversations.create_session("", "s", 0, {})
            project = await app.conversations.create_project({"name": "p"})
            for _ in range(400):
                await app.conversations.create_episode(
                    session.id, " ".join(rng.choices(WORDS, k=20)),
                    " ".join(rng.choices(WORDS, k=30)), {}, "", 0, None)
            for _ in range(200):
                await app.memories.create({
                    "kind": 1, "title": " ".join(rng.choices(WORDS, k=5)),
                    "content": " ".join(rng.choices(WORDS, k=20)), "project_id": project.id})

            async def indexed() -> bool:
                return not await app.db.read_sql(lambda c: c.execute(
                    "SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'").fetchone()[0])

            await wait_until(indexed, timeout=300)
            retained = getattr(app.conversations, "retained_window", None)
            scope = MemoryScope(project_id=project.id)

            async def episodes(query: str, mode: SearchMode) -> int:
                window = None
                if retained is not None:  # the servicer's part, before the pipeline
                    window, _ = await retained(session.id, 0, TimeWindow())
                hits = app.episode_search.search(query, session.id, 0, 10, mode, window=window)
                return len([h async for h in hits])

            async def memories(query: str, mode: SearchMode) -> int:
                return len([h async for h in app.memory_search.search(query, scope, 10, mode)])

            for name, search, mode in (
                ("SearchEpisodes keyword", episodes, SearchMode.KEYWORD),
                ("SearchEpisodes hybrid", episodes, SearchMode.HYBRID),
                ("SearchMemories keyword", memories, SearchMode.KEYWORD),
                ("SearchMemories hybrid", memories, SearchMode.HYBRID),
            ):
                pool = WORDS[-5:] + WORDS[:20]
                queries = [" ".join(rng.sample(pool, 2)) for _ in range(cpu or SEARCHES)]
                for query in queries[:20]:
                    await search(query, mode)
                if cpu:
                    started = time.process_time()
                    for query in queries:
                        await search(query, mode)
                    spent = time.process_time() - started
                    print(f"{name}: {1000 * spent / cpu:.3f} ms of CPU a search", flush=True)
                    continue
                profile = cProfile.Profile()
                profile.enable()
                hits = 0
                for query in queries:
                    hits += await search(query, mode)
                profile.disable()
                calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
                print(f"{name}: {calls / SEARCHES:.0f} Python calls a search"
                      f" ({hits / SEARCHES:.1f} hits)", flush=True)
        finally:
            await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=0, help="time N searches of each instead")
    asyncio.run(main(parser.parse_args().cpu))
