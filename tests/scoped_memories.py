"""Thirteen memories, one of every kind and tier a scope must tell apart, and
eight scopes with exactly the titles each may see: shared by the keyword and
list paths on the fakes (tests/unit/test_isolation_memory_paths.py) and the
semantic and hybrid paths over gRPC (tests/e2e/service/test_memories.py).

The kinds and tiers are the core's ints, which are the wire enums' values.
A scope is made by ``make_scope`` (core ``MemoryScope`` or the proto's), both
taking the same keywords.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nexus_grpc.core.models import MemoryKind, Tier

P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
TASK, SESSION, LONGTERM, ARCHIVE = (int(t) for t in Tier)


def memory_specs(p1: int, p2: int, s1: int, s2: int) -> dict[str, dict[str, Any]]:
    """Title -> fields, for projects p1 and p2 and sessions s1 and s2 (of p1)."""
    return {
        "p1-task-s1": dict(kind=P, project_id=p1, tier=TASK, session_id=s1),
        "p1-session-s1": dict(kind=P, project_id=p1, tier=SESSION, session_id=s1),
        "p1-task-nosession": dict(kind=P, project_id=p1, tier=TASK),
        "p1-longterm": dict(kind=P, project_id=p1, tier=LONGTERM, session_id=s1),
        "p1-archive": dict(kind=P, project_id=p1, tier=ARCHIVE),
        "p2-longterm": dict(kind=P, project_id=p2, tier=LONGTERM),
        "alice-longterm": dict(kind=U, user_id="alice", tier=LONGTERM),
        "alice-p1-longterm": dict(kind=U, user_id="alice", project_id=p1, tier=LONGTERM),
        "alice-p2-longterm": dict(kind=U, user_id="alice", project_id=p2, tier=LONGTERM),
        "alice-session-s2": dict(
            kind=U, user_id="alice", project_id=p1, tier=SESSION, session_id=s2
        ),
        "bob-longterm": dict(kind=U, user_id="bob", tier=LONGTERM),
        "bob-p1-task-s1": dict(kind=U, user_id="bob", project_id=p1, tier=TASK, session_id=s1),
        "p1-agent-x": dict(kind=P, project_id=p1, tier=LONGTERM, agent_id="x"),
    }


def scope_cases(
    make_scope: Callable[..., Any], p1: int, p2: int, s1: int, s2: int
) -> list[tuple[Any, set[str]]]:
    """Each scope with exactly the titles of ``memory_specs`` it may see."""
    return [
        (
            make_scope(project_id=p1, user_id="alice", session_id=s1),
            {"p1-task-s1", "p1-session-s1", "p1-task-nosession", "p1-longterm",
             "alice-longterm", "alice-p1-longterm", "p1-agent-x"},
        ),
        (
            make_scope(project_id=p1, user_id="alice", session_id=s2),
            {"p1-task-nosession", "p1-longterm", "alice-longterm", "alice-p1-longterm",
             "alice-session-s2", "p1-agent-x"},
        ),
        (
            make_scope(project_id=p1, user_id="bob", session_id=s1, include_archived=True),
            {"p1-task-s1", "p1-session-s1", "p1-task-nosession", "p1-longterm", "p1-archive",
             "bob-longterm", "bob-p1-task-s1", "p1-agent-x"},
        ),
        (make_scope(user_id="alice"), {"alice-longterm"}),
        (make_scope(project_id=p2), {"p2-longterm"}),
        (
            make_scope(project_id=p2, user_id="alice"),
            {"p2-longterm", "alice-longterm", "alice-p2-longterm"},
        ),
        (make_scope(project_id=p1, agent_id="x"), {"p1-agent-x"}),
        (make_scope(user_id="carol", project_id=p2), {"p2-longterm"}),
    ]  # fmt: skip
