"""The bounded loading cache (core/loading_cache.py) a search's costly pure
lookups go through: least recently used out first, an entry stale after its
ttl, one load shared by every asker of a key, a failed load not kept, a
cancelled asker not cancelling the load for the others, and close.

What it saves a search (a scope's common words, a question's vector) is
tests/unit/test_common_terms.py's and the embedding tier's.
"""

from __future__ import annotations

import asyncio

import pytest

from nexus_grpc.core.loading_cache import LoadingCache


class Loads:
    """Loads a key's value as ``f"{key}!"``, counting the loads of each key;
    with ``gate``, a load waits for it."""

    def __init__(self, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.count: dict[str, int] = {}

    def of(self, key: str):
        async def load() -> str:
            self.count[key] = self.count.get(key, 0) + 1
            if self.gate is not None:
                await self.gate.wait()
            return f"{key}!"

        return load


def test_a_cache_holds_at_least_one_entry():
    with pytest.raises(ValueError, match="capacity must be positive, got 0"):
        LoadingCache(0)


async def test_a_cached_value_is_not_loaded_again():
    cache: LoadingCache[str, str] = LoadingCache(4)
    loads = Loads()
    assert [await cache.get("a", loads.of("a")) for _ in range(3)] == ["a!"] * 3
    assert loads.count == {"a": 1}
    assert (cache.hits, cache.misses, len(cache)) == (2, 1, 1)


async def test_the_least_recently_used_entry_goes_first():
    cache: LoadingCache[str, str] = LoadingCache(2)
    loads = Loads()
    for key in ("a", "b", "a", "c"):  # "a" was used after "b": "b" goes
        await cache.get(key, loads.of(key))
    await cache.get("a", loads.of("a"))
    await cache.get("b", loads.of("b"))
    assert loads.count == {"a": 1, "b": 2, "c": 1}
    assert len(cache) == 2


async def test_an_entry_is_stale_its_ttl_after_it_was_loaded():
    now = [100.0]
    cache: LoadingCache[str, str] = LoadingCache(4, ttl=10.0, clock=lambda: now[0])
    loads = Loads()
    await cache.get("a", loads.of("a"))
    now[0] = 109.9
    await cache.get("a", loads.of("a"))
    assert loads.count == {"a": 1}
    now[0] = 110.0
    await cache.get("a", loads.of("a"))
    assert loads.count == {"a": 2}


async def test_concurrent_askers_of_a_key_share_one_load():
    gate = asyncio.Event()
    cache: LoadingCache[str, str] = LoadingCache(4)
    loads = Loads(gate)
    askers = [asyncio.create_task(cache.get("a", loads.of("a"))) for _ in range(5)]
    await asyncio.wait(askers, timeout=0)  # every asker is now waiting on the load
    gate.set()
    assert await asyncio.gather(*askers) == ["a!"] * 5
    assert loads.count == {"a": 1}
    assert (cache.hits, cache.misses) == (4, 1)


async def test_a_failed_load_reaches_every_asker_and_is_not_kept():
    cache: LoadingCache[str, str] = LoadingCache(4)
    tries = []

    async def failing() -> str:
        tries.append(1)
        raise RuntimeError("the model is away")

    for _ in range(2):
        with pytest.raises(RuntimeError, match="the model is away"):
            await cache.get("a", failing)
    assert len(tries) == 2 and len(cache) == 0


async def test_a_cancelled_asker_leaves_the_load_to_the_others_and_it_is_kept():
    gate = asyncio.Event()
    cache: LoadingCache[str, str] = LoadingCache(4)
    loads = Loads(gate)
    gone = asyncio.create_task(cache.get("a", loads.of("a")))
    stays = asyncio.create_task(cache.get("a", loads.of("a")))
    await asyncio.wait([gone, stays], timeout=0)
    gone.cancel()
    gate.set()
    assert await stays == "a!"
    assert gone.cancelled()
    assert await cache.get("a", loads.of("a")) == "a!"
    assert loads.count == {"a": 1}


async def test_close_cancels_the_loads_in_flight_and_forgets_every_entry():
    cache: LoadingCache[str, str] = LoadingCache(4)
    await cache.get("a", Loads().of("a"))
    waiting = Loads(asyncio.Event())
    asker = asyncio.create_task(cache.get("b", waiting.of("b")))
    await asyncio.wait([asker], timeout=0)
    await cache.close()
    with pytest.raises(asyncio.CancelledError):
        await asker
    assert len(cache) == 0
    loads = Loads()
    await cache.get("a", loads.of("a"))
    assert loads.count == {"a": 1}  # forgotten: loaded again
