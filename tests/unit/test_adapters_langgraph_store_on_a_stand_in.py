"""NexusStore's mapping of LangGraph's operations onto memory calls
(integrations/langgraph.py), on a stand-in client: a ``NexusClient`` whose memory RPCs
answer from a dict of memories, with the two server behaviours the store leans on
(a create whose ``request_id`` was used for other words is ALREADY_EXISTS; the same
words again answer the memory already there) and nothing else of the server's.

Here: what memory an item becomes (kind, owner, title and content from the index
paths or the key), a put that creates once then updates in place, a key another
store wrote, a delete, a stale id hint, a batch's reads seeing the writes before
them, a listing's order, filter and window, a query across owners by meaning, the
owners a read that names no user reaches, and namespaces listed to a depth.
(The store through a real server, LangGraph's graphs and the real ranking:
tests/e2e/frameworks/test_langgraph.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, PutOp, SearchOp

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.client.views import view
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.langgraph import NexusStore

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


def missing(what: str) -> NexusClientError:
    return NexusClientError(grpc.StatusCode.NOT_FOUND, f"{what} not found")


class StandIn(NexusClient):
    """Memories in a dict; every call recorded by name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("stand-in:0")
        self.memories: dict[int, memory_pb2.Memory] = {}
        self.request_ids: dict[str, int] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.users: list[str] = []
        self.user_count: int | None = None
        self.clock = 1_765_065_600
        self.next_id = 1

    def called(self, name: str) -> list[dict[str, Any]]:
        return [fields for called, fields in self.calls if called == name]

    def _tick(self) -> int:
        self.clock += 60
        return self.clock

    async def list_projects(self, **fields: Any) -> Any:  # type: ignore[override]
        return view(memory_pb2.ListProjectsResponse(
            projects=[memory_pb2.Project(id=1, name="p", tenant="t1")]
        ))  # fmt: skip

    async def get_service_status(self, **fields: Any) -> Any:  # type: ignore[override]
        return view(memory_pb2.ServiceStatus(tenant="t1"))

    async def create_memory(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("create_memory", fields))
        memory = fields["memory"]
        held = self.request_ids.get(fields["request_id"])
        if held is not None:
            existing = self.memories[held]
            if existing.metadata != memory.metadata:
                raise NexusClientError(grpc.StatusCode.ALREADY_EXISTS, "request id reused")
            return view(existing)
        stored = memory_pb2.Memory()
        stored.CopyFrom(memory)
        stored.id, self.next_id = self.next_id, self.next_id + 1
        stored.create_time.FromSeconds(self._tick())
        self.memories[stored.id] = stored
        self.request_ids[fields["request_id"]] = stored.id
        return view(stored)

    async def update_memory(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("update_memory", fields))
        change = fields["memory"]
        stored = self.memories.get(change.id)
        if stored is None:
            raise missing(f"memory {change.id}")
        stored.title, stored.content = change.title, change.content
        stored.metadata.CopyFrom(change.metadata)
        stored.update_time.FromSeconds(self._tick())
        return view(stored)

    async def delete_memory(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("delete_memory", fields))
        if self.memories.pop(fields["id"], None) is None:
            raise missing(f"memory {fields['id']}")
        # A deleted memory's request id is free again: the key can be put anew.
        self.request_ids = {r: i for r, i in self.request_ids.items() if i != fields["id"]}
        return view(memory_pb2.DeleteMemoryResponse())

    async def get_memory(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("get_memory", fields))
        stored = self.memories.get(fields["id"])
        if stored is None:
            raise missing(f"memory {fields['id']}")
        return view(stored)

    def _seen_by(self, scope: memory_pb2.MemoryScope) -> list[memory_pb2.Memory]:
        return [
            m for m in self.memories.values()
            if m.kind == memory_pb2.MEMORY_KIND_PROJECT
            or (scope.user_id and m.user_id == scope.user_id)
        ]  # fmt: skip

    async def list_memories(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("list_memories", fields))
        kind = fields["kind"]
        seen = [m for m in self._seen_by(fields["scope"]) if m.kind == kind]
        return view(memory_pb2.ListMemoriesResponse(memories=seen))

    def search_memories(self, **fields: Any) -> Any:  # type: ignore[override]
        """Each memory the scope sees, scored by the share of the query's words in it."""
        self.calls.append(("search_memories", fields))
        words = fields["query"].lower().split()
        hits = []
        for memory in self._seen_by(fields["scope"]):
            score = sum(w in memory.content.lower() for w in words) / len(words)
            if score:
                hits.append(memory_pb2.MemoryHit(memory=memory, score=score))
        hits.sort(key=lambda h: -h.score)

        async def each() -> AsyncIterator[Any]:
            for hit in hits:
                yield view(hit)

        return each()

    async def get_project_stats(self, **fields: Any) -> Any:  # type: ignore[override]
        self.calls.append(("get_project_stats", fields))
        users = [memory_pb2.UserMemoryCount(user_id=u) for u in self.users]
        count = len(users) if self.user_count is None else self.user_count
        return view(memory_pb2.ProjectStats(users=users, user_count=count))


