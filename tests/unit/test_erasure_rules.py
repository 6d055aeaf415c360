"""An erasure's own rules (domain/erasure.py), decided on the fakes of
tests/fakes.py: what a new erasure plans from what the user holds, when a
request joins one that runs, the writes refused while it runs or after it
buried their request ids, its last step over the user's records, when its
files may be scrubbed, and its final receipt.

A whole erasure run step by step on the fakes (what goes and stays, a
replayed request id, a second request joining) is
tests/unit/test_forget_user_erasure.py's; who may ask and who reads the
receipts, tests/unit/test_forget_rights.py's. What a client sees of them is
the whole-server tier's: tests/e2e/service/test_forget_user.py (every byte
scan) and tests/e2e/api/test_forget_user_rights.py (the wiring).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Counts, Target
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import SelectionAnswer, SelectionKey, UsageOwner, UsageRecord
from nexus_grpc.domain import erasure
from nexus_grpc.errors import ErrorInfo, FailedPrecondition, FieldViolation
from tests.fakes import FakeUnitOfWork


def _memory(uow: FakeUnitOfWork, user_id: str, project_id: int, kind: MemoryKind) -> int:
    values = {
        "kind": int(kind), "title": "t", "content": "c", "tier": int(Tier.LONGTERM),
        "project_id": project_id, "agent_id": "", "user_id": user_id, "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    return uow.memories.insert(values, None, "t1").id


def _ann(uow: FakeUnitOfWork) -> int:
    """ann in tenant t1's project: a session of two episodes and a memory."""
    project = uow.projects.insert({"name": "p"}, "t1").id
    session = uow.sessions.insert("s", "", project, {}, "t1", user_id="ann").id
    for text in ("hi", "again"):
        uow.episodes.insert(session, text, "", {}, None, acts_for="ann")
    _memory(uow, "ann", project, MemoryKind.USER)
    return project


def test_a_new_erasure_plans_from_what_the_user_holds_and_queues_its_job():
    uow = FakeUnitOfWork()
    _ann(uow)
    started = erasure.start(uow, Target("t1", e.USER, "ann"), "key-a")
    assert not started.joined
    assert (started.state, started.phase) == (e.RUNNING, e.EPISODES)
    assert started.planned == Counts(sessions=1, episodes=2, memories=1)
    # The plan and the first phase are kept: the job resumes from the receipt.
    kept = uow.erasures.get(started.id)
    assert (kept.planned, kept.phase, kept.user_id, kept.principal) == (
        started.planned, e.EPISODES, "ann", "key-a",
    )  # fmt: skip
    assert uow.jobs.pending(jobs.ERASE) == [started.id]
    # A user who holds nothing plans nothing (and is erased all the same).
    nobody = erasure.start(uow, Target("t1", e.USER, "bob"), "")
    assert (nobody.planned, nobody.phase) == (Counts(), e.EPISODES)


def test_a_request_joins_a_running_erasure_of_the_same_user_that_covers_it():
    uow = FakeUnitOfWork()
    project = _ann(uow)
    whole = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    # The tenant-wide one covers any project of the tenant.
    for target in (Target("t1", e.USER, "ann"), Target("t1", e.USER, "ann", project)):
        joined = erasure.start(uow, target, "")
        assert (joined.id, joined.joined) == (whole.id, True)
    # Another tenant's ann, or another user, is another erasure.
    assert erasure.start(uow, Target("t2", e.USER, "ann"), "").id != whole.id
    assert erasure.start(uow, Target("t1", e.USER, "bob"), "").id != whole.id
    assert len(uow.jobs.pending(jobs.ERASE)) == 3
    # Once it is done, a new request starts anew.
    erasure.finish(uow, whole.id)
    again = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    assert (again.id != whole.id, again.joined) == (True, False)


def test_a_project_limited_erasure_covers_only_its_project():
    uow = FakeUnitOfWork()
    project = _ann(uow)
    other = uow.projects.insert({"name": "q"}, "t1").id
    limited = erasure.start(uow, Target("t1", e.USER, "ann", project), "")
    assert erasure.start(uow, Target("t1", e.USER, "ann", project), "").joined
    for target in (Target("t1", e.USER, "ann", other), Target("t1", e.USER, "ann")):
        started = erasure.start(uow, target, "")
        assert (started.id != limited.id, started.joined) == (True, False)


def test_a_write_for_a_user_being_forgotten_is_refused_until_the_erasure_is_done():
    uow = FakeUnitOfWork()
    # Nothing was ever erased: no key, no digest, nothing refused (and none made).
    erasure.refuse_while_forgetting(uow, "t1", "ann")
    assert uow.meta.get("erasure_key") is None
    _ann(uow)
    running = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    with pytest.raises(FailedPrecondition) as refused:
        erasure.refuse_while_forgetting(uow, "t1", "ann")
    assert f"user 'ann' is being forgotten (erasure {running.id})" in refused.value.message
    assert refused.value.details == (
        ErrorInfo("USER_BEING_FORGOTTEN", {"erasure_id": str(running.id)}),
    )
    # Another user, another tenant's ann, or a write for no user goes through.
    for tenant, user in (("t1", "bob"), ("t2", "ann"), ("t1", "")):
        erasure.refuse_while_forgetting(uow, tenant, user)
    erasure.finish(uow, running.id)
    erasure.refuse_while_forgetting(uow, "t1", "ann")


