"""CreateEpisode's rules (domain/conversations.py), decided on the fakes of
tests/fakes.py: a request_id replays only the same call (AIP-155), a refused
retry writes nothing, the first episode may attach its session to a project
of its tenant, and a write for a user being forgotten, or one retried with a
request id an erasure buried, is refused.

What a client sees of it (the status codes over gRPC) is
tests/e2e/service/test_conversations.py's ``test_create_episode_is_idempotent_by_request_id``,
``test_a_request_id_reused_for_a_different_episode_is_refused`` (one refusal),
``test_create_episode_errors_write_nothing`` and
``test_first_episode_can_attach_the_session_to_its_project``.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Target
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from tests.fakes import FakeDatabase, FakeUnitOfWork


def world() -> tuple[FakeUnitOfWork, Conversations, int]:
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    return uow, Conversations(FakeDatabase(uow), JobSignals()), session


async def test_the_same_call_again_answers_with_the_first_episode_and_queues_nothing_more():
    uow, c, s = world()
    first = await c.create_episode(s, "a", "b", {"k": 1}, "r-1", occur_at=1_000.0)
    queued = [(j.kind, j.target_id) for j in uow.jobs.rows]
    # An unset occur_time means "now", which a retry cannot repeat: not compared.
    for occur_at in (1_000.0, None):
        again = await c.create_episode(s, "a", "b", {"k": 1}, "r-1", occur_at=occur_at)
        assert again.id == first.id
    assert list(uow.episodes.rows) == [first.id]
    assert [(j.kind, j.target_id) for j in uow.jobs.rows] == queued
    assert (jobs.INDEX_EPISODE, first.id) in queued


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"user_message": "other"}, "user_message"),
        ({"ai_response": ""}, "ai_response"),
        ({"metadata": {"k": 2}}, "metadata"),
        ({"occur_at": 2_000.0}, "occur_time"),
        ({"project_id": "P"}, "project_id"),
        ({"project_id": 999}, "project_id"),
    ],
)
async def test_a_request_id_reused_for_another_episode_is_refused_naming_what_differs(
    changed, named
):
    uow, c, s = world()
    project = uow.projects.insert({"name": "p"}, "t1").id
    call = {"user_message": "a", "ai_response": "b", "metadata": {"k": 1}, "occur_at": 1_000.0}
    first = await c.create_episode(s, request_id="r-1", **call)  # type: ignore[arg-type]
    retry = {**call, **changed}
    if retry.get("project_id") == "P":
        retry["project_id"] = project
    with pytest.raises(AlreadyExists) as refused:
        await c.create_episode(s, request_id="r-1", **retry)  # type: ignore[arg-type]
    assert (
        f"request_id 'r-1' was already used in session {s} for episode {first.id},"
        f" with a different {named}"
    ) in refused.value.message
    # Nothing written: no episode, and the session attached to no project.
    assert list(uow.episodes.rows) == [first.id]
    assert uow.sessions.get(s).project_id == 0


async def test_a_request_id_with_surrounding_spaces_is_refused_as_another_key():
    uow, c, s = world()
    await c.create_episode(s, "a", "b", {}, "r-1")
    with pytest.raises(InvalidArgument) as refused:
        await c.create_episode(s, "a", "b", {}, " r-1")
    assert refused.value.field == "request_id"
    assert len(uow.episodes.rows) == 1


async def test_the_first_episode_attaches_its_session_to_a_project_of_its_tenant():
    uow, c, s = world()
    kept = uow.projects.insert({"name": "kept", "retention": 3600.0}, "t1").id
    other = uow.projects.insert({"name": "other"}, "t1").id
    theirs = uow.projects.insert({"name": "theirs"}, "t2").id
    await c.create_episode(s, "a", "", {}, "", project_id=kept)
    assert uow.sessions.get(s).project_id == kept
    # The retention sweep now looks at what came in.
    assert uow.jobs.pending(jobs.RETAIN_PROJECT) == [kept]
    await c.create_episode(s, "b", "", {}, "", project_id=kept)  # the same: fine
    with pytest.raises(FailedPrecondition) as moved:
        await c.create_episode(s, "c", "", {}, "", project_id=other)
    assert f"session {s} belongs to project {kept}, not project_id {other}" in moved.value.message
    loose = uow.sessions.insert("loose", "", 0, {}, "t1").id
    for project, says in ((theirs, "belongs to another tenant"), (999, "999 does not exist")):
        with pytest.raises(FailedPrecondition) as refused:
            await c.create_episode(loose, "d", "", {}, "", project_id=project)
        assert says in refused.value.message
    assert uow.sessions.get(loose).project_id == 0
    assert len(uow.episodes.rows) == 2


async def test_a_write_for_a_user_being_forgotten_or_a_buried_retry_is_refused():
    uow, c, _ = world()
    ann = uow.sessions.insert("ann", "", 0, {}, "t1", user_id="ann").id
    bob = uow.sessions.insert("bob", "", 0, {}, "t1", user_id="bob").id
    running = erasure.start(uow, Target("t1", e.USER, "ann"), "")
    with pytest.raises(FailedPrecondition) as forgetting:
        await c.create_episode(ann, "hi", "", {}, "")
    assert f"(erasure {running.id})" in forgetting.value.message
    # bob's write goes on; a retry of one whose episode an erasure took does not.
    await c.create_episode(bob, "hi", "", {}, "r-1")
    uow.erasures.bury_requests([erasure.episode_request(uow, bob, "r-2")], running.id)
    with pytest.raises(FailedPrecondition) as buried:
        await c.create_episode(bob, "hi", "", {}, "r-2")
    assert f"names a write that erasure {running.id} removed" in buried.value.message
    assert [x.session_id for x in uow.episodes.rows.values()] == [bob]
