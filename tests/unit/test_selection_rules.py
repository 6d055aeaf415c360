"""What SelectMemories decides (domain/selection.py) from a scripted model's
answers, on the fakes of tests/fakes.py: which memories pass 1 is offered and
which of its picks survive, pass 2's relevance, the used-in-thread penalty
and whose thread it is, the titles read in batches that fit the context,
the fallback to semantic ranking and its reason, a retry by request_id; and
what ListMemoryUsage (domain/memories.py) lists of the usage it records.

The model here is a script (``Model``): no HTTP. What a client sees over gRPC
(the selection's fields, ListMemoryUsage's status codes, the degraded path
through the real vector index, the model client's context reaching the
Ollama stand-in, the clients' request ids) is tests/e2e/service/test_selection.py's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nexus_grpc.core.models import MemoryCategory, MemoryKind, MemoryScope, SearchSource, Tier
from nexus_grpc.core.records import Memory
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.retrieval.hits import MemoryHit
from nexus_grpc.domain.selection import Selection, Selector
from nexus_grpc.errors import AlreadyExists, InvalidArgument, NotFound
from nexus_grpc.llm import tokens
from nexus_grpc.llm.llm_errors import LLMUnavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork

PASS1 = "You choose which stored memories"
PASS2 = "You rank stored memories"
P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
NECESSARY, SUPPORTING = MemoryCategory.NECESSARY, MemoryCategory.SUPPORTING
MODEL = "qwen2.5:3b"


class Model:
    """The selection model as a script: each chat answers the first rule whose
    text its messages contain (a rule with ``times`` is used up after that
    many answers); its context is ``context`` tokens, estimated as the client
    estimates them."""

    def __init__(self, context: int = 8192) -> None:
        self.context = context
        self.rules: list[list[Any]] = []
        self.prompts: list[str] = []
        self.sizes: list[int] = []  # each chat's input and answer room, in tokens

    def add(self, answer: dict[str, Any] | Exception, contains: str, times: int | None = 1):
        self.rules.append([contains, answer, times])

    def script(self, pass1: list[dict[str, Any]], pass2: list[dict[str, Any]], times: int = 1):
        self.add({"selected": pass1}, PASS1, times)
        self.add({"ranked": pass2}, PASS2, times)

    def asked(self, marker: str) -> list[str]:
        return [p for p in self.prompts if marker in p]

    async def input_budget(self, model: str, fixed: Sequence[Any], num_predict: int, **_: Any):
        return tokens.input_budget(self.context, num_predict, tokens.estimate_messages(fixed))

    async def chat_json(
        self, model: str, messages: Sequence[Any], schema: Any, *, num_predict: int, **_: Any
    ) -> dict[str, Any]:
        text = "\n".join(m["content"] for m in messages)
        self.prompts.append(text)
        self.sizes.append(tokens.estimate_messages(messages) + num_predict)
        for rule in self.rules:
            contains, answer, times = rule
            if contains in text:
                if times is not None:
                    rule[2] = times - 1
                    if rule[2] == 0:
                        self.rules.remove(rule)
                if isinstance(answer, Exception):
                    raise answer
                return answer
        raise AssertionError(f"no scripted answer for {text[:120]!r}")


class Semantic:
    """Semantic ranking's answer, given: what the vector index would have found
    (its real ranking is the e2e tier's)."""

    def __init__(self, uow: FakeUnitOfWork, scores: dict[int, float] | None = None) -> None:
        self.uow = uow
        self.scores = scores or {}
        self.asked: list[tuple[str, int]] = []

    async def semantic(self, text: str, scope: MemoryScope, n: int) -> list[MemoryHit]:
        self.asked.append((text, n))
        rows = self.uow.memories.get_visible(list(self.scores), scope)
        return [MemoryHit(rows[i], s, (SearchSource.SEMANTIC,)) for i, s in self.scores.items()][:n]


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
def semantic(uow: FakeUnitOfWork) -> Semantic:
    return Semantic(uow)


@pytest.fixture
def selector(uow: FakeUnitOfWork, model: Model, semantic: Semantic) -> Selector:
    return Selector(FakeDatabase(uow), semantic, model, MODEL)  # type: ignore[arg-type]


@pytest.fixture
def memories(uow: FakeUnitOfWork) -> Memories:
    # Neither the embedder nor the vector index is read by usage listing.
    return Memories(FakeDatabase(uow), JobSignals(), None, None)  # type: ignore[arg-type]


def world(uow: FakeUnitOfWork, name: str = "p") -> tuple[int, int]:
    project = uow.projects.insert({"name": name}, "default")
    return project.id, uow.sessions.insert(f"ext-{name}", "", project.id, {}, "default").id


async def create(memories: Memories, **values: Any) -> Memory:
    values.setdefault("content", f"details about {values['title']}")
    return await memories.create(values)


async def select(
    selector: Selector,
    scope: MemoryScope,
    prompt: str = "which database port?",
    thread: str = "t1",
    summary: str = "",
    request_id: str = "",
    said: dict[str, list[str]] | None = None,
) -> list[Selection]:
    said = said if said is not None else {}
    hear = {k: said.setdefault(k, []).append for k in ("method", "empty", "degraded")}
    return [
        x
        async for x in selector.select(
            prompt,
            scope,
            thread,
            summary,
            0,
            request_id,
            on_method=hear["method"],
            on_empty=hear["empty"],
            on_degraded=hear["degraded"],
        )
    ]


def pick(mid: int, relevance: float, category: str = "necessary") -> dict[str, Any]:
    return {"id": mid, "relevance": relevance, "category": category}


def rank(mid: int, relevance: float) -> dict[str, Any]:
    return {"id": mid, "relevance": relevance}


async def three(memories: Memories, pid: int) -> tuple[Memory, Memory, Memory]:
    a = await create(memories, kind=P, project_id=pid, title="postgres port")
    b = await create(memories, kind=P, project_id=pid, title="deploy steps")
    c = await create(memories, kind=P, project_id=pid, title="backup schedule")
    return a, b, c


async def test_pass_two_ranks_the_picks_and_an_invented_id_is_dropped(
    uow, model, selector, memories
):
    pid, sid = world(uow)
    a, b, _ = await three(memories, pid)
    model.script(
        [pick(a.id, 0.9), pick(b.id, 0.5, "supporting"), pick(99999, 1.0)],  # invented
        [rank(a.id, 0.95), rank(b.id, 0.7)],
    )
    said: dict[str, list[str]] = {}
    scope = MemoryScope(project_id=pid, session_id=sid)
    first = await select(selector, scope, summary="talking about databases", said=said)
    assert [x.memory.id for x in first] == [a.id, b.id]
    assert [x.relevance for x in first] == [0.95, 0.7]
    assert [x.category for x in first] == [NECESSARY, SUPPORTING]
    assert all(x.method == "llm" and not x.degraded_reason for x in first)
    assert said == {"method": ["llm"], "empty": [], "degraded": []}
    assert first[0].memory.content == "details about postgres port"  # full content
    assert first[0].memory.use_count == 1 and first[0].memory.last_used_at
    assert [x.previously_used for x in first] == [False, False]


async def test_pass_one_reads_every_title_and_pass_two_the_picks_content_and_the_summary(
    uow, model, selector, memories
):
    pid, sid = world(uow)
    a, b, _ = await three(memories, pid)
    model.script([pick(a.id, 0.9)], [rank(a.id, 0.95)])
    await select(selector, MemoryScope(project_id=pid, session_id=sid), summary="about dbs")
    [p1] = model.asked(PASS1)
    assert "postgres port" in p1 and "backup schedule" in p1 and "deploy steps" in p1
    [p2] = model.asked(PASS2)
    assert "details about postgres port" in p2 and "about dbs" in p2
    assert "details about deploy steps" not in p2  # only what pass 1 picked


async def test_a_selection_records_its_usage_by_thread_and_by_memory(
    uow, model, selector, memories
):
    pid, sid = world(uow)
    a, b, _ = await three(memories, pid)
    model.script(
        [pick(a.id, 0.9), pick(b.id, 0.5, "supporting")], [rank(a.id, 0.95), rank(b.id, 0.7)]
    )
    await select(selector, MemoryScope(project_id=pid, session_id=sid))
    usage = await memories.usage("t1", None, "", pid, 0, "")
    assert sorted(u.memory_id for u in usage.items) == sorted([a.id, b.id])
    assert {u.context for u in usage.items} == {"which database port?"}
    by_memory = await memories.usage(None, a.id, "", pid, 0, "")
    assert [u.relevance for u in by_memory.items] == [0.95]


async def test_a_memory_used_earlier_in_the_thread_is_marked_halved_and_follows_a_fresh_one(
    uow, model, selector, memories
):
    pid, sid = world(uow)
    a, b, c = await three(memories, pid)
    scope = MemoryScope(project_id=pid, session_id=sid)
    model.script(
        [pick(a.id, 0.9), pick(b.id, 0.5, "supporting")], [rank(a.id, 0.95), rank(b.id, 0.7)]
    )
    await select(selector, scope)
    # Second prompt in the same thread: a and b were used; c is fresh.
    model.script(
        [pick(a.id, 0.9), pick(c.id, 0.6, "supporting")], [rank(a.id, 0.9), rank(c.id, 0.6)]
    )
    second = await select(selector, scope)
    assert [x.memory.id for x in second] == [c.id, a.id]
    assert [x.previously_used for x in second] == [False, True]
    assert second[1].relevance == pytest.approx(0.45)
    assert second[1].memory.use_count == 2
    assert f"[{a.id}] postgres port  (already used in this thread)" in model.asked(PASS1)[-1]
    assert f"[{c.id}] backup schedule\n" in model.asked(PASS1)[-1] + "\n"
    # Another thread starts fresh.
    model.script([pick(a.id, 0.9)], [rank(a.id, 0.9)])
    [other] = await select(selector, scope, thread="t2")
    assert other.previously_used is False and other.relevance == 0.9


async def test_selections_without_a_thread_never_count_as_used(uow, model, selector, memories):
    pid, sid = world(uow)
    a = await create(memories, kind=P, project_id=pid, title="postgres port")
    scope = MemoryScope(project_id=pid, session_id=sid)
    for _ in range(2):
        model.script([pick(a.id, 0.8)], [rank(a.id, 0.8)])
        [picked] = await select(selector, scope, thread="")
        # Two unrelated thread-less calls: the second is not "already used".
        assert picked.previously_used is False and picked.relevance == 0.8
    assert picked.memory.use_count == 2  # the use is still counted on the memory


async def test_pass_one_selecting_nothing_returns_nothing_and_says_why(
    uow, model, selector, memories
):
    pid, _ = world(uow)
    await create(memories, kind=P, project_id=pid, title="unrelated")
    model.script([], [])
    said: dict[str, list[str]] = {}
    assert await select(selector, MemoryScope(project_id=pid), said=said) == []
    assert said["method"] == ["llm"] and said["degraded"] == []
    assert said["empty"] == [
        "MODEL_CHOSE_NONE: the selection model read the titles of 1 memory and chose none"
        " for this prompt"
    ]
    assert model.asked(PASS2) == []  # nothing to rank
    assert uow.memories.usage == []


async def test_a_failing_model_falls_back_to_semantic_ranking_and_says_why(
    uow, model, selector, memories, semantic
):
    pid, _ = world(uow)
    a = await create(memories, kind=P, project_id=pid, title="database port")
    semantic.scores = {a.id: 1.7}  # clamped to 1.0
    model.add(LLMUnavailable("the model server answered 500: runner crashed"), PASS1)
    said: dict[str, list[str]] = {}
    got = await select(selector, MemoryScope(project_id=pid), prompt="database port", said=said)
    assert [x.memory.id for x in got] == [a.id]
    assert got[0].method == "semantic" and "selection model failed" in got[0].degraded_reason
    assert "runner crashed" in got[0].degraded_reason
    assert (got[0].relevance, got[0].category) == (1.0, SUPPORTING)
    assert said["method"] == ["semantic"] and said["degraded"] == [got[0].degraded_reason]
    assert semantic.asked == [("database port", 20)]  # twice the default limit of picks
    assert got[0].memory.use_count == 1


async def test_without_a_model_selection_is_semantic_and_says_so(uow, semantic, memories):
    selector = Selector(FakeDatabase(uow), semantic, None, MODEL)  # type: ignore[arg-type]
    pid, _ = world(uow)
    a = await create(memories, kind=P, project_id=pid, title="database port")
    semantic.scores = {a.id: 0.4}
    said: dict[str, list[str]] = {}
    [got] = await select(selector, MemoryScope(project_id=pid), said=said)
    assert got.method == "semantic" and "no LLM" in got.degraded_reason
    assert said["degraded"] == [got.degraded_reason]


async def test_a_question_too_long_for_the_context_falls_back_and_says_why(
    uow, selector, memories, semantic, model
):
    model.context = 2048
    pid, sid = world(uow)
    a = await create(memories, kind=P, project_id=pid, title="postgres port")
    semantic.scores = {a.id: 0.5}
    scope = MemoryScope(project_id=pid, session_id=sid)
    got = await select(selector, scope, prompt="which port? " + "really " * 300)
    assert got and {x.method for x in got} == {"semantic"}
    assert "context" in got[0].degraded_reason
    assert model.asked(PASS1) == []  # the model is asked nothing it cannot read


async def test_selection_never_offers_or_returns_anothers_memories(uow, model, selector, memories):
    pid, s1 = world(uow)
    s2 = uow.sessions.insert("ext-2", "", pid, {}, "default").id
    alice = await create(memories, kind=U, user_id="alice", title="alice secret")
    alice_task = await create(
        memories, kind=P, project_id=pid, tier=int(Tier.TASK), session_id=s2,
        title="other session task",
    )  # fmt: skip
    archived = await create(
        memories, kind=P, project_id=pid, tier=int(Tier.ARCHIVE), title="archived"
    )
    mine = await create(memories, kind=U, user_id="bob", title="bob note")
    # The model "invents" the hidden ids: they must be dropped.
    picks = [pick(i, 1.0) for i in (alice.id, alice_task.id, archived.id, mine.id)]
    model.script(picks, [rank(i, 1.0) for i in (alice.id, mine.id)])
    got = await select(selector, MemoryScope(project_id=pid, user_id="bob", session_id=s1))
    assert [x.memory.id for x in got] == [mine.id]
    [p1] = model.asked(PASS1)
    for hidden in ("alice secret", "other session task", "archived"):
        assert hidden not in p1
    assert uow.memories.rows[alice.id].use_count == 0


async def test_usage_is_listed_only_to_the_user_and_project_that_selected(
    uow, model, selector, memories
):
    pid, _ = world(uow)
    mine = await create(memories, kind=U, user_id="bob", title="bob note")
    shared = await create(memories, kind=P, project_id=pid, title="shared")
    model.script(
        [pick(mine.id, 0.8), pick(shared.id, 0.7, "supporting")],
        [rank(mine.id, 0.8), rank(shared.id, 0.7)],
    )
    await select(selector, MemoryScope(project_id=pid, user_id="bob"), thread="tb")
    with pytest.raises(NotFound):
        await memories.usage(None, mine.id, "", 0, 0, "")
    assert len((await memories.usage(None, mine.id, "bob", pid, 0, "")).items) == 1
    # The log holds bob's prompt: nobody else sees any of the thread, not even
    # the rows of the shared PROJECT memory.
    assert (await memories.usage("tb", None, "", pid, 0, "")).items == []
    assert (await memories.usage("tb", None, "eve", pid, 0, "")).items == []
    assert (await memories.usage(None, shared.id, "eve", pid, 0, "")).items == []
    own = (await memories.usage("tb", None, "bob", pid, 0, "")).items
    assert sorted(u.memory_id for u in own) == sorted([mine.id, shared.id])
    assert {u.context for u in own} == {"which database port?"}
    # Neither key is the user's whole usage in the project: bob's, and only his.
    assert (await memories.usage(None, None, "", pid, 0, "")).items == []
    whole = (await memories.usage(None, None, "bob", pid, 0, "")).items
    assert sorted(u.memory_id for u in whole) == sorted([mine.id, shared.id])


async def test_a_users_whole_usage_is_paged_oldest_first_and_only_theirs(
    uow, model, selector, memories
):
    """ListMemoryUsage with neither key lists everything one user's selections
    recorded in one project, oldest first, in pages; another user's rows and
    another project's never appear."""
    pid, _ = world(uow)
    other_pid, _ = world(uow, "other")
    note = await create(memories, kind=U, user_id="bob", title="bob note")
    shared = await create(memories, kind=P, project_id=pid, title="shared")
    elsewhere = await create(memories, kind=P, project_id=other_pid, title="elsewhere")
    picks = [pick(note.id, 0.8), pick(shared.id, 0.7, "supporting")]
    ranked = [rank(note.id, 0.8), rank(shared.id, 0.7)]
    for thread in ("t1", "t2"):
        model.script(picks, ranked)
        await select(selector, MemoryScope(project_id=pid, user_id="bob"), thread=thread)
    model.script(picks[1:], ranked[1:])
    await select(selector, MemoryScope(project_id=pid, user_id="eve"), thread="t1")
    model.script([pick(elsewhere.id, 0.9)], [rank(elsewhere.id, 0.9)])
    await select(selector, MemoryScope(project_id=other_pid, user_id="bob"), thread="t1")

    seen: list[Any] = []
    token = ""
    while True:
        page = await memories.usage(None, None, "bob", pid, 3, token)
        assert len(page.items) <= 3
        seen += page.items
        token = page.next_token
        if not token:
            break
    assert [(u.thread_id, u.memory_id) for u in seen] == [
        ("t1", note.id), ("t1", shared.id), ("t2", note.id), ("t2", shared.id),
    ]  # fmt: skip
    assert [u.id for u in seen] == sorted(u.id for u in seen)
    eve = (await memories.usage(None, None, "eve", pid, 0, "")).items
    assert [(u.thread_id, u.memory_id) for u in eve] == [("t1", shared.id)]
    with pytest.raises(InvalidArgument) as err:
        await memories.usage(None, None, "bob", pid, -1, "")
    assert err.value.field == "page_size"


async def test_another_users_selections_do_not_change_my_thread(uow, model, selector, memories):
    """Threads belong to the (user, project) that selected: eve using the same
    thread id does not mark bob's memories as used."""
    pid, _ = world(uow)
    shared = await create(memories, kind=P, project_id=pid, title="shared")
    model.script([pick(shared.id, 0.8)], [rank(shared.id, 0.8)], times=2)
    await select(selector, MemoryScope(project_id=pid, user_id="eve"), thread="t-shared")
    [mine] = await select(selector, MemoryScope(project_id=pid, user_id="bob"), thread="t-shared")
    assert not mine.previously_used
    assert mine.relevance == 0.8


async def test_titles_past_the_context_are_read_in_batches_that_fit_never_cut(
    uow, model, selector, memories
):
    # A 2,048-token model: room for ~900 bytes of titles next to the prompt.
    model.context = 2048
    pid, sid = world(uow)
    mems = [
        await create(memories, kind=P, project_id=pid, title=f"memory number {i} about " + "x" * 40)
        for i in range(40)
    ]
    first, last = mems[0], mems[-1]
    model.add({"ranked": []}, PASS2, None)  # first: it names titles too
    model.add({"selected": [pick(first.id, 0.6, "supporting")]}, f"[{first.id}] memory number 0 ")
    model.add({"selected": [pick(last.id, 0.9)]}, f"[{last.id}] memory number 39 ")
    model.add({"selected": []}, PASS1, None)
    got = await select(selector, MemoryScope(project_id=pid, session_id=sid))
    pass1 = model.asked(PASS1)
    assert len(pass1) >= 2
    assert {x.title_batches for x in got} == {len(pass1)}
    assert {x.method for x in got} == {"llm"} and all(not x.degraded_reason for x in got)
    # Picks of every batch are merged, most relevant first.
    assert [x.memory.id for x in got] == [last.id, first.id]
    # Each batch fits the context whole: instructions and the question first.
    assert all(size <= model.context for size in model.sizes)
    for p in pass1:
        assert p.startswith(PASS1) and "which database port?" in p
    offered = "".join(pass1)
    assert all(f"[{x.id}] memory number" in offered for x in mems)


async def test_a_retried_selection_answers_the_first_and_records_its_usage_once(
    uow, model, selector, memories
):
    """A retry with the request_id of an answered selection must not count it
    twice, nor (the first call's picks now ranking lower in the thread)
    answer another one; the same id for another request is refused."""
    pid, sid = world(uow)
    a, b, _ = await three(memories, pid)
    scope = MemoryScope(project_id=pid, session_id=sid)
    model.script(
        [pick(a.id, 0.9), pick(b.id, 0.5, "supporting")], [rank(a.id, 0.95), rank(b.id, 0.7)]
    )
    first = await select(selector, scope, request_id="sel-1")
    asked = len(model.prompts)
    again = await select(selector, scope, request_id="sel-1")
    assert [(x.memory.id, x.relevance, x.category, x.method) for x in again] == [
        (x.memory.id, x.relevance, x.category, x.method) for x in first
    ]
    assert len(model.prompts) == asked, "a retry asks the model nothing"
    usage = (await memories.usage("t1", None, "", pid, 0, "")).items
    assert sorted(u.memory_id for u in usage) == sorted([a.id, b.id])  # once each
    assert uow.memories.rows[a.id].use_count == 1
    # The same id for another request is refused, as a create's is.
    with pytest.raises(AlreadyExists, match="sel-1"):
        await select(selector, scope, prompt="something else", request_id="sel-1")
    # A new id is a new selection: recorded, with the first call's picks now used.
    model.script([pick(a.id, 0.9)], [rank(a.id, 0.9)])
    [fresh] = await select(selector, scope, request_id="sel-2")
    assert fresh.previously_used and fresh.memory.use_count == 2
    # An id is its owner's: another scope's selection under it is its own.
    user = await create(memories, kind=U, user_id="alice", title="alice's port")
    model.script([pick(user.id, 0.8)], [rank(user.id, 0.8)])
    [theirs] = await select(selector, MemoryScope(user_id="alice"), request_id="sel-1")
    assert theirs.memory.id == user.id
