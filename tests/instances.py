"""Two real nexus-grpc instances, each on its own database of the embedded
PostgreSQL, for a test in another language (the TypeScript client's) to
balance over and to take one of them down.

``python -m tests.instances`` prints one JSON line, ``{"a": target, "b":
target}``, once both serve, then answers one JSON line per command read from
stdin:

- ``down``: instance a's database refuses connections (and cuts those it
  had); answered once a's health says NOT_SERVING;
- ``up``: it takes them again; answered once a's health says SERVING;
- ``count``: how many sessions each instance's database holds (null for a
  while it is down: its database cannot be read);
- ``quit`` (or the end of stdin): everything stops and is removed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests import pg
from tests.support import Harness, start_harness


def allow_connections(url: str, allowed: bool) -> None:
    """A database that went away (or a partition from it), or back again."""
    import psycopg

    name = pg.database_name(url)
    with psycopg.connect(pg.server().get_uri(), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {str(allowed).lower()}")
        if not allowed:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )


async def sessions(h: Harness) -> int:
    return await h.app.db.read_sql(
        lambda c: int(c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
    )


async def main() -> None:
    urls = [pg.new_database(), pg.new_database()]
    root = Path(tempfile.mkdtemp(prefix="nexus-instances-"))
    a = await start_harness(root / "a", database_url=urls[0])
    b = await start_harness(root / "b", database_url=urls[1])
    health = health_pb2_grpc.HealthStub(a.channel).Watch(health_pb2.HealthCheckRequest())

    async def a_says(status: int) -> None:
        while (await asyncio.wait_for(health.read(), 60)).status != status:
            pass

    def answer(value: object) -> None:
        print(json.dumps(value), flush=True)

    down = False
    try:
        await a_says(health_pb2.HealthCheckResponse.SERVING)
        answer({"a": a.target, "b": b.target})
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line in ("", "quit"):
                break
            if line == "down":
                allow_connections(urls[0], False)
                down = True
                await a_says(health_pb2.HealthCheckResponse.NOT_SERVING)
                answer({"a": "NOT_SERVING"})
            elif line == "up":
                allow_connections(urls[0], True)
                down = False
                await a_says(health_pb2.HealthCheckResponse.SERVING)
                answer({"a": "SERVING"})
            elif line == "count":
                answer({"a": None if down else await sessions(a), "b": await sessions(b)})
            else:
                answer({"error": f"unknown command {line!r}"})
    finally:
        health.cancel()
        await a.close()
        await b.close()
        allow_connections(urls[0], True)
        for url in urls:
            pg.drop_database(url)
        pg.stop()


if __name__ == "__main__":
    asyncio.run(main())
