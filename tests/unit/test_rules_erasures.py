"""The erasure use cases (domain/erasures.py) on the fakes of tests/fakes.py:
who may forget a user and what a refusal says (the same NOT_FOUND as for a
user who holds nothing), a request that joins a running erasure, who reads
a receipt and when it names its user, the receipts listed by tenant and
user, and a watch that follows an erasure to its end.

An erasure's own steps are tests/unit/test_erasure_rules.py. What a client
sees of these rules over the wire (the status codes, the admin-only
listing the API decides, another tenant's keys) is the whole-server tier's:
tests/e2e/api/test_forget_user_rights.py and tests/e2e/service/test_forget_user.py.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Counts, Target
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import erasure, erasures
from nexus_grpc.domain.erasures import Erasures, _nothing_held
from nexus_grpc.errors import InvalidArgument, NotFound, PermissionDenied
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.callers import acting_as

T1 = "t1"


@pytest.fixture
def uow() -> FakeUnitOfWork:
    """Tenant t1: ann's session of two episodes in project p; bob's session with none."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "p"}, T1).id
    session = uow.sessions.insert("s", "", project, {}, T1, user_id="ann").id
    for text in ("hi", "again"):
        uow.episodes.insert(session, text, "", {}, None, acts_for="ann")
    uow.sessions.insert("s2", "", project, {}, T1, user_id="bob")
    return uow


@pytest.fixture
def signals() -> JobSignals:
    return JobSignals()


@pytest.fixture
def use(uow: FakeUnitOfWork, signals: JobSignals) -> Erasures:
    return Erasures(FakeDatabase(uow), signals, T1)


async def _refused(call) -> NotFound:
    with pytest.raises(NotFound) as err:
        await call
    return err.value


async def test_a_user_key_forgets_its_own_user_and_the_job_is_woken(use, uow, signals):
    with acting_as(T1, frozenset({"ann"})):
        started = await use.forget_user("ann", 0, "key-ann")
    assert started.user_id == "ann" and not started.joined
    assert started.planned == Counts(sessions=1, episodes=2)
    assert uow.jobs.pending(jobs.ERASE) == [started.id]
    assert signals.event(jobs.ERASE).is_set()


async def test_a_user_no_key_may_act_for_is_answered_as_one_who_holds_nothing(use, uow):
    with acting_as(T1, frozenset({"ann"})):
        nobody = await _refused(use.forget_user("zed", 0, ""))
        bob = await _refused(use.forget_user("bob", 0, ""))
    assert (bob.message, nobody.message) == (
        "user 'bob' holds nothing here",
        "user 'zed' holds nothing here",
    )
    assert bob.details == _nothing_held("bob").details
    assert nobody.details == _nothing_held("zed").details
    assert (bob.details[0].resource_type, bob.details[0].resource_name) == ("user", "bob")
    assert uow.erasures.rows == {}


async def test_another_tenants_keys_hear_of_a_user_who_holds_nothing(use, uow):
    with acting_as("t2"):  # a "*" key of t2: ann holds nothing in t2
        refused = await _refused(use.forget_user("ann", 0, ""))
    assert refused.message == "user 'ann' holds nothing here"
    assert uow.erasures.rows == {}


async def test_a_project_of_another_tenant_does_not_exist(use, uow):
    theirs = uow.projects.insert({"name": "q"}, "t2").id
    with acting_as(T1):
        refused = await _refused(use.forget_user("ann", theirs, ""))
    assert refused.message == f"project {theirs} does not exist"
    assert (refused.details[0].resource_type, refused.details[0].resource_name) == (
        "project",
        str(theirs),
    )


async def test_a_user_id_is_required_and_must_be_an_identifier(use):
    with pytest.raises(InvalidArgument) as err:
        await use.forget_user("", 0, "")
    assert err.value.field == "user_id"
    with pytest.raises(InvalidArgument) as err:
        await use.forget_user("ann", -1, "")
    assert err.value.field == "project_id"


async def test_a_request_joins_a_running_erasure_of_a_user_who_holds_nothing_now(use, uow):
    # zed holds nothing (an erasure's job took it all), but zed's erasure runs.
    running = erasure.start(uow, Target(T1, e.USER, "zed"), "")
    again = await use.forget_user("zed", 0, "")
    assert (again.id, again.joined) == (running.id, True)
    erasure.finish(uow, running.id)
    refused = await _refused(use.forget_user("zed", 0, ""))
    assert refused.message == "user 'zed' holds nothing here"