def test_a_write_retried_with_a_request_id_an_erasure_buried_is_refused():
    uow = FakeUnitOfWork()
    # Before any erasure the digest is '' and nothing is refused.
    assert erasure.episode_request(uow, 1, "r-1", create=False) == ""
    erasure.refuse_buried(uow, "", "r-1")
    taken = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    uow.erasures.bury_requests([erasure.episode_request(uow, 1, "r-1")], taken.id)
    digest = erasure.episode_request(uow, 1, "r-1", create=False)
    with pytest.raises(FailedPrecondition) as refused:
        erasure.refuse_buried(uow, digest, "r-1")
    message = refused.value.message
    assert f"names a write that erasure {taken.id} removed" in message
    assert refused.value.details == (
        FieldViolation("request_id", message),
        ErrorInfo("REQUEST_ERASED", {"erasure_id": str(taken.id)}),
    )
    # The same id in another session, or another id, is another write.
    for session, request_id in ((2, "r-1"), (1, "r-2")):
        erasure.refuse_buried(
            uow, erasure.episode_request(uow, session, request_id, create=False), request_id
        )


def _records(uow: FakeUnitOfWork, project: int) -> None:
    """ann's uses and selection of the project's memory, and an LLM call for her."""
    shared = _memory(uow, "", project, MemoryKind.PROJECT)
    uow.memories.record_usage(
        "th", UsageOwner("ann", project, "t1"), "x", [UsageRecord(shared, 0.5, 1)]
    )
    uow.memories.insert_selection(
        SelectionKey("t1", "ann", project, "s-1"), "d", SelectionAnswer([], "llm", "", 0)
    )
    uow.usage.insert([LLMCall("formation", project, "t1", 10, 1, 0.5, "ok", 100.0, user_id="ann")])


def test_the_records_step_takes_the_users_records_then_leaves_only_the_files():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    _records(uow, project)
    started = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    uow.erasures.save(replace(started, phase=e.RECORDS))
    after = erasure.step(uow, started.id, 500.0)
    assert after.counts == Counts(memory_usage=1, selections=1, llm_calls_unlinked=1)
    # Every row is gone: the files are next, and the user's id is kept no longer.
    assert (after.phase, after.user_id, after.carry) == (e.DISK, "", {"disk_at": 500.0})
    assert uow.erasures.get(started.id).phase == e.DISK
    assert uow.usage.spent_by_users(0.0, "t1") == {}
    assert uow.usage.spent(0.0, ["t1"]) == {"t1": 11}  # the tenant's spend is kept
    # The disk phase is the scrubber's: a step leaves it as it is.
    assert erasure.step(uow, started.id, 600.0) == uow.erasures.get(started.id)


def test_anything_written_for_the_user_meanwhile_sends_the_erasure_round_again():
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, "t1").id
    _records(uow, project)
    started = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    uow.erasures.save(replace(started, phase=e.RECORDS))
    _memory(uow, "ann", project, MemoryKind.USER)  # a write that began before the refusal
    after = erasure.step(uow, started.id, 500.0)
    assert after.counts == Counts(memory_usage=1, selections=1, llm_calls_unlinked=1)
    assert (after.phase, after.user_id) == (e.EPISODES, "ann")


def test_the_files_wait_for_the_index_work_queued_before_and_the_receipt_keeps_no_user():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t1", user_id="ann").id
    episode = uow.episodes.insert(session, "hi", "", {}, None).id
    uow.jobs.enqueue(jobs.INDEX_EPISODE, [episode])
    started = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    disk_at = uow.jobs.rows[0].created_at + 1
    uow.erasures.save(
        replace(started, phase=e.DISK, user_id="", carry={"disk_at": disk_at, "overviews": {}})
    )
    assert not erasure.disk_ready(uow, uow.erasures.get(started.id))
    uow.jobs.finish([j.id for j in uow.jobs.rows if j.kind == jobs.INDEX_EPISODE])
    assert erasure.disk_ready(uow, uow.erasures.get(started.id))
    done = erasure.finish(uow, started.id)
    assert (done.state, done.phase, done.user_id, done.carry) == (
        e.DONE, e.FINISHED, "", {"overviews": {}},
    )  # fmt: skip
    assert done.finished_at is not None
    assert uow.erasures.get(started.id) == done
    # Finishing again changes nothing; a receipt that does not exist is None.
    assert erasure.finish(uow, started.id) == done
    assert erasure.finish(uow, 999) is None
    assert uow.erasures.forgotten("t1") == {
        erasure.user_digest(uow, "t1", "ann"): started.started_at
    }
