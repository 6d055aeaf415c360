"""The console's pages, JSON twins and defences, in-process (httpx's ASGI
transport) in front of a real server over real gRPC.

One server and one data set serve the module: a project with PROJECT and
USER memories of two users and a small graph with a fact that ended.

The rules the console's own modules decide are tested without a server in
tests/unit: the guard's (the Host on loopback, another origin, CSRF, logins,
where a go-back link may lead) in test_console_guard.py, a page's query
string refused before the server is asked in test_console_params.py, the
graph's data and its cap in test_console_graph_data.py; what each page builds
from the server's answers, given a stand-in client, in
test_console_pages_reads.py; and the routes on that stand-in (the HTTP status
of each gRPC status and of a bad query string, as a page and as JSON, the
go-back link, the static assets, what a page renders of a capped graph, an
empty or a degraded search) in test_console_pages_routes.py, and the login form (a wrong
token, too many, the cookie over TLS, the logout) in test_console_pages_login.py.
Here each page and defence keeps the test of its wiring: a foreign Host, a
login beyond loopback, a change behind its confirmation and CSRF token, a bad
query string and the server's not found of a project, an episode and a memory,
answered as a page and as its JSON twin.
"""

from __future__ import annotations

import json
import re
import time
from html import unescape

import httpx
import pytest
import pytest_asyncio
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient
from nexus_grpc.console.routes import build_app
from nexus_grpc.console.security import CSRF_COOKIE, LOGIN_COOKIE, GuardSettings
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import HashingEmbedder, start_harness, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEAM_KEY = "acme-console-team-key-000001"
ALICE_KEY = "acme-console-alice-key-00001"
#: Another tenant's key: its projects are not the world's tenant's to see.
GLOBEX_KEY = "globex-console-team-key-0001"
HOST = "127.0.0.1:8090"
DAY = 86_400


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromSeconds(int(seconds))
    return t


class World:
    def __init__(self, harness, project_id: int, ids: dict[str, int]) -> None:
        self.harness = harness
        self.project_id = project_id
        self.ids = ids


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": TEAM_KEY, "name": "team", "users": "*", "tenant": "acme"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "acme"},
                    {"key": GLOBEX_KEY, "name": "globex", "users": "*", "tenant": "globex"},
                ]
            }
        )
    )
    embedder = HashingEmbedder()
    h = await start_harness(tmp / "data", embedder=embedder, auth_keys_file=str(keys))
    ids: dict[str, int] = {}
    async with NexusClient(h.target, api_key=TEAM_KEY) as team:
        project = await team.create_project(project=memory_pb2.Project(name="Atlas"))
        pid = project.id
        session = await team.create_session(
            session=memory_pb2.Session(project_id=pid, user_id="alice", name="alice's chat")
        )
        ids["session"] = session.id
        episode = await team.create_episode(
            session_id=session.id, user_message="I live in Lisbon", ai_response="Noted."
        )
        ids["episode"] = episode.id

        async def memory(title: str, kind, user_id: str = "", tier=memory_pb2.TIER_LONGTERM):
            stored = await team.create_memory(
                memory=memory_pb2.Memory(
                    kind=kind, title=title, content=f"{title}.", tier=tier, project_id=pid,
                    user_id=user_id,
                )
            )  # fmt: skip
            return stored.id

        ids["project_memory"] = await memory("The team ships on Fridays", 1)
        ids["alice_memory"] = await memory("Alice likes tea", 2, "alice")
        ids["alice_archived"] = await memory("Alice liked coffee", 2, "alice", 4)
        ids["bob_memory"] = await memory("Bob plays chess", 2, "bob")

        def entity(name: str, kind: str = "person"):
            return team.upsert_entity(name=name, type=kind, project_id=pid)

        alice, lisbon, porto = (
            await entity("Alice"), await entity("Lisbon", "place"), await entity("Porto", "place")
        )  # fmt: skip
        ids.update(alice=alice.id, lisbon=lisbon.id, porto=porto.id)
        now = time.time()
        await team.upsert_relationship(
            from_id=alice.id, to_id=lisbon.id, label="lives_in", valid_time=ts(now - 60 * DAY)
        )
        await team.upsert_relationship(
            from_id=alice.id, to_id=porto.id, label="lives_in", valid_time=ts(now - 10 * DAY)
        )
        yield World(h, pid, ids)
    await h.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team(world):
    async with console(world, TEAM_KEY) as c:
        yield c