@pytest.fixture
def client() -> StandIn:
    return StandIn()


def store_on(client: StandIn, **settings: Any) -> NexusStore:
    return NexusStore(client=client, project="p", **settings)


# --- an item as a memory ---------------------------------------------------------------


async def test_an_item_is_a_longterm_memory_of_the_user_its_namespace_names(client):
    store = store_on(client, agent_id="bot", index_fields=["text"])
    await store.aput(ALICE, "food", {"text": "ramen on fridays", "n": 1})
    await store.aput(("docs",), "guide", {"text": "tabs"}, index=False)
    await store.aput(("docs",), "style", {"body": {"text": "short lines"}}, index=["body.text"])
    food, guide, style = (c["memory"] for c in client.called("create_memory"))
    assert (food.kind, food.user_id, food.agent_id, food.tier, food.project_id) == (
        memory_pb2.MEMORY_KIND_USER, "alice", "bot", memory_pb2.TIER_LONGTERM, 1,
    )  # fmt: skip
    assert (food.title, food.content) == ("ramen on fridays", "ramen on fridays")
    # Not indexed: the memory reads as its key, never its value.
    assert (guide.kind, guide.user_id, guide.title, guide.content) == (
        memory_pb2.MEMORY_KIND_PROJECT, "", "guide", "guide",
    )  # fmt: skip
    assert style.content == "short lines"  # the put's own paths win over the store's
    # No index paths anywhere: the value as sorted JSON.
    await store_on(client).aput(BOB, "k", {"b": 2, "a": 1})
    assert client.called("create_memory")[-1]["memory"].content == '{"a": 1, "b": 2}'


async def test_a_put_creates_once_then_updates_the_same_memory(client):
    store = store_on(client)
    await store.aput(ALICE, "k", {"v": 1})
    first = await store.aget(ALICE, "k")
    await store.aput(ALICE, "k", {"v": 2})
    assert len(client.called("create_memory")) == 1
    assert client.called("update_memory")[0]["update_mask"].paths == ["title", "content",
                                                                       "metadata"]  # fmt: skip
    again = await store.aget(ALICE, "k")
    assert again.value == {"v": 2} and len(client.memories) == 1
    assert again.created_at == first.created_at and again.updated_at > first.updated_at


async def test_a_key_another_store_wrote_is_found_and_updated_not_duplicated(client):
    await store_on(client).aput(ALICE, "k", {"v": 1})
    fresh = store_on(client)  # another process: no id hint
    await fresh.aput(ALICE, "k", {"v": 2})
    assert len(client.memories) == 1
    assert (await store_on(client).aget(ALICE, "k")).value == {"v": 2}
    # The same value again is answered by the create, with nothing updated.
    updates = len(client.called("update_memory"))
    await store_on(client).aput(ALICE, "k", {"v": 2})
    assert len(client.called("update_memory")) == updates


async def test_a_delete_removes_the_memory_and_deleting_what_is_gone_is_a_no_op(client):
    store = store_on(client)
    await store.aput(ALICE, "k", {"v": 1})
    other = store_on(client)
    assert (await other.aget(ALICE, "k")).value == {"v": 1}  # other now holds an id hint
    await store.adelete(ALICE, "k")
    assert client.memories == {}
    assert await other.aget(ALICE, "k") is None  # the stale hint is checked, then dropped
    await other.adelete(ALICE, "k")
    assert len(client.called("delete_memory")) == 1
    await other.aput(ALICE, "k", {"v": "back"})
    assert (await store.aget(ALICE, "k")).value == {"v": "back"}


async def test_an_id_hint_pointing_at_another_item_is_not_trusted(client):
    store = store_on(client)
    await store.aput(ALICE, "a", {"v": "a"})
    await store.aput(ALICE, "b", {"v": "b"})
    store._ids[(ALICE, "a")] = store._ids[(ALICE, "b")]  # a hint gone wrong
    assert (await store.aget(ALICE, "a")).value == {"v": "a"}


async def test_a_batch_reads_see_every_write_before_them(client):
    store = store_on(client)
    results = await store.abatch([
        GetOp(ALICE, "k"),
        PutOp(ALICE, "k", {"v": 1}),
        GetOp(ALICE, "k"),
        SearchOp(ALICE),
        PutOp(ALICE, "k", None),
        GetOp(ALICE, "k"),
        ListNamespacesOp(),
    ])  # fmt: skip
    assert results[0] is None and results[1] is None
    assert results[2].value == {"v": 1}
    assert [i.key for i in results[3]] == ["k"]
    assert results[5] is None and results[6] == []


# --- reading many ----------------------------------------------------------------------


