"""The console's routes (console/routes.py) and their templates, in-process:
the app built on a stand-in client (tests/unit/console_stand_ins.py's)
and called through httpx's ASGI transport, with no server, channel or socket.

What a route decides itself: the HTTP status of each gRPC status and of a
bad query string, as a page and as its JSON twin; a server that did not
answer, told in plain words with its transport's detail kept for the log;
the confirmation page's go-back link; a change's redirect; the forget
form's typed id; the download's headers and its refusal before any byte;
a live stream for a browser that loaded a page; the static assets; and
what a page renders from its view (a user's links, the graph's cap, the
search hint, a degraded answer).

Each page and endpoint keeps the whole-server test of its wiring in
tests/e2e/console/."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import grpc
import httpx
import pytest

from nexus_grpc.client import NexusClientError
from nexus_grpc.console.page_data import MAX_NODES
from nexus_grpc.console.routes import HTTP_STATUS, build_app
from nexus_grpc.console.security import CSRF_COOKIE, GuardSettings
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.console_stand_ins import ATLAS, PROJECT, Answer, StandIn, Stream

HOST = "127.0.0.1:8090"


def console(client: StandIn, *, raise_app_exceptions: bool = True) -> httpx.AsyncClient:
    guard = GuardSettings(host="127.0.0.1", port=8090, loopback=True)
    app = build_app(client, guard)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
    return httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}")


async def csrf(http: httpx.AsyncClient) -> str:
    """A page loaded first, as a browser does: its CSRF cookie."""
    await http.get("/static/console.css")
    token = http.cookies.get(CSRF_COOKIE)
    assert token
    return token


def failing(code: grpc.StatusCode, message: str, request_id: str | None = "req-1") -> StandIn:
    return StandIn(
        list_projects=NexusClientError(code, message, request_id),
        get_service_status=NexusClientError(code, message, request_id),
    )


# Errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "status"), sorted(HTTP_STATUS.items(), key=lambda i: i[1]))
async def test_a_refused_call_answers_the_http_status_that_fits_with_the_servers_words(
    code, status
):
    async with console(failing(code, "the server's own words")) as http:
        twin, page = await http.get("/.json"), await http.get("/")
    assert twin.status_code == page.status_code == status
    assert twin.json() == {"error": {"code": code.name, "message": "the server's own words"}}
    assert code.name in page.text and "the server&#39;s own words" in page.text


async def test_a_status_with_no_http_twin_is_a_bad_gateway():
    async with console(failing(grpc.StatusCode.DATA_LOSS, "gone")) as http:
        answer = await http.get("/.json")
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "DATA_LOSS"


@pytest.mark.parametrize(
    ("code", "status", "says"),
    [
        (grpc.StatusCode.UNAVAILABLE, 503, "the console cannot reach its nexus-grpc server: is it"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "the nexus-grpc server did not answer in time"),
    ],
)
async def test_a_server_that_did_not_answer_is_told_in_plain_words(code, status, says):
    """No request id came back: the transport's words (the target, the
    socket's error) are for the console's log, not for the browser."""
    transport = "failed to connect to all addresses; ipv4:127.0.0.1:1: Connection refused"
    async with console(failing(code, transport, request_id=None)) as http:
        page, twin = await http.get("/"), await http.get("/.json")
    assert page.status_code == twin.status_code == status
    assert twin.json()["error"] == {"code": code.name, "message": twin.json()["error"]["message"]}
    assert twin.json()["error"]["message"].startswith(says)
    assert says in unescape(page.text) and "Traceback" not in page.text
    for shown in (page.text, twin.text):
        assert "127.0.0.1:1" not in shown and "ipv4" not in shown and "refused" not in shown
    # A server that did answer UNAVAILABLE (a request id) is quoted as it said.
    async with console(failing(code, "draining", request_id="req-9")) as http:
        assert (await http.get("/.json")).json()["error"]["message"] == "draining"


async def test_a_failure_of_the_console_itself_is_a_plain_500_with_no_details():
    client = StandIn(list_projects=RuntimeError("secret detail of a bug"))
    async with console(client, raise_app_exceptions=False) as http:
        page, twin = await http.get("/"), await http.get("/.json")
    assert page.status_code == twin.status_code == 500
    assert page.text == "internal error in the console; its log has the details"
    assert twin.json()["error"]["code"] == "INTERNAL"
    assert "secret detail" not in page.text + twin.text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/status.json?window=month", "window: must be one of day, week, got 'month'"),
        ("/status?window=month", "window: must be one of day, week, got 'month'"),
        (f"/projects/{PROJECT}/graph.json?as_of=yesterday", "as_of: must be an RFC 3339 time"),
        (f"/projects/{PROJECT}/memories?include_archived=maybe", "include_archived"),
        (f"/projects/{PROJECT}/search.json?q=x&mode=fuzzy", "mode: must be one of"),
        ("/projects/abc.json", "project_id: must be a positive id"),
        ("/projects/abc/episodes/1", "project_id: must be a positive id"),
        (f"/projects/{PROJECT}/episodes/0.json", "episode_id: must be a positive id"),
        ("/users.json?user_id=alice&project_id=x", "project_id"),
        ("/erasures/x.json", "erasure_id: must be a positive id"),
    ],
)
async def test_a_bad_query_string_is_a_400_naming_it_before_the_server_is_asked(url, says):
    client = StandIn()  # no answer: any call fails the test
    async with console(client) as http:
        answer = await http.get(url)
    assert answer.status_code == 400, answer.text
    shown = answer.json()["error"]["message"] if ".json" in url else unescape(answer.text)
    assert says in shown and "Traceback" not in answer.text
    assert client.calls == []


async def test_entity_search_in_another_mode_is_a_400_as_a_page_and_as_json():
    client = StandIn(get_project=ATLAS)
    url = f"/projects/{PROJECT}/search.json?q=x&kind=entities&mode=keyword"
    async with console(client) as http:
        twin, page = await http.get(url), await http.get(url.replace(".json", ""))
    assert twin.status_code == page.status_code == 400
    assert twin.json()["error"]["message"].startswith("mode: entity search has one mode")
    assert "entity search has one mode" in page.text


# Actions ---------------------------------------------------------------------------------


def _links(page: str) -> tuple[str, str]:
    [link] = re.findall(r'<a href="([^"]*)">No, go back</a>', page)
    [field] = re.findall(r'name="back" value="([^"]*)"', page)
    return unescape(link), unescape(field)


async def test_the_go_back_link_never_leaves_the_console_and_a_console_path_is_kept():
    url = f"/projects/{PROJECT}/delete-memory/4"
    back = f"/projects/{PROJECT}/memories?user_id=bob&include_archived=1"
    async with console(StandIn()) as http:
        away = await http.get(url, params={"user_id": "bob", "back": "//evil.example"})
        kept = await http.get(url, params={"user_id": "bob", "back": back})
    assert away.status_code == 200 and "Delete memory 4?" in away.text
    assert _links(away.text) == (f"/projects/{PROJECT}", f"/projects/{PROJECT}")
    assert _links(kept.text) == (back, back)
    assert 'name="user_id" value="bob"' in kept.text


async def test_an_unknown_action_or_target_is_no_such_action():
    async with console(StandIn()) as http:
        for url in (f"/projects/{PROJECT}/explode/4", f"/projects/{PROJECT}/undo-merge/x"):
            answer = await http.get(url)
            assert answer.status_code == 404 and "no such action" in answer.text, url
        token = await csrf(http)
        posted = await http.post(f"/projects/{PROJECT}/explode/4", data={"csrf_token": token})
    assert posted.status_code == 400 and "action: no such action" in unescape(posted.text)


async def test_deleting_a_memory_of_another_project_deletes_nothing():
    other = memory_pb2.Memory(id=4, project_id=PROJECT + 1, user_id="bob")
    client = StandIn(get_memory=other)
    async with console(client) as http:
        token = await csrf(http)
        answer = await http.post(
            f"/projects/{PROJECT}/delete-memory/4", data={"user_id": "bob", "csrf_token": token}
        )
    assert answer.status_code == 404
    assert f"memory 4 is not in project {PROJECT}" in answer.text
    assert client.asked("get_memory") == [{"id": 4, "user_id": "bob"}]
    assert not client.asked("delete_memory")


async def test_a_change_sends_the_browser_back_saying_what_was_done():
    client = StandIn(
        get_memory=memory_pb2.Memory(id=4, project_id=PROJECT, user_id="bob"),
        delete_memory=memory_pb2.Memory(),
        undo_merge=graph_pb2.EntityMerge(id=9, source_ids=[2, 3]),
    )
    async with console(client) as http:
        token = await csrf(http)
        back = f"/projects/{PROJECT}/memories?user_id=bob"
        deleted = await http.post(
            f"/projects/{PROJECT}/delete-memory/4",
            data={"user_id": "bob", "csrf_token": token, "back": back},
        )
        undone = await http.post(f"/projects/{PROJECT}/undo-merge/9", data={"csrf_token": token})
    assert deleted.status_code == 303
    assert deleted.headers["location"] == (
        f"{back}&done=memory+4+deleted+%28its+history+stays+readable+by+its+owner+for+a+while%29"
    )
    assert client.asked("delete_memory") == [{"id": 4, "user_id": "bob"}]
    assert undone.headers["location"] == (
        f"/projects/{PROJECT}?done=merge+9+undone%3A+entities+2%2C+3+are+apart+again"
    )


async def test_retrying_an_extraction_checks_the_episode_is_the_projects_first():
    client = StandIn(
        get_episode=memory_pb2.Episode(id=5, session_id=1),
        get_session=memory_pb2.Session(id=1, project_id=PROJECT + 1),
        get_project=ATLAS,
    )
    async with console(client) as http:
        token = await csrf(http)
        answer = await http.post(
            f"/projects/{PROJECT}/retry-extraction/5", data={"csrf_token": token}
        )
    assert answer.status_code == 404 and "episode 5 is not in project" in unescape(answer.text)
    assert not client.asked("extract_episode")


# Forgetting a user, and their download ----------------------------------------------------


async def test_forgetting_goes_on_only_with_the_typed_id_then_shows_the_erasure():
    client = StandIn(forget_user=memory_pb2.Erasure(id=12))
    async with console(client) as http:
        confirm = await http.get("/users/forget?user_id=dave")
        token = await csrf(http)
        form = {"user_id": "dave", "csrf_token": token}
        refused = await http.post("/users/forget", data={**form, "typed_user_id": "dave "})
        started = await http.post("/users/forget", data={**form, "typed_user_id": "dave"})
    assert confirm.status_code == 200 and 'data-user-id="dave"' in confirm.text
    assert refused.status_code == 400 and 'id="typed-user-id"' in refused.text
    assert "type the user id exactly as shown (dave)" in unescape(refused.text)
    assert client.asked("forget_user") == [{"user_id": "dave", "project_id": 0}]
    assert started.status_code == 303
    assert started.headers["location"] == (
        "/erasures/12?done=forgetting+user+%27dave%27%3A+erasure+12+started"
    )


async def test_a_forget_that_joins_a_running_erasure_says_so():
    client = StandIn(forget_user=memory_pb2.Erasure(id=12, joined=True))
    async with console(client) as http:
        token = await csrf(http)
        started = await http.post(
            "/users/forget",
            data={"user_id": "dave", "typed_user_id": "dave", "csrf_token": token,
                  "project_id": "3"},
        )  # fmt: skip
    assert "this+request+joined+erasure+12" in started.headers["location"]
    assert client.asked("forget_user") == [{"user_id": "dave", "project_id": 3}]


async def test_a_forget_form_without_a_user_is_a_400():
    async with console(StandIn()) as http:
        assert (await http.get("/users/forget")).status_code == 400


def _record(**one: Any) -> memory_pb2.ExportRecord:
    return memory_pb2.ExportRecord(**one)


async def test_the_download_is_the_export_one_record_a_line_named_for_the_user():
    records = [
        _record(session=memory_pb2.Session(id=1, project_id=3, user_id="alice")),
        _record(memory=memory_pb2.Memory(id=2, content="Alice likes tea é")),
    ]
    stream = Stream(records)
    client = StandIn(export_user=stream)
    async with console(client) as http:
        answer = await http.get("/users/export.jsonl?user_id=alice&project_id=3")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    assert answer.headers["content-disposition"] == (
        'attachment; filename="export-user-alice-project-3.jsonl"'
    )
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert lines == [
        {"session": {"id": "1", "project_id": "3", "user_id": "alice"}},
        {"memory": {"id": "2", "content": "Alice likes tea é"}},
    ]
    assert client.asked("export_user") == [{"user_id": "alice", "project_id": 3, "timeout": None}]
    assert stream.cancelled


async def test_a_refused_download_is_the_pages_error_before_any_byte():
    refusal = NexusClientError(grpc.StatusCode.NOT_FOUND, "user 'nobody' holds nothing here", "r")
    stream = Stream([], error=refusal)
    async with console(StandIn(export_user=stream)) as http:
        answer = await http.get("/users/export.jsonl?user_id=nobody")
    assert answer.status_code == 404
    assert "user &#39;nobody&#39; holds nothing here" in answer.text
    assert "attachment" not in answer.headers.get("content-disposition", "")
    assert stream.cancelled
    # A user with nothing at all to export: an empty file, not an error.
    async with console(StandIn(export_user=Stream([]))) as http:
        empty = await http.get("/users/export.jsonl?user_id=quiet")
    assert empty.status_code == 200 and empty.text == ""


# Live streams -------------------------------------------------------------------------------


async def test_a_live_stream_needs_a_browser_that_loaded_a_console_page():
    client = StandIn()
    for url in ("/erasures/1/events", f"/projects/{PROJECT}/events?episodes=1"):
        async with console(client) as fresh:  # never loaded a page: no cookie
            answer = await fresh.get(url)
        assert answer.status_code == 403, url
        assert "console page" in answer.json()["error"]["message"]
    assert client.calls == []


async def test_a_live_stream_the_key_may_not_follow_is_refused_and_gives_its_slot_back():
    denied = NexusClientError(grpc.StatusCode.PERMISSION_DENIED, "not yours", "r")
    client = StandIn(get_erasure=denied)
    async with console(client) as http:
        await csrf(http)
        for _ in range(6):  # more than one browser's slots: each was given back
            answer = await http.get("/erasures/3/events")
            assert answer.status_code == 403
            assert answer.json()["error"] == {"code": "PERMISSION_DENIED", "message": "not yours"}
    assert len(client.asked("get_erasure")) == 6


async def test_the_erasure_stream_follows_it_to_its_receipt():
    running = memory_pb2.Erasure(id=3, state=memory_pb2.ERASURE_STATE_RUNNING,
                                 planned=memory_pb2.ErasureCounts(sessions=2))  # fmt: skip
    done = memory_pb2.Erasure(id=3, state=memory_pb2.ERASURE_STATE_DONE)
    never = memory_pb2.Erasure(id=3, state=memory_pb2.ERASURE_STATE_RUNNING)
    stream = Stream([running, done, never])
    client = StandIn(get_erasure=done, watch_erasure=stream)
    async with console(client) as http:
        await csrf(http)
        answer = await http.get("/erasures/3/events")
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.text.startswith("retry: 2000\n\n")
    steps = [json.loads(d) for d in re.findall(r"^event: erasure\ndata: (.*)$", answer.text, re.M)]
    assert [(s["state"], s["finished"]) for s in steps] == [("running", False), ("done", True)]
    assert stream.read == 2 and stream.cancelled  # it ends at the receipt


async def test_an_erasure_stream_that_fails_ends_saying_why():
    lost = NexusClientError(grpc.StatusCode.UNAVAILABLE, "gone", "r")
    client = StandIn(get_erasure=memory_pb2.Erasure(id=3), watch_erasure=Stream([], error=lost))
    async with console(client) as http:
        await csrf(http)
        answer = await http.get("/erasures/3/events")
    assert answer.text.endswith('event: ended\ndata: {"code": "UNAVAILABLE"}\n\n')


async def test_the_timeline_stream_sends_the_states_then_each_change_it_is_told_of():
    """States at once; then, for each event of a watched episode, that
    episode's states again with those still pending; an event of another
    episode is passed over; the stream ends with the server's."""
    pending = memory_pb2.JOB_STATE_PENDING
    done = memory_pb2.JOB_STATE_DONE
    states = {
        1: memory_pb2.Episode(id=1, embedding_state=done, extraction_state=pending),
        2: memory_pb2.Episode(id=2, embedding_state=done, extraction_state=done),
    }
    events = Stream([graph_pb2.ExtractionEvent(episode_id=i) for i in (9, 2)])
    client = StandIn(
        get_project=ATLAS,
        get_episode=lambda id, **_: states[id],  # noqa: A006
        watch_extractions=events,
    )
    async with console(client) as http:
        await csrf(http)
        answer = await http.get(f"/projects/{PROJECT}/events?episodes=2,1,404x")
    assert answer.status_code == 400  # an id that is not one: refused before streaming
    async with console(client) as http:
        await csrf(http)
        answer = await http.get(f"/projects/{PROJECT}/events?episodes=2,1")
    sent = [json.loads(d)["id"] for d in re.findall(r"^data: (.*)$", answer.text, re.M)]
    # Both at once; at 2's event, 2 and the still pending 1 again; 9's is not watched.
    assert sent == [1, 2, 1, 2]
    assert client.asked("watch_extractions") == [{"project_id": PROJECT}]
    assert events.cancelled


