"""NexusStore as LangGraph uses it: inside a compiled graph with a checkpointer, the
framework's fake chat model answering, and through the BaseStore API (sync and async,
every op kind in a batch) against a whole server.

Its rules without a server, whose memories a namespace names, the filter rule against
LangGraph's InMemoryStore for each operator, the size an item may take:
tests/unit/test_frameworks_langgraph_rules.py; a batch checked whole before any call
(every bad namespace, key, value, TTL, filter operator and query window), an item read
back from its memory, a put's request id: tests/unit/test_adapters_langgraph_store_checks.py.
The tests here keep one case of each through the server (a filter of each kind, one
refused namespace, one refused size).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Annotated

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from nexus_grpc.client import NexusClient, NexusFailedPrecondition
from nexus_grpc.domain.validation import MAX_METADATA_BYTES
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.integrations.langgraph import MAX_ITEM_BYTES, NexusStore
from tests.e2e.frameworks.conftest import all_memories, indexed, project_named
from tests.support import start_harness

ALICE = ("memories", "alice")
BOB = ("memories", "bob")


class State(MessagesState):
    recalled: Annotated[list[str], lambda old, new: new]


def assistant_graph(model: GenericFakeChatModel, *, sync: bool):
    """A graph that stores what the user asks it to remember (under their user id) and
    answers with what it recalls about them in the system prompt."""

    def user_of(config: RunnableConfig) -> str:
        return config["configurable"]["user_id"]

    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        said = state["messages"][-1].content
        if said.startswith("Remember: "):
            store.put(("memories", user_of(config)), str(uuid.uuid4()), {"text": said[10:]})
        return {}

    def respond(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        found = store.search(("memories", user_of(config)), query=state["messages"][-1].content)
        recalled = [item.value["text"] for item in found]
        prompt = [SystemMessage("Known about the user: " + "; ".join(recalled))]
        reply = model.invoke(prompt + state["messages"])
        return {"messages": [reply], "recalled": recalled}

    async def aremember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        said = state["messages"][-1].content
        if said.startswith("Remember: "):
            await store.aput(("memories", user_of(config)), str(uuid.uuid4()), {"text": said[10:]})
        return {}

    async def arespond(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        found = await store.asearch(
            ("memories", user_of(config)), query=state["messages"][-1].content
        )
        recalled = [item.value["text"] for item in found]
        prompt = [SystemMessage("Known about the user: " + "; ".join(recalled))]
        reply = await model.ainvoke(prompt + state["messages"])
        return {"messages": [reply], "recalled": recalled}

    builder = StateGraph(State)
    builder.add_node("remember", remember if sync else aremember)
    builder.add_node("respond", respond if sync else arespond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder


def fake_model(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def turn(text: str, thread: str, user: str) -> tuple[dict, dict]:
    return (
        {"messages": [HumanMessage(text)]},
        {"configurable": {"thread_id": thread, "user_id": user}},
    )


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_graph_remembers_a_preference_in_one_thread_and_recalls_it_in_another(
    harness, client, sync
):
    store = NexusStore(client=client, project="assistant", index_fields=["text"])
    model = fake_model("Noted.", "You like ramen.", "I know nothing about you.")
    graph = assistant_graph(model, sync=sync).compile(checkpointer=InMemorySaver(), store=store)

    async def run(text: str, thread: str, user: str) -> dict:
        state, config = turn(text, thread, user)
        if sync:  # the graph's sync API, from a thread, as a sync program runs it
            return await asyncio.to_thread(graph.invoke, state, config)
        return await graph.ainvoke(state, config)

    await run("Remember: my favourite food is ramen", "thread-1", "alice")
    await indexed(harness)
    later = await run("What is my favourite food?", "thread-2", "alice")
    assert later["recalled"] == ["my favourite food is ramen"]
    assert later["messages"][-1].content == "You like ramen."
    # Thread 2's checkpoint holds only its own turn: the recall came from the store.
    assert [m.content for m in later["messages"]] == [
        "What is my favourite food?",
        "You like ramen.",
    ]
    # Another user asking the same gets nothing of Alice's.
    other = await run("What is my favourite food?", "thread-3", "bob")
    assert other["recalled"] == []

    # The preference is a USER memory of alice in the project, found like any other.
    project = await project_named(client, "assistant")
    [memory] = await all_memories(client, project.id, "alice")
    assert memory.kind == memory_pb2.MEMORY_KIND_USER and memory.user_id == "alice"
    assert memory.content == "my favourite food is ramen"
    assert await all_memories(client, project.id, "bob") == []
    store.close()


VALUES = [
    {"text": "plain"},
    {"int": 1, "float": 1.0, "big": 2**62, "neg": -0.5, "tiny": 1e-300, "bool": False},
    {"nested": {"list": [1, "two", None, {"three": [3.25]}]}, "empty": {}, "none": None},
    {"unicode": "żółw 🐢 \u202e", "quote": 'say "hi"\n\tnow', "order": {"b": 1, "a": 2}},
]


async def test_values_round_trip_exactly_and_update_in_place(client):
    async with NexusStore(client=client, project="p") as store:
        for n, value in enumerate(VALUES):
            await store.aput(ALICE, f"k{n}", value)
        for n, value in enumerate(VALUES):
            item = await store.aget(ALICE, f"k{n}")
            assert item.value == value
            # Types and key order survive too: 1 stays an int and 1.0 a float.
            assert json.dumps(item.value) == json.dumps(value)
            assert item.namespace == ALICE and item.key == f"k{n}"
        # A fresh store (another process) reads the same.
        fresh = NexusStore(client=client, project="p")
        assert (await fresh.aget(ALICE, "k1")).value == VALUES[1]

        first = await store.aget(ALICE, "k0")
        await store.aput(ALICE, "k0", {"text": "changed"})
        again = await store.aget(ALICE, "k0")
        assert again.value == {"text": "changed"}
        assert again.created_at == first.created_at and again.updated_at > first.updated_at
        # The same key from the fresh store updates the same memory, never a second one.
        await fresh.aput(ALICE, "k0", {"text": "from elsewhere"})
        assert (await store.aget(ALICE, "k0")).value == {"text": "from elsewhere"}
        project = await project_named(client, "p")
        assert len(await all_memories(client, project.id, "alice")) == len(VALUES)

        await store.adelete(ALICE, "k0")
        assert await store.aget(ALICE, "k0") is None
        assert await fresh.aget(ALICE, "k0") is None
        await store.adelete(ALICE, "k0")  # deleting what is gone is a no-op
        assert await store.aget(ALICE, "never") is None
        # A deleted key can be put again.
        await fresh.aput(ALICE, "k0", {"text": "back"})
        assert (await store.aget(ALICE, "k0")).value == {"text": "back"}


async def test_two_writers_putting_a_new_key_at_once_make_one_memory(client):
    stores = [NexusStore(client=client, project="p") for _ in range(4)]
    await asyncio.gather(*(s.aput(ALICE, "same", {"v": 1}) for s in stores))
    project = await project_named(client, "p")
    assert len(await all_memories(client, project.id, "alice")) == 1


async def test_users_and_the_project_are_apart(client):
    async with NexusStore(client=client, project="p") as store:
        await store.aput(ALICE, "food", {"text": "ramen"})
        await store.aput(BOB, "food", {"text": "pizza"})
        await store.aput(("docs",), "guide", {"text": "the project's style guide"})
        assert (await store.aget(BOB, "food")).value == {"text": "pizza"}
        assert [i.value for i in await store.asearch(ALICE)] == [{"text": "ramen"}]
        assert await store.alist_namespaces(prefix=("memories", "bob")) == [BOB]

        project = await project_named(client, "p")
        kinds = {(m.kind, m.user_id) for m in await all_memories(client, project.id, "alice")}
        assert kinds == {
            (memory_pb2.MEMORY_KIND_USER, "alice"),
            (memory_pb2.MEMORY_KIND_PROJECT, ""),
        }
        # user_position=None: every item is the project's, whatever its labels.
        shared = NexusStore(client=client, project="p", user_position=None)
        await shared.aput(("memories", "team"), "rule", {"text": "review every change"})
        assert [i.key for i in await shared.asearch(("memories",))] == ["rule"]


async def test_filters_apply_to_values_as_langgraph_stores_apply_them(client):
    """The same puts and searches on LangGraph's own InMemoryStore and on NexusStore
    give the same items (the prefix names the user, so both see the same ones)."""
    # Three-label namespaces: the user's label is named, as "auto" takes two labels only.
    ours = NexusStore(client=client, project="p", user_position=1)
    theirs = InMemoryStore()
    items = {
        "a": {"colour": "red", "size": 3, "tags": ["x", "y"], "meta": {"v": 1, "w": 2}},
        "b": {"colour": "blue", "size": 5, "tags": ["x"], "meta": {"v": 2}},
        "c": {"colour": "red", "size": 8.5, "meta": {"v": 1}},
        "d": {"colour": "green", "size": 0},
    }
    for store in (ours, theirs):
        for key, value in items.items():
            await store.aput(ALICE, key, value)
        await store.aput(("memories", "alice", "deeper"), "e", {"colour": "red", "size": 1})
    # One filter of each kind; every operator's rule: the unit tier.
    filters = [
        None,
        {"size": {"$gte": 3, "$lt": 8.5}},
        {"meta": {"v": 1}},
        {"colour": "red", "size": {"$gt": 2}},
    ]
    for where in filters:
        got = {(i.namespace, i.key) for i in await ours.asearch(ALICE, filter=where, limit=50)}
        want = {(i.namespace, i.key) for i in await theirs.asearch(ALICE, filter=where, limit=50)}
        assert got == want, where
    for prefix in (ALICE, ("memories", "alice", "deeper")):
        for max_depth in (None, 2):
            assert await ours.alist_namespaces(
                prefix=prefix, max_depth=max_depth
            ) == await theirs.alist_namespaces(prefix=prefix, max_depth=max_depth)
    deeper = ("memories", "alice", "deeper")
    mine = {"prefix": ("memories", "alice"), "suffix": ("deeper",)}
    assert await ours.alist_namespaces(**mine) == [deeper] == await theirs.alist_namespaces(**mine)
    # A wildcard where the user goes names no user: every user's namespaces, as there.
    anyone = {"prefix": ("memories", "*"), "suffix": ("deeper",)}
    assert (
        await ours.alist_namespaces(**anyone) == [deeper] == await theirs.alist_namespaces(**anyone)
    )
    # Without a query: newest update first, paged by offset and limit.
    keys = [i.key for i in await ours.asearch(ALICE, limit=10)]
    assert keys == ["e", "d", "c", "b", "a"]
    assert [i.key for i in await ours.asearch(ALICE, limit=2, offset=1)] == ["d", "c"]


async def test_a_query_runs_nexus_search_and_the_filter_still_holds(harness, client):
    store = NexusStore(client=client, project="p", index_fields=["text"])
    await store.aput(ALICE, "1", {"text": "Alice's cat is called Mochi", "kind": "pet"})
    await store.aput(ALICE, "2", {"text": "Alice walks her dog every morning", "kind": "pet"})
    await store.aput(ALICE, "3", {"text": "Alice works on the billing service", "kind": "work"})
    await store.aput(BOB, "1", {"text": "Bob's cat is called Felix", "kind": "pet"})
    await indexed(harness)
    found = await store.asearch(ALICE, query="what is the cat called?")
    assert found[0].key == "1" and found[0].score > 0
    assert all(i.namespace == ALICE for i in found)
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    pets = await store.asearch(ALICE, query="cat dog", filter={"kind": "pet"})
    assert {i.key for i in pets} == {"1", "2"}
    assert len(await store.asearch(ALICE, query="cat dog", filter={"kind": "pet"}, limit=1)) == 1
    # The content is the indexed field, so the memory reads as prose elsewhere too.
    project = await project_named(client, "p")
    contents = {m.content for m in await all_memories(client, project.id, "alice")}
    assert "Alice's cat is called Mochi" in contents


async def test_a_batch_runs_every_op_kind_in_order(client):
    store = NexusStore(client=client, project="p")
    ops = [
        PutOp(ALICE, "x", {"n": 1}),
        GetOp(ALICE, "x"),
        PutOp(ALICE, "x", {"n": 2}),
        GetOp(ALICE, "x"),
        SearchOp(ALICE, filter={"n": 2}),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ALICE),)),
        PutOp(ALICE, "x", None),
        GetOp(ALICE, "x"),
    ]
    for results in (await store.abatch(ops), await asyncio.to_thread(store.batch, ops)):
        assert results[0] is None and results[2] is None and results[6] is None
        assert results[1].value == {"n": 1} and results[3].value == {"n": 2}
        assert [i.key for i in results[4]] == ["x"]
        assert results[5] == [ALICE]
        assert results[7] is None
    store.close()


async def test_the_sync_api_works_from_a_thread(client):
    store = NexusStore(client=client, project="p")

    def program() -> list:
        store.put(ALICE, "k", {"text": "sync"})
        got = store.get(ALICE, "k")
        listed = store.search(ALICE)
        store.delete(ALICE, "k")
        return [got.value, [i.key for i in listed], store.get(ALICE, "k")]

    assert await asyncio.to_thread(program) == [{"text": "sync"}, ["k"], None]
    store.close()


async def test_a_store_made_from_a_target_opens_and_closes_its_own_channels(harness):
    store = NexusStore(target=harness.target, project="p", client_options={"retry": None})
    await store.aput(ALICE, "k", {"v": 1})
    assert await asyncio.to_thread(store.get, ALICE, "k") is not None
    await store.aclose()
    with pytest.raises(ValueError, match="either client= .* or target="):
        NexusStore(project="p")


async def test_refused_calls_say_why_and_write_nothing(client):
    store = NexusStore(client=client, project="p")
    await store.aput(ALICE, "ok", {"v": 1})
    project = await project_named(client, "p")
    before = await all_memories(client, project.id, "alice")

    # One refused op refuses the batch: the fine put beside it is not written either.
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([PutOp(ALICE, "fine", {"v": 1}), PutOp(("a.b", "alice"), "k", {"v": 1})])
    with pytest.raises(ValueError, match="unknown operator"):
        await store.asearch(ALICE, filter={"v": {"$regex": "x"}})

    assert await all_memories(client, project.id, "alice") == before


async def test_the_memory_cap_refusal_reaches_the_graph_as_the_servers(tmp_path):
    h = await start_harness(tmp_path / "data")
    h.app.memories.cap = 2
    try:
        async with NexusClient(h.target, retry=None) as c:
            store = NexusStore(client=c, project="p")
            await store.aput(ALICE, "1", {"v": 1})
            await store.aput(ALICE, "2", {"v": 2})
            with pytest.raises(RuntimeError, match="already holds 2 USER memories") as refused:
                await store.aput(ALICE, "3", {"v": 3})
            assert isinstance(refused.value, NexusFailedPrecondition)
            # Updating a key the owner holds is no new memory: still allowed.
            await store.aput(ALICE, "2", {"v": 22})
            assert (await store.aget(ALICE, "2")).value == {"v": 22}
    finally:
        await h.close()


# --- namespace layouts (issue 47.1) ------------------------------------------------------


async def owners(client: NexusClient, project: str) -> list[tuple[str, int]]:
    """The users holding memories in the project, as GetProjectStats names them."""
    stats = await client.get_project_stats(project_id=(await project_named(client, project)).id)
    return sorted((u.user_id, u.memories) for u in stats.users)


async def test_both_common_layouts_land_on_the_user_they_name(client):
    """("memories", user_id) and (user_id, "memories"), LangGraph's two layouts, each
    make USER memories of that user without any setting."""
    store = NexusStore(client=client, project="p")
    await store.aput(("alice", "memories"), "food", {"text": "ramen"})
    await store.aput(("bob", "memories"), "food", {"text": "pizza"})
    await store.aput(("memories", "carol"), "food", {"text": "sushi"})
    assert await owners(client, "p") == [("alice", 1), ("bob", 1), ("carol", 1)]
    project = await project_named(client, "p")
    [alices] = await all_memories(client, project.id, "alice")
    assert (alices.kind, alices.user_id, alices.content) == (
        memory_pb2.MEMORY_KIND_USER,
        "alice",
        '{"text": "ramen"}',
    )
    # Read back through either layout's own namespace, and never another user's.
    assert (await store.aget(("alice", "memories"), "food")).value == {"text": "ramen"}
    assert (await store.aget(("memories", "carol"), "food")).value == {"text": "sushi"}
    assert [i.value for i in await store.asearch(("bob", "memories"))] == [{"text": "pizza"}]
    assert await store.aget(("memories", "alice"), "food") is None  # another namespace


async def test_a_namespace_whose_user_cannot_be_told_is_refused_with_the_setting_to_use(client):
    store = NexusStore(client=client, project="p")
    namespace = ("prefs", "alice")  # each namespace "auto" refuses: the unit tier
    for write in (True, False):
        with pytest.raises(InvalidNamespaceError, match="Set user_position") as refused:
            if write:
                await store.abatch([PutOp(("docs",), "ok", {"v": 1}), PutOp(namespace, "k", {})])
            else:
                await store.aget(namespace, "k")
        assert '(user_id, "memories")' in str(refused.value), str(refused.value)
    assert (await client.list_projects()).projects == []  # refused before any call
    assert await store.aget(("docs",), "ok") is None  # the refused batch wrote nothing
    # The setting the message names takes the layout as meant.
    first = NexusStore(client=client, project="p", user_position=0)
    await first.aput(("alice", "prefs", "ui"), "theme", {"mode": "dark"})
    assert await owners(client, "p") == [("alice", 1)]
    with pytest.raises(ValueError, match="user_position must be"):
        NexusStore(client=client, project="p", user_position="first")


# --- reads that name no user (issue 47.2) ------------------------------------------------

LAYOUT = [
    (("memories", "alice"), "food", {"text": "Alice loves ramen", "n": 1}),
    (("memories", "bob"), "food", {"text": "Bob loves pizza", "n": 2}),
    (("carol", "memories"), "drink", {"text": "Carol drinks tea", "n": 3}),
    (("docs",), "guide", {"text": "the project style guide", "n": 4}),
]


async def fill(store) -> None:
    for namespace, key, value in LAYOUT:
        await store.aput(namespace, key, value)


def seen(items) -> list[tuple]:
    return sorted((i.namespace, i.key) for i in items)


async def test_reads_that_name_no_user_answer_as_langgraphs_own_store(harness, client):
    """Without auth, a store may act for every user: listings and searches that name
    none see every user's items, as InMemoryStore's do."""
    ours = NexusStore(client=client, project="p", index_fields=["text"])
    theirs = InMemoryStore()
    await fill(ours)
    await fill(theirs)
    for prefix in [("memories",), (), ("carol",), ("docs",), ("memories", "bob")]:
        assert seen(await ours.asearch(prefix, limit=50)) == seen(
            await theirs.asearch(prefix, limit=50)
        ), prefix
    filtered = {"n": {"$gte": 2}}
    assert seen(await ours.asearch((), filter=filtered)) == seen(
        await theirs.asearch((), filter=filtered)
    )
    listings = [
        {},
        {"prefix": ("memories",)},
        {"prefix": ("memories", "*")},
        {"suffix": ("memories",)},
        {"suffix": ("alice",)},
        {"prefix": ("*", "memories")},
        {"max_depth": 1},
        {"prefix": ("memories",), "limit": 1, "offset": 1},
    ]
    for listing in listings:
        got, want = await ours.alist_namespaces(**listing), await theirs.alist_namespaces(**listing)
        assert got == want, listing
    assert await ours.alist_namespaces() == [
        ("carol", "memories"),
        ("docs",),
        ("memories", "alice"),
        ("memories", "bob"),
    ]
    # A query over every owner ranks them together, by cosine similarity.
    await indexed(harness)
    found = await ours.asearch(("memories",), query="who loves pizza?")
    assert found[0].key == "food" and found[0].namespace == ("memories", "bob")
    assert {i.namespace for i in found} <= {("memories", "alice"), ("memories", "bob")}
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    everywhere = await ours.asearch((), query="Carol drinks tea", limit=1)
    assert [(i.namespace, i.key) for i in everywhere] == [(("carol", "memories"), "drink")]


ADMIN = "admin-key-00000000000000001"
EVERYONE = "everyone-key-0000000000001"
ALICE_ONLY = "alice-only-key-00000000001"


async def test_what_each_key_sees_when_it_names_no_user(tmp_path):
    """The table in docs/integrations.md: a user key its own users' items, a "*" key
    and an admin key every user's (auth off: test above)."""
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ADMIN, "name": "ops", "admin": True, "tenant": "t"},
                    {"key": EVERYONE, "name": "app", "users": "*", "tenant": "t"},
                    {"key": ALICE_ONLY, "name": "alices", "users": ["alice"], "tenant": "t"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    try:
        async with contextlib.AsyncExitStack() as stack:
            stores = {}
            for name, key in [("admin", ADMIN), ("*", EVERYONE), ("alice", ALICE_ONLY)]:
                c = await stack.enter_async_context(NexusClient(h.target, api_key=key, retry=None))
                stores[name] = NexusStore(client=c, project="p")
            await fill(stores["*"])
            every = [("carol", "memories"), ("docs",), ("memories", "alice"), ("memories", "bob")]
            assert await stores["*"].alist_namespaces() == every
            assert await stores["admin"].alist_namespaces() == every
            assert await stores["alice"].alist_namespaces() == [("docs",), ("memories", "alice")]
            assert seen(await stores["alice"].asearch(("memories",))) == [
                (("memories", "alice"), "food")
            ]
            assert seen(await stores["admin"].asearch(("memories",))) == [
                (("memories", "alice"), "food"),
                (("memories", "bob"), "food"),
            ]
            # Naming a user the key may not act for is the server's refusal, as ever.
            with pytest.raises(PermissionError):
                await stores["alice"].asearch(("memories", "bob"))
    finally:
        await h.close()


async def test_a_read_naming_no_user_past_the_users_it_can_list_is_refused(client):
    store = NexusStore(client=client, project="p")
    await store.aput(("docs",), "guide", {"v": 0})
    project = await project_named(client, "p")
    for n in range(101):
        await client.create_memory(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER,
                title="t",
                content="c",
                project_id=project.id,
                user_id=f"user-{n:03}",
            )
        )
    with pytest.raises(ValueError, match="has 101 users with memories.*name the user"):
        await store.alist_namespaces()
    with pytest.raises(ValueError, match="has 101 users"):
        await store.asearch(("memories",), query="c")
    # A read that names its user is as before.
    await store.aput(("memories", "user-007"), "k", {"v": 7})
    assert [i.value for i in await store.asearch(("memories", "user-007"))] == [{"v": 7}]


