"""Who may write into a session that belongs to a user (domain/session_rights.py),
and ExtractEpisode's ``all_failed`` for a key that may act for some users only."""

from __future__ import annotations

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.models import JobState, Session
from nexus_grpc.domain.extraction import _requeue_tenant_failed
from nexus_grpc.domain.session_rights import require_may_write
from nexus_grpc.errors import PermissionDenied
from tests.fakes import FakeUnitOfWork


@pytest.fixture
def as_caller():
    tokens = []

    def bind(users: set[str] | None, admin: bool = False) -> None:
        caller = tenancy.Caller("team", None if users is None else frozenset(users), admin)
        tokens.append(tenancy.bind(caller))

    yield bind
    for token in reversed(tokens):
        tenancy.reset(token)


@pytest.mark.parametrize(
    ("users", "admin", "allowed"),
    [
        ({"ann"}, False, True),
        ({"bob"}, False, False),
        (set(), False, False),
        (None, False, True),  # a '*' key
        ({"bob"}, True, True),  # an admin key acts for every user
    ],
)
def test_only_a_key_that_may_act_for_the_user_writes_into_their_session(
    as_caller, users, admin, allowed
):
    as_caller(users, admin)
    session = Session(7, "s7", tenant="team", user_id="ann")
    if allowed:
        require_may_write(session)
    else:
        with pytest.raises(PermissionDenied, match="session 7 belongs to user 'ann'"):
            require_may_write(session)
    # A session with no user is anyone's of the tenant to write into.
    require_may_write(Session(8, "s8", tenant="team"))


def test_extract_all_failed_queues_only_the_sessions_the_key_may_write(as_caller):
    uow = FakeUnitOfWork()
    episodes = {}
    for user in ("ann", "bob", ""):
        session = uow.sessions.insert(f"s-{user}", "", 0, {}, "team", user_id=user)
        episode = uow.episodes.insert(session.id, f"hi from {user}", "", {}, None)
        uow.episodes.set_extract_state(episode.id, JobState.FAILED, "model away")
        episodes[user] = episode.id
    as_caller({"ann"})
    assert _requeue_tenant_failed(uow, "team") == 2
    state = {u: uow.episodes.get(i).extract_state for u, i in episodes.items()}
    assert state == {"ann": JobState.PENDING, "bob": JobState.FAILED, "": JobState.PENDING}
    assert uow.jobs.pending(jobs.EXTRACT_EPISODE) == [episodes["ann"], episodes[""]]