# What pages render ---------------------------------------------------------------------------


async def test_users_link_to_their_page_where_they_appear():
    client = StandIn(
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(
            users=[memory_pb2.UserMemoryCount(user_id="alice", memories=1)], user_count=1
        ),
        list_memories=memory_pb2.ListMemoriesResponse(),
        list_sessions=memory_pb2.ListSessionsResponse(
            sessions=[memory_pb2.Session(id=1, project_id=PROJECT, user_id="bob")]
        ),
        list_episodes=memory_pb2.ListEpisodesResponse(),
    )
    async with console(client) as http:
        memories = (await http.get(f"/projects/{PROJECT}/memories?user_id=alice")).text
        timeline = (await http.get(f"/projects/{PROJECT}")).text
    assert 'href="/users?user_id=alice"' in memories
    assert 'class="user-link" href="/users?user_id=bob"' in timeline


async def test_a_capped_graph_says_how_many_it_shows_of_how_many():
    spokes = MAX_NODES + 20
    hub = graph_pb2.Entity(id=1, name="Hub", type="concept", project_id=PROJECT)
    nodes = [hub] + [graph_pb2.Entity(id=100 + n, name=f"Spoke {n:03d}") for n in range(spokes)]
    links = [graph_pb2.Relationship(id=1000 + n, from_id=1, to_id=100 + n) for n in range(spokes)]
    client = StandIn(
        get_project=ATLAS,
        get_entity=hub,
        get_neighborhood=graph_pb2.Subgraph(nodes=nodes, edges=links),
        list_entity_aliases=graph_pb2.ListEntityAliasesResponse(),
        list_merges=graph_pb2.ListMergesResponse(),
    )
    async with console(client) as http:
        page = await http.get(f"/projects/{PROJECT}/graph?entity_id=1")
    assert page.status_code == 200
    assert f"Showing {MAX_NODES} of {spokes + 1} entities" in page.text
    assert 'id="graph-cap" hidden' not in page.text