async def test_a_listing_is_newest_first_filtered_and_windowed(client):
    store = store_on(client, user_position=1)
    for n in range(5):
        await store.aput(ALICE, f"k{n}", {"n": n, "colour": "red" if n % 2 else "blue"})
    await store.aput(("memories", "alice", "deeper"), "d", {"n": 9, "colour": "red"})
    await store.aput(BOB, "b", {"n": 1, "colour": "red"})
    listed = await store.asearch(ALICE, filter={"colour": "red"})
    assert [i.key for i in listed] == ["d", "k3", "k1"]
    assert all(i.score is None for i in listed)
    assert [i.key for i in await store.asearch(ALICE, limit=2, offset=1)] == ["k4", "k3"]
    assert [i.key for i in await store.asearch(("memories", "alice", "deeper"))] == ["d"]


async def test_an_item_stored_under_another_owner_than_its_namespace_names_is_not_read(client):
    store = store_on(client)
    await store.aput(ALICE, "k", {"v": 1})
    # A memory holding Alice's namespace, but Bob's: not where a get of Alice's looks.
    [memory] = client.memories.values()
    memory.user_id = "bob"
    assert await store_on(client).aget(ALICE, "k") is None
    assert await store_on(client).asearch(("memories", "bob")) == []


async def test_a_query_for_one_user_ranks_by_nexus_search_and_skips_unindexed_items(client):
    store = store_on(client)
    await store.aput(ALICE, "a", {"text": "ramen noodles"})
    await store.aput(ALICE, "b", {"text": "ramen"}, index=False)
    await store.aput(ALICE, "c", {"text": "noodles and ramen soup"})
    await store.aput(("docs",), "d", {"text": "ramen noodles"})  # the project's: another kind
    found = await store.asearch(ALICE, query="ramen noodles")
    assert [(i.key, i.score) for i in found] == [("a", 1.0), ("c", 1.0)]
    asked = client.called("search_memories")[0]
    assert (asked["mode"], asked["limit"]) == (memory_pb2.SEARCH_MODE_HYBRID, 100)
    assert asked["scope"].user_id == "alice" and asked["scope"].include_archived


async def test_a_read_naming_no_user_reaches_the_project_and_each_user_by_meaning(client):
    store = store_on(client)
    await store.aput(ALICE, "a", {"text": "tea"})
    await store.aput(BOB, "b", {"text": "tea and cake"})
    await store.aput(("memories", "p"), "p", {"text": "cake"})  # "p" is a user here too
    client.users = ["alice", "bob"]
    found = await store.asearch(("memories",), query="tea cake")
    assert [(i.key, i.score) for i in found] == [("b", 1.0), ("a", 0.5)]
    assert {c["scope"].user_id for c in client.called("search_memories")} == {"", "alice", "bob"}
    assert {c["mode"] for c in client.called("search_memories")} == {
        memory_pb2.SEARCH_MODE_SEMANTIC
    }
    assert client.called("get_project_stats")[0]["read_mask"].paths == ["users", "user_count"]
    assert [i.key for i in await store.asearch(("memories",))] == ["b", "a"]


async def test_more_users_than_the_stats_name_refuses_a_read_that_names_none(client):
    client.users, client.user_count = ["alice"], 101
    with pytest.raises(ValueError) as refused:
        await store_on(client).asearch(("memories",))
    assert str(refused.value) == (
        "project 'p' has 101 users with memories; a NexusStore search or listing that names"
        " no user reads at most the 1 GetProjectStats names: name the user in the namespace"
        " prefix"
    )
    # A store whose namespaces name no user reads the project's alone, with no stats.
    assert await store_on(client, user_position=None).asearch(("memories",)) == []
    assert len(client.called("get_project_stats")) == 1


async def test_namespaces_are_listed_once_to_a_depth_and_two_owners_match_nothing(client):
    store = store_on(client, user_position=1)
    await store.aput(ALICE, "a", {"v": 1})
    await store.aput(("memories", "alice", "deep"), "b", {"v": 1})
    await store.aput(BOB, "c", {"v": 1})
    client.users = ["alice", "bob"]
    assert await store.alist_namespaces() == [ALICE, ("memories", "alice", "deep"), BOB]
    assert await store.alist_namespaces(prefix=ALICE, max_depth=2) == [ALICE]
    assert await store.alist_namespaces(suffix=("deep",)) == [("memories", "alice", "deep")]
    assert await store.alist_namespaces(limit=1, offset=1) == [("memories", "alice", "deep")]
    lists = len(client.called("list_memories"))
    both = [ListNamespacesOp(match_conditions=(
        *_prefix(ALICE), *_prefix(BOB)))]  # fmt: skip
    assert await store.abatch(both) == [[]]
    assert len(client.called("list_memories")) == lists  # nothing to read


def _prefix(namespace: tuple[str, ...]) -> tuple[Any, ...]:
    from langgraph.store.base import MatchCondition

    return (MatchCondition("prefix", namespace),)
