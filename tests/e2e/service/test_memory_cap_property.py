"""The fair cap as a property: no interleaving of users' creates refuses a
user who is under their own cap.

Random sequences of creates (users, kinds, tiers, agents, projects), archive
and un-archive updates and deletes run against the real domain object and a
real database: SQLite, and PostgreSQL, where the check and the insert share
a transaction that other transactions may run beside. A plain model counts
each owner's memories outside the ARCHIVE tier (PROJECT per (project, agent),
USER per (project, agent, user)); every create must succeed exactly when its
own owner is under the cap, and a refusal must name that owner's count and no
one else's.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition
from nexus_grpc.store import Database
from nexus_grpc.store import projects as project_store
from tests.support import HashingEmbedder

CAP = 3
USERS = ("u1", "u2", "u3")
AGENTS = ("", "a")

create_op = st.tuples(
    st.just("create"),
    st.sampled_from(list(MemoryKind)),
    st.sampled_from(USERS),
    st.sampled_from((0, 1)),  # project index: 0 = none (USER only), 1 = the project
    st.sampled_from(AGENTS),
    st.sampled_from(list(Tier)),
)
# Index into the memories created so far (modulo), for updates and deletes.
archive_op = st.tuples(st.just("archive"), st.integers(0, 100), st.booleans())
delete_op = st.tuples(st.just("delete"), st.integers(0, 100))
ops = st.lists(st.one_of(create_op, create_op, create_op, archive_op, delete_op), max_size=60)


class World:
    def __init__(self, tmp: Path, database_url: str = "") -> None:
        self.loop = asyncio.new_event_loop()
        if database_url:
            from nexus_grpc.store.postgres.database import PostgresDatabase

            self.db = cast(Database, PostgresDatabase(database_url))
        else:
            self.db = Database(tmp / "cap.sqlite3", synchronous="OFF")
        self.loop.run_until_complete(self._open())

    async def _open(self) -> None:
        await self.db.open()
        self.memories = Memories(self.db, JobSignals(), HashingEmbedder(), None, cap=CAP)  # type: ignore[arg-type]
        self.project = (
            await self.db.write_sql(
                lambda c: project_store.ProjectRows(c).insert({"name": "shared"})
            )
        ).id

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.db.close())
        self.loop.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = World(tmp_path_factory.mktemp("cap"))
    yield w
    w.close()


@pytest.fixture(scope="module")
def pg_world(tmp_path_factory):
    from tests import pg

    url = pg.new_database()
    w = World(tmp_path_factory.mktemp("cap"), url)
    yield w
    w.close()
    pg.drop_database(url)


def owner_key(kind: int, project: int, agent: str, user: str) -> tuple:
    return (kind, project, agent, user if kind == MemoryKind.USER else "")


SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@settings(max_examples=150, **SETTINGS)
@given(sequence=ops)
def test_no_interleaving_refuses_a_user_under_their_own_cap(world, sequence):
    check(world, sequence)


@settings(max_examples=150, **SETTINGS)
@given(sequence=ops)
def test_no_interleaving_refuses_a_user_under_their_own_cap_on_postgresql(pg_world, sequence):
    check(pg_world, sequence)


def check(world: World, sequence) -> None:
    world.run(world.db.write_sql(lambda c: c.execute("DELETE FROM memories")))
    live: list[tuple[int, tuple, int]] = []  # (id, owner key, tier)
    counted: Counter[tuple] = Counter()
    for step, op in enumerate(sequence):
        if op[0] == "create":
            _, kind, user, with_project, agent, tier = op
            project = world.project if with_project else 0
            if kind == MemoryKind.PROJECT and not project:
                project = world.project
            key = owner_key(kind, project, agent, user)
            under = tier == Tier.ARCHIVE or counted[key] < CAP
            values = {
                "kind": int(kind),
                # Each create is another memory: the same words in the same
                # tier and owner would answer with the one already there.
                "title": f"t {step}",
                "content": f"c {step}",
                "tier": int(tier),
                "project_id": project,
                "agent_id": agent,
                "user_id": user if kind == MemoryKind.USER else "",
            }
            try:
                memory = world.run(world.memories.create(values))
            except FailedPrecondition as exc:
                assert not under, f"refused {key} at {counted[key]} < {CAP}: {exc}"
                assert f"already holds {counted[key]} " in str(exc)
                others = set(USERS) - {user}
                assert not any(repr(o) in str(exc) for o in others)
                continue
            assert under, f"accepted {key} past its cap ({counted[key]})"
            live.append((memory.id, key, int(tier)))
            if tier != Tier.ARCHIVE:
                counted[key] += 1
        elif op[0] == "archive" and live:
            i = op[1] % len(live)
            memory_id, key, tier = live[i]
            target = Tier.ARCHIVE if op[2] else Tier.LONGTERM
            user = key[3]
            leaving = tier == Tier.ARCHIVE and target != Tier.ARCHIVE
            under = not leaving or counted[key] < CAP
            try:
                world.run(world.memories.update(memory_id, {"tier": int(target)}, ["tier"], user))
            except FailedPrecondition:
                assert not under, f"un-archive refused {key} at {counted[key]} < {CAP}"
                continue
            assert under, f"un-archive accepted {key} past its cap"
            counted[key] += (target != Tier.ARCHIVE) - (tier != Tier.ARCHIVE)
            live[i] = (memory_id, key, int(target))
        elif op[0] == "delete" and live:
            memory_id, key, tier = live.pop(op[1] % len(live))
            world.run(world.memories.delete(memory_id, key[3]))
            if tier != Tier.ARCHIVE:
                counted[key] -= 1