# --- index=False and the size limit (issue 47.3) ------------------------------------------


async def test_an_item_put_with_index_false_is_never_found_by_a_query(harness, client):
    store = NexusStore(client=client, project="p", index_fields=["text"])
    await store.aput(ALICE, "secret", {"text": "the vault code is 4711"}, index=False)
    await store.aput(ALICE, "open", {"text": "the vault is in the cellar"})
    await store.aput(("docs",), "hidden", {"text": "vault audit notes"}, index=False)
    await indexed(harness)
    for prefix in (ALICE, ("memories",), ()):
        found = await store.asearch(prefix, query="vault code 4711")
        assert [i.key for i in found] == ["open"], prefix
    # Everything else reads it as any item.
    assert (await store.aget(ALICE, "secret")).value == {"text": "the vault code is 4711"}
    assert {i.key for i in await store.asearch(ALICE)} == {"secret", "open"}
    # Nothing of the value is in the memory's searchable text: its key alone.
    project = await project_named(client, "p")
    by_title = {m.title: m.content for m in await all_memories(client, project.id, "alice")}
    assert by_title == {
        "secret": "secret",
        "the vault is in the cellar": "the vault is in the cellar",
        "hidden": "hidden",  # the project's, which alice sees too
    }
    # Put again with indexing, it is found.
    await store.aput(ALICE, "secret", {"text": "the vault code is 4711"})
    await indexed(harness)
    assert "secret" in [i.key for i in await store.asearch(ALICE, query="vault code 4711")]


