"""Which of a project's memories go with a deleted session (domain/conversations.py's
``delete_session``), on the fakes of tests/fakes.py: its TASK-tier memories,
and not its SESSION or LONGTERM ones nor another session's TASK memory; each
one taken leaves the vector index by its index job.

What else a session's delete takes is tests/unit/test_erasure_deletes.py's;
DeleteSession's wiring is tests/e2e/service/test_conversations.py's, and the
index job removing a memory's point tests/e2e/service/test_memory_expiry.py's.
"""

from __future__ import annotations

from nexus_grpc.core import jobs
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.memories import Memories
from tests.fakes import FakeDatabase, FakeUnitOfWork


async def test_a_deleted_sessions_task_memories_go_and_its_others_stay():
    uow = FakeUnitOfWork()
    db = FakeDatabase(uow)
    conv = Conversations(db, JobSignals())
    memories = Memories(db, JobSignals(), None, None)  # type: ignore[arg-type]
    project = (await conv.create_project({"name": "p"})).id
    s1 = (await conv.create_session("", "", project, {})).id
    s2 = (await conv.create_session("", "", project, {})).id
    made = {}
    for name, session, tier in (
        ("task", s1, Tier.TASK),
        ("session", s1, Tier.SESSION),
        ("longterm", s1, Tier.LONGTERM),
        ("other task", s2, Tier.TASK),
    ):
        values = {"kind": int(MemoryKind.PROJECT), "project_id": project, "session_id": session,
                  "tier": int(tier), "title": name, "content": "c"}  # fmt: skip
        made[name] = (await memories.create(values)).id
    uow.jobs.rows.clear()  # what the creates queued
    await conv.delete_session(s1)
    assert sorted(uow.memories.rows) == sorted(
        [made["session"], made["longterm"], made["other task"]]
    )
    assert uow.jobs.pending(jobs.INDEX_MEMORY) == [made["task"]]
