"""Usage tells no user about another (docs/usage.md): each LLM call keeps the
user its work was for, a key that may act only for some users reads only
the usage of that work (GetUsage, its budget line, GetServiceStatus), and
a tenant's limit per user holds one user's work while the others' flows.

Tenant ``a`` has a key for every user, one for alice and one for carol; the
LLM is the Ollama stand-in, which answers extraction with memory candidates
and formation's questions as a careful model would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import grpc
import pytest
from grpc_status import rpc_status

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.graph_support import EMPTY, start_graph_harness
from tests.ollama_stub import OllamaStub, Reply
from tests.support import Harness, bearer, take, wait_until

BOTH_STORES = True
STUB_DEFAULT_REPLY = EMPTY
STAR_KEY = "tenant-a-every-user-key-0001"
ALICE_KEY = "tenant-a-alice-app-key-00001"
CAROL_KEY = "tenant-a-carol-app-key-00001"
STAR, ALICE, CAROL = bearer(STAR_KEY), bearer(ALICE_KEY), bearer(CAROL_KEY)
DECISION_PROMPT = "Kept memories:"
#: Tokens a day the work for one user may spend: one extraction spends more.
SHARE = 100


def _keys(path: Path, **tenant: int) -> str:
    path.write_text(
        json.dumps(
            {
                "tenants": {"a": tenant} if tenant else {},
                "keys": [
                    {"key": STAR_KEY, "name": "team", "users": "*", "tenant": "a"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "a"},
                    {"key": CAROL_KEY, "name": "carol-app", "users": ["carol"], "tenant": "a"},
                ],
            }
        )
    )
    return str(path)


async def _start(tmp_path: Path, stub: OllamaStub, store_settings: dict, **tenant: int) -> Harness:
    return await start_graph_harness(
        tmp_path / "data",
        stub,
        auth_keys_file=_keys(tmp_path / "keys.json", **tenant),
        **store_settings,
    )


@pytest.fixture
async def h(tmp_path, stub, store_settings):
    harness = await _start(tmp_path, stub, store_settings)
    yield harness
    await harness.close()


def _candidate(content: str, quote: str, place: str) -> dict:
    memory = {"about": "user", "title": content[:30], "content": content,
              "tier": "longterm", "quote": quote}  # fmt: skip
    entity = {"name": place, "type": "place", "notes": None}
    return {**EMPTY, "entities": [entity], "ended": [], "memories": [memory]}


def _supersede_what_is_kept(stub: OllamaStub) -> None:
    """Formation's questions answered: each candidate supersedes the first
    memory kept beside it."""

    def respond(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if DECISION_PROMPT not in prompt:
            return None
        decisions = []
        for block in re.split(r"(?m)^Candidate ", prompt)[1:]:
            number = int(block.split(" ", 1)[0].rstrip(":"))
            [kept, *_] = re.findall(r"- id (\d+)", block)
            decisions.append({"candidate": number, "action": "SUPERSEDE",
                              "memory_id": int(kept), "reason": "moved"})  # fmt: skip
        return Reply.of({"decisions": decisions})

    stub.responder = respond


async def _session(h: Harness, key, project_id: int, user_id: str) -> int:
    made = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(project_id=project_id, user_id=user_id)
        ),
        metadata=key,
    )
    return made.id


async def _episode(h: Harness, key, session_id: int, text: str) -> int:
    made = await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session_id, user_message=text, ai_response="ok"),
        metadata=key,
    )
    return made.id


async def _formed(h: Harness, key, episode_id: int) -> graph_pb2.ExtractionEvent:
    """The event that ends the episode's memory formation (its calls are
    written in the same transaction)."""
    call = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=episode_id), metadata=key
    )
    try:
        while True:
            [event] = await take(call, 1, 30)
            if event.HasField("memory_formation"):
                return event
    finally:
        call.cancel()


async def _extracted(h: Harness, key, episode_id: int) -> graph_pb2.ExtractionEvent:
    call = h.graph.WatchExtractions(
        graph_pb2.WatchExtractionsRequest(episode_id=episode_id), metadata=key
    )
    try:
        [event] = await take(call, 1, 30)
        return event
    finally:
        call.cancel()


async def _usage(h: Harness, key, **kw) -> memory_pb2.GetUsageResponse:
    return await h.memory.GetUsage(memory_pb2.GetUsageRequest(**kw), metadata=key)


def _calls(report: memory_pb2.GetUsageResponse) -> dict[str, int]:
    return {s.stage: s.calls for s in report.total.stages}


def _counts(report: memory_pb2.GetUsageResponse) -> tuple[int, int]:
    return report.total.episodes, report.total.memories_formed


def _tokens(report: memory_pb2.GetUsageResponse) -> int:
    return sum(s.prompt_tokens + s.completion_tokens for s in report.total.stages)


async def test_a_key_reads_only_the_usage_of_the_work_done_for_its_users(h, stub):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="shared")), metadata=STAR
    )
    alices = await _session(h, ALICE, project.id, "alice")
    carols = await _session(h, CAROL, project.id, "carol")
    # Alice's first fact forms a memory without a question; her second, with
    # the first already kept, asks formation one: the oracle the watch hides.
    stub.add_rule(_candidate("The user lives in Lisbon.", "I live in Lisbon", "Lisbon"),
                  contains="User message:\nI live in Lisbon.\n")  # fmt: skip
    stub.add_rule(_candidate("The user lives in Porto.", "I moved to Porto", "Porto"),
                  contains="User message:\nI moved to Porto.\n")  # fmt: skip
    _supersede_what_is_kept(stub)
    first = await _formed(h, ALICE, await _episode(h, ALICE, alices, "I live in Lisbon."))
    assert first.memory_formation.llm_calls == 0
    second = await _formed(h, ALICE, await _episode(h, ALICE, alices, "I moved to Porto."))
    assert second.memory_formation.llm_calls == 1
    [op] = second.memory_formation.operations
    assert op.action == graph_pb2.MEMORY_ACTION_SUPERSEDE
    # Her selection is hers too.
    async for _ in h.memory.SelectMemories(
        memory_pb2.SelectMemoriesRequest(
            prompt="where do I live?",
            scope=memory_pb2.MemoryScope(project_id=project.id, user_id="alice"),
        ),
        metadata=ALICE,
    ):
        pass

    # Carol, in the same project and tenant, reads nothing of it: not the
    # calls, not the memories formed, not the episodes, not the tokens.
    for scope in ({"project_id": project.id}, {}):
        carol = await _usage(h, CAROL, **scope)
        assert list(carol.users) == ["carol"]
        assert _calls(carol) == {} and _counts(carol) == (0, 0), scope
        assert carol.total.entities == 0
        assert all(not b.stages and not b.memories_formed for b in carol.buckets)
        assert carol.budget.llm_tokens_today == 0
        assert [(u.user_id, u.llm_tokens_today) for u in carol.budget.users] == [("carol", 0)]
    # Alice reads her own work's.
    alice = await _usage(h, ALICE, project_id=project.id)
    assert list(alice.users) == ["alice"]
    assert _calls(alice) == {"extraction": 2, "formation": 1, "selection": 1}
    assert _counts(alice) == (2, 2) and alice.total.entities == 2
    assert alice.budget.llm_tokens_today == _tokens(alice) > 0
    # A key that may act for every user reads the project's whole figures.
    team = await _usage(h, STAR, project_id=project.id)
    assert list(team.users) == []
    assert _calls(team) == _calls(alice) and _counts(team) == (2, 2)
    assert team.total.entities == 2

    # Carol's own episode is hers to read, and tells alice nothing.
    carol_episode = await _episode(h, CAROL, carols, "Carol here, nothing to keep.")
    assert (await _formed(h, CAROL, carol_episode)).memory_formation.proposed == 0
    carol = await _usage(h, CAROL, project_id=project.id)
    assert _calls(carol) == {"extraction": 1} and _counts(carol) == (1, 0)
    assert _calls(await _usage(h, ALICE, project_id=project.id)) == _calls(alice)
    team = await _usage(h, STAR)
    assert _calls(team) == {"extraction": 3, "formation": 1, "selection": 1}
    assert _counts(team) == (3, 2)
    assert team.budget.llm_tokens_today == _tokens(team) == _tokens(alice) + _tokens(carol)

    # The service's budget lines follow the same rule.
    async def today(key) -> int:
        status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest(), metadata=key)
        [line] = status.budgets
        return line.llm_tokens_today

    assert await today(CAROL) == _tokens(carol)
    assert await today(ALICE) == _tokens(alice)
    assert await today(STAR) == _tokens(team)
    # Each call names the user its work was for.
    rows = await h.app.db.read_sql(
        lambda c: c.execute(
            "SELECT stage, user_id, COUNT(*) FROM llm_calls GROUP BY stage, user_id"
            " ORDER BY stage, user_id"
        ).fetchall()
    )
    assert [tuple(r) for r in rows] == [
        ("extraction", "alice", 2),
        ("extraction", "carol", 1),
        ("formation", "alice", 1),
        ("selection", "alice", 1),
    ]


async def test_work_for_no_user_is_read_only_by_keys_that_may_act_for_every_user(h, stub):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p")), metadata=STAR
    )
    session = await _session(h, ALICE, project.id, "alice")
    await _extracted(h, ALICE, await _episode(h, ALICE, session, "The deploy runs on Fridays."))
    async for _ in h.summary.SummarizeProject(
        summary_pb2.SummarizeProjectRequest(project_id=project.id), metadata=STAR
    ):
        pass
    team = await _usage(h, STAR, project_id=project.id)
    assert _calls(team) == {"extraction": 1, "overview": 1}
    # The overview was done for no user: no user's key reads it.
    assert _calls(await _usage(h, ALICE, project_id=project.id)) == {"extraction": 1}
    assert _calls(await _usage(h, CAROL, project_id=project.id)) == {}


async def _error_of(h: Harness, episode_id: int) -> str:
    episode = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode_id), metadata=STAR)
    return episode.extraction_error


async def test_a_user_past_their_share_waits_while_the_tenants_other_users_flow(
    tmp_path, stub, store_settings
):
    h = await _start(tmp_path, stub, store_settings, llm_tokens_per_day_per_user=SHARE)
    try:
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p")), metadata=STAR
        )
        alices = await _session(h, ALICE, project.id, "alice")
        carols = await _session(h, CAROL, project.id, "carol")
        # Alice's first extraction spends more than her share of the day.
        first = await _extracted(h, ALICE, await _episode(h, ALICE, alices, "I met Ana."))
        assert first.status == graph_pb2.EXTRACTION_STATUS_DONE
        mine = (await _usage(h, ALICE)).budget
        assert mine.llm_tokens_per_day_per_user == SHARE and not mine.exhausted
        [line] = mine.users
        assert line.user_id == "alice" and line.exhausted and line.llm_tokens_today > SHARE

        # Her next episode waits, and says why; carol's flows.
        asked = len(stub.requests_to("/api/chat"))
        waiting = await _episode(h, ALICE, alices, "Ana moved to Oslo.")
        carol = await _extracted(h, CAROL, await _episode(h, CAROL, carols, "Bo joined."))
        assert carol.status == graph_pb2.EXTRACTION_STATUS_DONE
        said = await wait_until(lambda: _error_of(h, waiting), timeout=20)
        assert said.startswith(
            "extraction waits: user 'alice' of tenant 'a' has spent their share of the"
            " tenant's LLM tokens for today ("
        ), said
        assert "llm-tokens-per-day-per-user" in said and "resumes at" in said
        served = stub.requests_to("/api/chat")[asked:]
        assert [r for r in served if "Ana moved to Oslo" in r.prompt_text()] == []

        # Her selection ranks by similarity, and the stream says so even
        # with nothing selected; a summary of her session is refused.
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER, user_id="alice", project_id=project.id,
                    title="friend", content="Ana is a friend of the user.",
                )
            ),
            metadata=ALICE,
        )  # fmt: skip
        call = h.memory.SelectMemories(
            memory_pb2.SelectMemoriesRequest(
                prompt="who is Ana?",
                scope=memory_pb2.MemoryScope(project_id=project.id, user_id="alice"),
            ),
            metadata=ALICE,
        )
        picked = [x async for x in call]
        trailers = dict(await call.trailing_metadata())
        assert trailers["x-nexus-selection-method"] == "semantic"
        assert "user 'alice' of tenant 'a' has spent their share" in trailers["x-nexus-degraded"]
        assert all(x.method == "semantic" for x in picked)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await h.summary.SummarizeSession(
                summary_pb2.SummarizeSessionRequest(session_id=alices), metadata=ALICE
            )
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = rpc_status.from_call(refused.value)
        assert status is not None and "llm-tokens-per-day-per-user" in str(status.details)
        assert "tenant:a/user:alice" in str(status.details)
        # Carol's key reads her own share's line, not alice's.
        carols_usage = await _usage(h, CAROL)
        [line] = carols_usage.budget.users
        assert line.user_id == "carol" and line.llm_tokens_today == _tokens(carols_usage)
    finally:
        await h.close()

    # Started again with no limit per user, alice's waiting work runs now,
    # not at the next midnight, and stops saying it waits.
    h = await _start(tmp_path, stub, store_settings)
    try:
        done = await _extracted(h, ALICE, waiting)
        assert done.status == graph_pb2.EXTRACTION_STATUS_DONE
        assert await _error_of(h, waiting) == ""
    finally:
        await h.close()