class console:
    """An HTTP client of a console app acting with ``key``, as a browser on loopback."""

    def __init__(self, world: World, key: str, guard: GuardSettings | None = None) -> None:
        self.grpc = NexusClient(world.harness.target, api_key=key)
        self.guard = guard or GuardSettings(host="127.0.0.1", port=8090, loopback=True)
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=build_app(self.grpc, self.guard)),
            base_url=f"http://{HOST}",
        )

    async def __aenter__(self) -> httpx.AsyncClient:
        return self.http

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        await self.grpc.close()


# Pages and their twins -------------------------------------------------------


async def test_every_page_and_its_json_twin_show_the_same_data(world, team):
    pid, ids = world.project_id, world.ids
    pages = {
        "/": lambda v: [p["id"] for p in v["projects"]] == [pid],
        "/status": lambda v: v["state"] in ("SERVING", "DEGRADED") and v["tenant"] == "acme",
        f"/projects/{pid}": lambda v: v["sessions"][0]["episodes"][0]["id"] == ids["episode"],
        f"/projects/{pid}/episodes/{ids['episode']}": lambda v: (
            v["episode"]["user_message"] == "I live in Lisbon"
        ),
        f"/projects/{pid}/memories?user_id=alice": lambda v: (
            {m["id"] for m in v["memories"]} == {ids["project_memory"], ids["alice_memory"]}
        ),
        f"/projects/{pid}/graph?entity_id={ids['alice']}": lambda v: (
            {n["name"] for n in v["nodes"]} == {"Alice", "Porto"}
        ),
        f"/projects/{pid}/search?q=Lisbon&mode=keyword": lambda v: (
            [h["episode"]["id"] for h in v["hits"]] == [ids["episode"]]
        ),
    }
    for url, holds in pages.items():
        path, _, query = url.partition("?")
        twin = ("/.json" if path == "/" else f"{path}.json") + (f"?{query}" if query else "")
        page, data = await team.get(url), await team.get(twin)
        assert page.status_code == 200, (url, page.text[:300])
        assert page.headers["content-type"].startswith("text/html")
        assert data.status_code == 200, (twin, data.text[:300])
        view = data.json()
        assert holds(view), (url, view)
        # The page shows what its twin holds.
        for project in view.get("projects", []):
            assert project["name"] in page.text


async def test_the_project_list_counts_what_the_project_holds(world, team):
    [row] = (await team.get("/.json")).json()["projects"]
    stats = row["stats"]
    assert (stats["sessions"], stats["episodes"]) == (1, 1)
    assert (stats["project_memories"], stats["user_memories"]) == (1, 3)
    assert stats["entities"] == 3


async def test_the_memories_page_puts_live_ones_first_and_archived_apart(world, team):
    pid, ids = world.project_id, world.ids
    live = (await team.get(f"/projects/{pid}/memories.json?user_id=alice")).json()
    assert ids["alice_archived"] not in {m["id"] for m in live["memories"]}
    assert live["archived"] == []
    url = f"/projects/{pid}/memories.json?user_id=alice&include_archived=1"
    both = (await team.get(url)).json()
    assert [m["id"] for m in both["archived"]] == [ids["alice_archived"]]
    assert all(m["live"] for m in both["memories"]) and not both["archived"][0]["live"]
    assert [u["user_id"] for u in both["users"]] == ["alice", "bob"]
    page = await team.get(f"/projects/{pid}/memories?user_id=alice&include_archived=1")
    assert page.text.index("Alice likes tea") < page.text.index("Alice liked coffee")


async def test_the_graph_as_of_a_past_date_shows_the_fact_that_held_then(world, team):
    pid, alice = world.project_id, world.ids["alice"]
    past = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 30 * DAY))
    then = (await team.get(f"/projects/{pid}/graph.json?entity_id={alice}&as_of={past}")).json()
    assert [(e["from_name"], e["label"], e["to_name"]) for e in then["edges"]] == [
        ("Alice", "lives_in", "Lisbon")
    ]
    now = (await team.get(f"/projects/{pid}/graph.json?entity_id={alice}")).json()
    assert [e["to_name"] for e in now["edges"]] == ["Porto"]
    history = (
        await team.get(f"/projects/{pid}/graph.json?entity_id={alice}&include_history=1")
    ).json()
    ended = [e for e in history["edges"] if not e["current"]]
    assert [(e["to_name"], e["invalid_time"] is not None) for e in ended] == [("Lisbon", True)]
    # Where the graph changes, for the slider's marks.
    assert len(then["slider"]["marks"]) == 2