async def test_an_empty_search_playground_says_what_to_try_and_a_degraded_one_why():
    down = "semantic: the embedding server is down"
    hit = memory_pb2.SearchHit(episode=memory_pb2.Episode(id=3), degraded_reason=down)
    client = StandIn(get_project=ATLAS, search_episodes=Stream([hit]))
    async with console(client) as http:
        idle = (await http.get(f"/projects/{PROJECT}/search")).text
        degraded = (await http.get(f"/projects/{PROJECT}/search?q=lisbon")).text
    assert 'id="search-hint"' in idle and "Try a search." in idle and 'id="hits"' not in idle
    assert f"Degraded answer: {down}" in degraded


async def test_no_hits_and_an_empty_graph_say_the_servers_reason_and_draw_nothing():
    reason = "NOTHING_STORED: no exchange is stored in this project yet"
    client = StandIn(
        get_project=ATLAS,
        search_episodes=Stream([], empty_reason=reason),
        get_project_stats=memory_pb2.ProjectStats(),
        list_entities=Answer(graph_pb2.ListEntitiesResponse(), "NOTHING_STORED: no entity"),
    )
    async with console(client) as http:
        search = (await http.get(f"/projects/{PROJECT}/search?q=lisbon")).text
        graph = (await http.get(f"/projects/{PROJECT}/graph")).text
    assert f'No hits. The server says why: <code id="empty-reason">{reason}</code>' in search
    assert 'id="graph-empty"' in graph and "NOTHING_STORED: no entity" in graph
    assert 'id="graph-canvas"' not in graph and 'id="time-slider"' not in graph


