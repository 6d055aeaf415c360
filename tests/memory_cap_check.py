"""The fair cap as a property, shared by both tiers that run it: the random
sequences of creates, archive and un-archive updates and deletes (``ops``,
``long_ops``), the hypothesis settings, and ``check``, which runs a sequence
on a ``World`` (the domain's Memories with a cap of ``CAP`` over some store)
against a plain model of every owner's count. Not a test module, and it
imports no store: tests/unit/test_memory_cap_fairness.py runs it on the fakes,
tests/e2e/service/test_memory_cap_property.py on PostgreSQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from hypothesis import HealthCheck
from hypothesis import strategies as st

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.domain.memories import Memories
from nexus_grpc.errors import FailedPrecondition

T = TypeVar("T")

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
one_op = st.one_of(create_op, create_op, create_op, archive_op, delete_op)
ops = st.lists(one_op, max_size=60)
# Long enough that most sequences take some owner to its cap and try past it:
# of ``ops``' sequences (most of them under ten steps) hardly any do, so a
# domain that let a fourth memory in would pass 150 of them. 40 of these
# catch it, in a second on the fakes.
long_ops = st.lists(one_op, min_size=30, max_size=60)

SETTINGS: dict[str, Any] = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class World(Protocol):
    """Memories with a cap of ``CAP`` over some store, its one project, and a
    way to run a call to the end."""

    memories: Memories
    project: int

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...


def owner_key(kind: int, project: int, agent: str, user: str) -> tuple:
    return (kind, project, agent, user if kind == MemoryKind.USER else "")


def check(world: World, sequence) -> None:
    """Runs ``sequence`` on ``world`` (whose store holds no memories yet),
    checking each step against the model's count."""
    live: list[tuple[int, tuple, int]] = []  # (id, owner key, tier)
    counted: Counter[tuple] = Counter()
    for step, op in enumerate(sequence):
        if op[0] == "create":
            _create(world, step, op, live, counted)
        elif op[0] == "archive" and live:
            _move(world, op, live, counted)
        elif op[0] == "delete" and live:
            memory_id, key, tier = live.pop(op[1] % len(live))
            world.run(world.memories.delete(memory_id, key[3]))
            if tier != Tier.ARCHIVE:
                counted[key] -= 1


def _create(world: World, step: int, op: tuple, live: list, counted: Counter) -> None:
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
        return
    assert under, f"accepted {key} past its cap ({counted[key]})"
    live.append((memory.id, key, int(tier)))
    if tier != Tier.ARCHIVE:
        counted[key] += 1


def _move(world: World, op: tuple, live: list, counted: Counter) -> None:
    """Into the ARCHIVE tier or out of it (a create, as far as the cap goes)."""
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
        return
    assert under, f"un-archive accepted {key} past its cap"
    counted[key] += (target != Tier.ARCHIVE) - (tier != Tier.ARCHIVE)
    live[i] = (memory_id, key, int(target))