# Bad input and errors --------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("/projects/{pid}/graph.json?as_of=yesterday", 400, "as_of: must be an RFC 3339 time"),
        ("/projects/999999.json", 404, "project 999999 does not exist"),
        ("/projects/{pid}/episodes/999999.json", 404, "episode 999999 does not exist"),
        ("/projects/{pid}/memories.json?user_id=alice&memory_id=999999", 404, "memory 999999"),
    ],
)  # fmt: skip
async def test_bad_input_answers_its_status_and_what_is_wrong(world, team, url, status, says):
    answer = await team.get(url.format(pid=world.project_id))
    assert answer.status_code == status, answer.text
    assert says in answer.json()["error"]["message"]
    html = await team.get(url.replace(".json", "").format(pid=world.project_id))
    assert html.status_code == status and says in html.text
    assert "Traceback" not in html.text


async def test_an_unreachable_server_shows_its_status_and_no_stack_trace(world):
    dead = NexusClient("127.0.0.1:1", api_key=TEAM_KEY, timeout=2)
    app = build_app(dead, GuardSettings(host="127.0.0.1", port=8090, loopback=True))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=f"http://{HOST}"
    ) as http:
        page = await http.get("/")
        twin = await http.get("/.json")
    await dead.close()
    assert page.status_code == 503 and "UNAVAILABLE" in page.text
    assert "Traceback" not in page.text and 'File "' not in page.text
    assert "cannot reach its nexus-grpc server" in page.text
    error = twin.json()["error"]
    assert error["code"] == "UNAVAILABLE"
    assert error["message"].startswith("the console cannot reach its nexus-grpc server: is it")
    # The transport's own words (the target's address, the socket's error)
    # are for the console's log, not for the browser.
    for shown in (page.text, twin.text):
        assert "127.0.0.1:1" not in shown and "ipv4" not in shown and "refused" not in shown


# A user key ------------------------------------------------------------------


async def test_a_user_keys_console_shows_nothing_of_another_user(world):
    pid = world.project_id
    async with console(world, ALICE_KEY) as alice:
        [row] = (await alice.get("/.json")).json()["projects"]
        assert row["stats"]["user_memories"] == 2  # alice's two; bob's is not counted
        listing = (await alice.get(f"/projects/{pid}/memories.json?user_id=alice")).json()
        assert [u["user_id"] for u in listing["users"]] == ["alice"]
        bob = await alice.get(f"/projects/{pid}/memories?user_id=bob")
        assert bob.status_code == 403 and "Bob plays chess" not in bob.text
        found = await alice.get(f"/projects/{pid}/search.json?q=chess&kind=memories&user_id=bob")
        assert found.status_code == 403
        # The memories page without a user shows PROJECT memories only.
        page = await alice.get(f"/projects/{pid}/memories")
        assert "Bob plays chess" not in page.text and "ships on Fridays" in page.text


# Defences ----------------------------------------------------------------------


async def test_a_foreign_host_is_refused_on_loopback(world, team):
    answer = await team.get("/", headers={"host": "evil.example:8090"})
    assert answer.status_code == 403 and "is not this console's address" in answer.text
    assert "Atlas" not in answer.text


async def _csrf(http: httpx.AsyncClient) -> str:
    await http.get("/status.json")
    token = http.cookies.get(CSRF_COOKIE)
    assert token
    return token


