"""A person's pages (console/people.py) from a stand-in client's answers
(tests/unit/console_stand_ins.py's): the user page counts
ExportUser's records as they pass, by kind and by project, episodes written
for the user in others' sessions apart; the projects named, as far as the key
may read them; the receipts list; an erasure's page. The typed id, the
download's name and an erasure's progress are in test_console_people.py.

That the counts are the server's export, record for record, under each key's
rights, stays whole-server in tests/e2e/console/test_console_users.py."""

from __future__ import annotations

import grpc
import pytest

from nexus_grpc.client import NexusClientError
from nexus_grpc.console import people
from nexus_grpc.console.params import BadRequest
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.console_stand_ins import StandIn, Stream, by_id


def _session(i: int, project: int) -> memory_pb2.ExportRecord:
    return memory_pb2.ExportRecord(
        session=memory_pb2.Session(id=i, project_id=project, user_id="alice")
    )


def _episode(i: int, session: int) -> memory_pb2.ExportRecord:
    return memory_pb2.ExportRecord(episode=memory_pb2.Episode(id=i, session_id=session))


def _memory(i: int, project: int) -> memory_pb2.ExportRecord:
    return memory_pb2.ExportRecord(memory=memory_pb2.Memory(id=i, project_id=project))


EXPORT = [
    _session(1, 3), _episode(10, 1), _episode(11, 1),
    _session(2, 5), _episode(12, 2),
    _episode(13, 99),  # written for alice in someone else's session
    _memory(20, 3), _memory(21, 0),  # a USER memory of no project
    memory_pb2.ExportRecord(entity_alias={"name": "Ali"}),
]  # fmt: skip


async def test_the_user_page_counts_the_export_by_kind_and_by_project():
    client = StandIn(
        export_user=Stream(EXPORT),
        get_project=by_id({3: memory_pb2.Project(id=3, name="Atlas")}, "project"),
    )
    view = await people.user(client, {"user_id": "alice"})
    assert view["counts"] == {
        "session": 2, "episode": 4, "memory": 2, "memory_revision": 0, "entity": 0,
        "relationship": 0, "relationship_evidence": 0, "entity_episode": 0,
        "entity_alias": 1, "memory_usage": 0,
    }  # fmt: skip
    assert [h["kind"] for h in view["held"]] == list(people.HELD_KINDS)
    assert [
        (
            p["project_id"],
            p["name"],
            p.get("sessions", 0),
            p.get("episodes", 0),
            p.get("memories", 0),
        )
        for p in view["projects"]
    ] == [(0, "", 0, 0, 1), (3, "Atlas", 1, 2, 1), (5, "", 1, 1, 0)]
    assert view["episodes_elsewhere"] == 1
    # Project 5 could not be read by this key: shown by its id. No project 0 is asked for.
    assert sorted(a["id"] for a in client.asked("get_project")) == [3, 5]
    assert client.asked("export_user") == [{"user_id": "alice", "project_id": 0}]


async def test_the_user_page_limited_to_a_project_names_it_and_without_a_user_is_a_form():
    client = StandIn(
        export_user=Stream([_session(1, 3)]),
        get_project=memory_pb2.Project(id=3, name="Atlas"),
    )
    view = await people.user(client, {"user_id": "alice", "project_id": "3"})
    assert view["project"]["name"] == "Atlas" and view["counts"]["session"] == 1
    assert client.asked("export_user") == [{"user_id": "alice", "project_id": 3}]
    idle = StandIn()
    assert await people.user(idle, {}) == {"user_id": "", "project_id": 0, "project": None}
    assert idle.calls == []


async def test_a_user_id_is_taken_as_typed_and_at_most_200_characters():
    idle = StandIn()
    with pytest.raises(BadRequest) as refused:
        await people.user(idle, {"user_id": "a" * 201})
    assert refused.value.message == "user_id: is 201 characters; the limit is 200"
    assert idle.calls == []
    client = StandIn(export_user=Stream([]))
    await people.user(client, {"user_id": " alice "})
    assert client.asked("export_user")[0]["user_id"] == " alice "  # the server judges it


async def test_the_receipts_list_each_erasure_with_its_progress():
    listed = memory_pb2.ListErasuresResponse(
        erasures=[memory_pb2.Erasure(id=4, state=memory_pb2.ERASURE_STATE_DONE, user_id="erin")],
        next_page_token="more",
    )
    client = StandIn(list_erasures=listed)
    view = await people.receipts(client, {"user_id": "erin", "page_token": "p"})
    assert [(e["id"], e["finished"], e["percent"]) for e in view["erasures"]] == [(4, True, 100)]
    assert view["next_page_token"] == "more" and view["user_id"] == "erin"
    assert client.asked("list_erasures") == [
        {"page_size": people.RECEIPTS_PER_PAGE, "page_token": "p", "user_id": "erin"}
    ]


async def test_an_erasures_page_is_its_view_and_a_refusal_is_the_servers():
    running = memory_pb2.Erasure(
        id=4, state=memory_pb2.ERASURE_STATE_RUNNING,
        counts=memory_pb2.ErasureCounts(sessions=1), planned=memory_pb2.ErasureCounts(sessions=4),
    )  # fmt: skip
    view = await people.erasure(StandIn(get_erasure=running), 4)
    assert view["erasure"]["percent"] == 25 and not view["erasure"]["finished"]
    denied = NexusClientError(grpc.StatusCode.PERMISSION_DENIED, "admin only")
    with pytest.raises(NexusClientError) as refused:
        await people.erasure(StandIn(get_erasure=denied), 4)
    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