async def test_a_running_erasure_is_read_only_by_keys_that_may_act_for_its_user(use):
    started = await use.forget_user("ann", 0, "")
    with acting_as(T1, frozenset({"ann"})):
        assert (await use.get(started.id)).user_id == "ann"
    with acting_as(T1, frozenset({"carol"})):
        refused = await _refused(use.get(started.id))
    assert refused.message == f"erasure {started.id} does not exist"
    with acting_as(T1):
        assert (await use.get(started.id)).user_id == "ann"


async def test_a_finished_receipt_names_its_user_only_to_a_key_for_that_user(use, uow):
    started = await use.forget_user("ann", 0, "")
    erasure.finish(uow, started.id)
    with acting_as(T1, frozenset({"carol", "ann"})):
        mine = await use.get(started.id)
    assert (mine.user_id, mine.done) == ("ann", True)
    with acting_as(T1):  # a "*" key reads it, without the id it no longer keeps
        assert (await use.get(started.id)).user_id == ""
    with acting_as(T1, frozenset({"carol"})):
        await _refused(use.get(started.id))


async def test_another_tenants_receipt_or_an_unknown_id_does_not_exist(use):
    started = await use.forget_user("ann", 0, "")
    with acting_as("t2"):
        refused = await _refused(use.get(started.id))
    assert refused.message == f"erasure {started.id} does not exist"
    with acting_as("t2", all_tenants=True):  # an admin key sees every tenant
        assert (await use.get(started.id)).tenant == T1
    with acting_as(T1):
        missing = await _refused(use.get(started.id + 1))
    assert (missing.details[0].resource_type, missing.details[0].resource_name) == (
        "erasure",
        str(started.id + 1),
    )


async def test_a_project_erasure_is_read_by_any_key_of_its_tenant(use, uow):
    project = uow.projects.insert({"name": "q"}, T1).id
    receipt = uow.erasures.start(Target(T1, e.PROJECT, "", project), "", "")
    with acting_as(T1, frozenset({"carol"})):
        assert (await use.get(receipt.id)).project_id == project


async def test_receipts_are_listed_newest_first_and_name_only_the_user_asked_for(use, uow):
    ann = await use.forget_user("ann", 0, "")
    bob = await use.forget_user("bob", 0, "")
    for done in (ann, bob):
        erasure.finish(uow, done.id)
    listed = await use.list_receipts(0, "", "", "")
    assert [(r.id, r.user_id) for r in listed.items] == [(bob.id, ""), (ann.id, "")]
    named = await use.list_receipts(0, "", "", "ann")
    assert [(r.id, r.user_id) for r in named.items] == [(ann.id, "ann")]
    assert (await use.list_receipts(0, "", "", "zed")).items == []


async def test_receipts_come_in_pages(use, uow):
    ann = await use.forget_user("ann", 0, "")
    bob = await use.forget_user("bob", 0, "")
    first = await use.list_receipts(1, "", "", "")
    assert [r.id for r in first.items] == [bob.id] and first.next_token
    rest = await use.list_receipts(1, first.next_token, "", "")
    assert ([r.id for r in rest.items], rest.next_token) == ([ann.id], "")


async def test_only_a_key_that_sees_every_tenant_lists_another_tenants_receipts(use):
    await use.forget_user("ann", 0, "")
    with acting_as(T1), pytest.raises(PermissionDenied):
        await use.list_receipts(0, "", "t2", "")
    with acting_as(T1, all_tenants=True):
        assert (await use.list_receipts(0, "", "t2", "")).items == []
        assert len((await use.list_receipts(0, "", T1, "")).items) == 1


async def test_a_watch_yields_the_erasure_then_each_change_until_it_is_done(use, uow, monkeypatch):
    monkeypatch.setattr(erasures, "WATCH_POLL_SECONDS", 0)  # read again at once
    started = await use.forget_user("ann", 0, "")
    watch = use.watch(started.id)
    first = await anext(watch)
    assert (first.id, first.done) == (started.id, False)
    erasure.finish(uow, started.id)
    use.committed()
    last = await anext(watch)
    assert last.done
    with pytest.raises(StopAsyncIteration):
        await anext(watch)