async def test_a_value_over_the_size_limit_is_refused_in_the_stores_terms(client):
    assert MAX_ITEM_BYTES == MAX_METADATA_BYTES  # the server's limit, as the store says it
    store = NexusStore(client=client, project="p")
    # An item whose namespace, key and value take exactly the limit fits; a byte more not.
    overhead = len(json.dumps({"langgraph": {"namespace": list(ALICE), "key": "big",
                                             "value": json.dumps({"text": ""})}}))  # fmt: skip
    fits = {"text": "x" * (MAX_ITEM_BYTES - overhead)}
    await store.aput(ALICE, "big", fits)
    assert (await store.aget(ALICE, "big")).value == fits
    too_big = {"text": "x" * (MAX_ITEM_BYTES - overhead + 1)}
    with pytest.raises(ValueError) as refused:
        await store.abatch([PutOp(ALICE, "first", {"v": 1}), PutOp(ALICE, "big", too_big)])
    message = str(refused.value)
    assert message.startswith("the value put at ('memories', 'alice') key 'big' is too large")
    assert (
        f"at most {MAX_ITEM_BYTES:,} bytes as JSON, and this item takes {MAX_ITEM_BYTES + 1:,}"
        in message
    )
    assert "memory.metadata" not in message
    assert await store.aget(ALICE, "first") is None  # refused before any call