async def test_a_change_needs_the_csrf_token_and_then_happens(world, team):
    pid, memory_id = world.project_id, world.ids["bob_memory"]
    confirm = await team.get(f"/projects/{pid}/delete-memory/{memory_id}?user_id=bob")
    assert confirm.status_code == 200 and "Delete memory" in confirm.text
    token = await _csrf(team)
    assert (
        f'value="{token}"'
        in (await team.get(f"/projects/{pid}/delete-memory/{memory_id}?user_id=bob")).text
    )
    url = f"/projects/{pid}/delete-memory/{memory_id}"
    refused = await team.post(url, data={"user_id": "bob", "csrf_token": "forged"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    foreign = await team.post(
        url, data={"user_id": "bob", "csrf_token": token}, headers={"origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    listing = (await team.get(f"/projects/{pid}/memories.json?user_id=bob")).json()
    assert memory_id in {m["id"] for m in listing["memories"]}  # nothing was deleted
    done = await team.post(
        url, data={"user_id": "bob", "csrf_token": token, "back": f"/projects/{pid}/memories"}
    )
    assert done.status_code == 303 and "deleted" in done.headers["location"]
    listing = (await team.get(f"/projects/{pid}/memories.json?user_id=bob")).json()
    assert memory_id not in {m["id"] for m in listing["memories"]}


async def test_beyond_loopback_every_page_asks_for_the_token(world):
    guard = GuardSettings(host="0.0.0.0", port=8090, loopback=False, login_token="t" * 32)
    async with console(world, TEAM_KEY, guard) as http:
        first = await http.get("/projects/1?x=1")
        assert first.status_code == 303
        assert first.headers["location"] == "/login?next=%2Fprojects%2F1%3Fx%3D1"
        assert (await http.get("/.json")).status_code == 401
        login = await http.get("/login?next=/status")
        assert login.status_code == 200 and 'name="token"' in login.text
        token = http.cookies.get(CSRF_COOKIE)
        wrong = await http.post("/login", data={"token": "nope", "csrf_token": token})
        assert wrong.status_code == 401 and LOGIN_COOKIE not in http.cookies
        unsigned = await http.post("/login", data={"token": "t" * 32})  # no CSRF token
        assert unsigned.status_code == 403 and LOGIN_COOKIE not in http.cookies
        right = await http.post(
            "/login", data={"token": "t" * 32, "csrf_token": token, "next": "//evil.example/"}
        )
        assert right.status_code == 303 and right.headers["location"] == "/"
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Max-Age=43200" in cookie
        assert "Secure" not in cookie  # plain HTTP: the browser would never send it back
        assert "t" * 32 not in cookie  # a value of this login's own, not the token
        value = http.cookies.get(LOGIN_COOKIE)
        page = await http.get("/status")
        assert page.status_code == 200 and 'action="/logout"' in page.text
        again = await http.post("/login", data={"token": "t" * 32, "csrf_token": token})
        assert http.cookies.get(LOGIN_COOKIE) not in (value, None)  # each login its own value
        assert again.status_code == 303
        out = await http.post("/logout", data={"csrf_token": token})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert "Max-Age=0" in out.headers["set-cookie"]
        assert (await http.get("/.json")).status_code == 401
        http.cookies.set(LOGIN_COOKIE, value)  # the first login is still good
        assert (await http.get("/.json")).status_code == 200
    async with console(world, TEAM_KEY, guard) as script:
        bearer = {"authorization": "Bearer " + "t" * 32}
        # Beyond loopback the Host is the operator's name for the machine.
        answer = await script.get("/.json", headers={**bearer, "host": "console.lan:8090"})
        assert answer.status_code == 200


async def test_the_api_key_never_reaches_the_browser(world, team):
    pid, ids = world.project_id, world.ids
    history = f"/projects/{pid}/memories?user_id=alice&memory_id={ids['alice_memory']}"
    urls = ["/", "/status", f"/projects/{pid}", f"/projects/{pid}/graph", "/.json", history]
    for url in [*urls, "/status.json", f"/projects/{pid}/memories?user_id=alice"]:
        answer = await team.get(url)
        assert TEAM_KEY not in answer.text
        assert all(TEAM_KEY not in v for v in answer.headers.values())
        assert "default-src 'self'" in answer.headers["content-security-policy"]


async def test_retrying_dead_letters_is_confirmed_and_needs_the_csrf_token(world, team):
    confirm = await team.get("/retry-failed-extractions")
    assert confirm.status_code == 200 and "Run every failed extraction" in confirm.text
    refused = await team.post("/retry-failed-extractions", data={"csrf_token": "forged"})
    assert refused.status_code == 403
    token = await _csrf(team)
    done = await team.post("/retry-failed-extractions", data={"csrf_token": token})
    assert done.status_code == 303
    assert done.headers["location"].startswith("/status?done=0+failed")


async def test_the_search_playground_shows_each_stages_rank_and_score(world, team):
    pid, episode_id = world.project_id, world.ids["episode"]

    async def embedded() -> bool:
        found = await team.get(f"/projects/{pid}/episodes/{episode_id}.json")
        return found.json()["episode"]["embedding_state"] == "done"

    await wait_until(embedded)
    url = f"/projects/{pid}/search.json?q=Lisbon&mode=hybrid"
    view = (await team.get(url)).json()
    [hit] = view["hits"]
    assert hit["episode"]["id"] == episode_id
    # explain is asked: every stage the pipeline ran, in its order.
    assert view["stages"][:3] == ["keyword", "semantic", "fused"]
    scores = hit["stage_scores"]
    assert [scores[s]["rank"] for s in ("keyword", "semantic", "fused")] == [1, 1, 1]
    assert scores["keyword"]["note"] == "matched: lisbon"
    assert scores["semantic"]["score"] > 0 and scores["fused"]["score"] == hit["score"]
    # No reranker here: the stage says it was skipped, and why.
    assert scores["reranked"]["rank"] == 0 and "skipped" in scores["reranked"]["note"]

    # A note every hit shares, of a stage that ranked none, is said once.
    assert view["stage_notes"] == {"reranked": scores["reranked"]["note"]}

    page = (await team.get(url.replace(".json", ""))).text
    headers = dict(re.findall(r'<th scope="col" class="num" data-stage="(\w+)">(.*?)</th>', page))
    assert list(headers) == view["stages"]
    assert "skipped: no reranker" in headers["reranked"]
    assert "stage-note" not in headers["keyword"]
    [row] = re.findall(r'<tr class="hit">(.*?)</tr>', page, re.S)
    cells = dict(re.findall(r'<td class="num stage" data-stage="(\w+)">(.*?)</td>', row, re.S))
    for stage in ("keyword", "semantic", "fused"):
        shown = f'<span class="stage-score"><b>#1</b> {scores[stage]["score"]:.4g}</span>'
        assert cells[stage].startswith(shown), cells[stage]
    assert "matched: lisbon" in cells["keyword"]
    assert cells["reranked"] == '<span title="not found at this stage">—</span>'


# What the console says of empty views and of the service --------------------


async def test_empty_views_say_the_servers_reason(world):
    # A project of another tenant: the world's own pages stay as they are.
    async with console(world, GLOBEX_KEY) as team:
        pid = (await globex_project(world, "Empty")).id
        await _empty_views(team, pid)


async def globex_project(world: World, name: str):
    async with NexusClient(world.harness.target, api_key=GLOBEX_KEY) as globex:
        return await globex.create_project(project=memory_pb2.Project(name=name))


async def _empty_views(team: httpx.AsyncClient, pid: int) -> None:
    search = (await team.get(f"/projects/{pid}/search.json?q=lisbon")).json()
    assert search["hits"] == []
    assert search["empty_reason"] == "NOTHING_STORED: no exchange is stored in this project yet"
    page = await team.get(f"/projects/{pid}/search?q=lisbon")
    assert "No hits. The server says why: <code" in page.text
    assert "NOTHING_STORED: no exchange is stored in this project yet" in page.text

    memories = (await team.get(f"/projects/{pid}/memories.json?user_id=alice")).json()
    assert memories["memories"] == [] and memories["empty_reason"].startswith("NOTHING_STORED: ")
    page = await team.get(f"/projects/{pid}/memories?user_id=alice")
    assert unescape(memories["empty_reason"]) in unescape(page.text)

    graph = (await team.get(f"/projects/{pid}/graph.json")).json()
    assert graph["empty"] and graph["slider"] is None
    assert graph["empty_reason"].startswith("NOTHING_STORED: no entity is stored in this graph")
    page = await team.get(f"/projects/{pid}/graph")
    assert 'id="graph-empty"' in page.text and graph["empty_reason"] in unescape(page.text)
    # No blank canvas, no slider with nothing to drag.
    assert 'id="graph-canvas"' not in page.text and 'id="time-slider"' not in page.text


async def test_the_status_page_says_off_where_a_dependency_is_not_configured(world, team):
    view = (await team.get("/status.json")).json()
    reranker = next(d for d in view["dependencies"] if d["name"] == "reranker")
    assert reranker["off"] and reranker["ok"]  # what the server says: not configured
    page = (await team.get("/status")).text
    [row] = re.findall(r'<tr data-dependency="reranker">(.*?)</tr>', page)
    state = re.findall(r"<td[^>]*>(.*?)</td>", row)[1]
    assert state == "off" and 'class="good"' not in row  # as doctor says, never a green ok
    # No sentence that reads like a count, and no reset time for no budget.
    assert "One failed extraction" not in page and 'id="failed-extractions"' not in page
    assert "; no daily budget is set for this tenant." in page and "resets" not in page