async def test_the_static_assets_ship_in_the_package_and_pages_load_nothing_from_elsewhere():
    client = StandIn(
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(top_entity_ids=[1]),
        get_neighbors=graph_pb2.Subgraph(nodes=[graph_pb2.Entity(id=1, name="Alice")]),
    )
    async with console(client) as http:
        for asset in ("/static/vendor/cytoscape.min.js", "/static/graph.js", "/static/console.css"):
            answer = await http.get(asset)
            assert answer.status_code == 200 and len(answer.content) > 500, asset
        page = await http.get(f"/projects/{PROJECT}/graph")
    assert page.status_code == 200
    assert "http://" not in page.text.replace(f"http://{HOST}", "") and "https://" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]


# Every page and its twin ----------------------------------------------------------------------


def _everything() -> StandIn:
    """A stand-in that answers every page's reads: one project, one session
    of alice's with one episode, one memory, one entity, one erasure."""
    said = memory_pb2.Episode(id=5, session_id=1, user_message="I live in Lisbon")
    alice = graph_pb2.Entity(id=1, name="Alice", type="person", project_id=PROJECT)
    erasure = memory_pb2.Erasure(
        id=12, state=memory_pb2.ERASURE_STATE_DONE, user_id="erin",
        counts=memory_pb2.ErasureCounts(sessions=1), planned=memory_pb2.ErasureCounts(sessions=1),
    )  # fmt: skip
    return StandIn(
        list_projects=memory_pb2.ListProjectsResponse(projects=[ATLAS]),
        get_project=ATLAS,
        get_project_stats=memory_pb2.ProjectStats(top_entity_ids=[1]),
        get_service_status=memory_pb2.ServiceStatus(state="SERVING", tenant="acme"),
        get_usage=memory_pb2.GetUsageResponse(
            tenant="acme",
            total=memory_pb2.UsagePeriod(),
            budget=memory_pb2.TenantBudget(tenant="acme"),
        ),  # fmt: skip
        list_sessions=memory_pb2.ListSessionsResponse(
            sessions=[memory_pb2.Session(id=1, project_id=PROJECT, user_id="alice")]
        ),
        get_session=memory_pb2.Session(id=1, project_id=PROJECT, user_id="alice"),
        list_episodes=memory_pb2.ListEpisodesResponse(episodes=[said]),
        get_episode=said,
        list_memories=memory_pb2.ListMemoriesResponse(
            memories=[memory_pb2.Memory(id=3, project_id=PROJECT, content="Alice likes tea")]
        ),
        get_entity=alice,
        get_neighbors=graph_pb2.Subgraph(nodes=[alice]),
        get_neighborhood=graph_pb2.Subgraph(nodes=[alice]),
        list_entity_aliases=graph_pb2.ListEntityAliasesResponse(),
        list_merges=graph_pb2.ListMergesResponse(),
        search_episodes=Stream([memory_pb2.SearchHit(episode=said)]),
        export_user=Stream([memory_pb2.ExportRecord(session=memory_pb2.Session(id=1))]),
        list_erasures=memory_pb2.ListErasuresResponse(erasures=[erasure]),
        get_erasure=erasure,
    )


PAGES = {
    "/": lambda v: [p["name"] for p in v["projects"]] == ["Atlas"],
    "/status": lambda v: v["tenant"] == "acme" and v["usage_window"] == "day",
    f"/projects/{PROJECT}": lambda v: v["sessions"][0]["episodes"][0]["id"] == 5,
    f"/projects/{PROJECT}/episodes/5": lambda v: v["episode"]["user_message"] == "I live in Lisbon",
    f"/projects/{PROJECT}/memories?user_id=alice": lambda v: (
        [m["id"] for m in v["memories"]] == [3]
    ),
    f"/projects/{PROJECT}/graph": lambda v: [n["name"] for n in v["nodes"]] == ["Alice"],
    f"/projects/{PROJECT}/graph?entity_id=1": lambda v: v["entity"]["name"] == "Alice",
    f"/projects/{PROJECT}/search?q=lisbon": lambda v: (
        [h["episode"]["id"] for h in v["hits"]] == [5]
    ),
    "/users?user_id=alice": lambda v: v["counts"]["session"] == 1,
    "/erasures": lambda v: [e["id"] for e in v["erasures"]] == [12],
    "/erasures/12": lambda v: v["erasure"]["finished"],
}


@pytest.mark.parametrize("url", list(PAGES))
async def test_every_page_renders_the_view_its_json_twin_answers(url):
    path, _, query = url.partition("?")
    twin = ("/.json" if path == "/" else f"{path}.json") + (f"?{query}" if query else "")
    async with console(_everything()) as http:
        data, page = await http.get(twin), await http.get(url)
    assert data.status_code == 200 and data.headers["content-type"] == "application/json"
    assert PAGES[url](data.json()), data.json()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Traceback" not in page.text and "{{" not in page.text


async def test_a_change_or_a_forget_the_server_refuses_is_its_status_and_changes_nothing():
    client = StandIn(
        undo_merge=NexusClientError(grpc.StatusCode.FAILED_PRECONDITION, "a later merge", "r"),
        forget_user=NexusClientError(grpc.StatusCode.NOT_FOUND, "user 'bob' holds nothing", "r"),
        get_erasure=memory_pb2.Erasure(id=1),
    )
    async with console(client) as http:
        token = await csrf(http)
        undo = await http.post(f"/projects/{PROJECT}/undo-merge/9", data={"csrf_token": token})
        forget = await http.post(
            "/users/forget", data={"user_id": "bob", "typed_user_id": "bob", "csrf_token": token}
        )
        bad = await http.get("/erasures/x/events")
    assert undo.status_code == 409 and "a later merge" in undo.text
    assert forget.status_code == 404 and "user &#39;bob&#39; holds nothing" in forget.text
    assert bad.status_code == 400 and "erasure_id" in bad.json()["error"]["message"]


async def test_retrying_an_extraction_of_the_projects_episode_queues_it_again():
    client = StandIn(
        get_episode=memory_pb2.Episode(id=5, session_id=1),
        get_session=memory_pb2.Session(id=1, project_id=PROJECT),
        get_project=ATLAS,
        extract_episode=graph_pb2.ExtractEpisodeResponse(queued=1),
    )
    async with console(client) as http:
        token = await csrf(http)
        back = f"/projects/{PROJECT}/episodes/5"
        done = await http.post(
            f"/projects/{PROJECT}/retry-extraction/5", data={"csrf_token": token, "back": back}
        )
    assert done.status_code == 303
    assert done.headers["location"] == (
        f"{back}?done=extraction+of+episode+5+queued+again+%281+job%29"
    )
    assert client.asked("extract_episode") == [{"episode_id": 5}]


async def test_the_timeline_stream_ends_when_the_servers_stream_fails():
    lost = NexusClientError(grpc.StatusCode.UNAVAILABLE, "gone", "r")
    events = Stream([], error=lost)
    client = StandIn(
        get_project=ATLAS,
        get_episode=memory_pb2.Episode(id=1, embedding_state=memory_pb2.JOB_STATE_DONE),
        watch_extractions=events,
    )
    async with console(client) as http:
        await csrf(http)
        answer = await http.get(f"/projects/{PROJECT}/events?episodes=1")
    # The states once, then the end: the page reloads or works on without them.
    assert re.findall(r"^event: (\w+)$", answer.text, re.M) == ["episode"]
    assert events.cancelled
