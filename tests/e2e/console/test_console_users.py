"""A person in the console (issue 45): a user's page (what is held, counted
from ExportUser), their export as a download, forgetting them behind a
confirmation that types the user id, the erasure's page and the receipts
list; in-process (httpx's ASGI transport) in front of a real server over
real gRPC.

Each test that forgets someone forgets a user of its own, so the tests hold
in any order: alice and bob are never forgotten.

What console/people.py decides on its own (the typed id, the download's file
name, an erasure's progress) is tested without a server in
tests/unit/test_console_people.py; what the user page counts of an export and
the receipts list, given a stand-in client, in test_console_pages_people.py;
the routes on that stand-in (the forget form, the download's headers and its
refusal before any byte, a live stream only for a browser that loaded a page,
a user's links on the memories page and the timeline) in
test_console_pages_routes.py. Here, the wiring of each page and endpoint.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from html import unescape
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import pytest_asyncio

from nexus_grpc.client import NexusClient
from nexus_grpc.console.routes import build_app
from nexus_grpc.console.security import CSRF_COOKIE, GuardSettings
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import start_harness, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEAM_KEY = "acme-people-team-key-0000001"
ALICE_KEY = "acme-people-alice-key-000001"
ADMIN_KEY = "acme-people-admin-key-000001"
HOST = "127.0.0.1:8090"
#: Each user's own words: found in their export and nowhere else.
WORDS = {user: f"{user}-canary-{n:04d}" for n, user in enumerate(
    ("alice", "bob", "carol", "dave", "erin", "frank"), start=1000
)}  # fmt: skip


class World:
    def __init__(self, harness, projects: dict[str, int]) -> None:
        self.harness = harness
        self.projects = projects


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("people")
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": TEAM_KEY, "name": "team", "users": "*", "tenant": "acme"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "acme"},
                    {"key": ADMIN_KEY, "name": "ops", "admin": True, "tenant": "acme"},
                ]
            }
        )
    )
    h = await start_harness(tmp / "data", auth_keys_file=str(keys))
    async with NexusClient(h.target, api_key=TEAM_KEY) as team:
        atlas = (await team.create_project(project=memory_pb2.Project(name="Atlas"))).id
        zephyr = (await team.create_project(project=memory_pb2.Project(name="Zephyr"))).id
        # alice: two sessions in Atlas (three episodes), one in Zephyr, a
        # memory in each; everyone else one session, one episode, one memory.
        held = [("alice", atlas, 2), ("alice", atlas, 1), ("alice", zephyr, 1)]
        held += [(u, atlas, 1) for u in WORDS if u != "alice"]
        for user, pid, turns in held:
            session = await team.create_session(
                session=memory_pb2.Session(project_id=pid, user_id=user, name=f"{user}'s chat")
            )
            for turn in range(turns):
                await team.create_episode(
                    session_id=session.id,
                    user_message=f"{WORDS[user]} says hello ({turn})",
                    ai_response="Hello.",
                )
        for user, pid in [("alice", atlas), ("alice", zephyr)] + [(u, atlas) for u in WORDS][1:]:
            await team.create_memory(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER, user_id=user, project_id=pid,
                    title=f"{user}'s note", content=f"{WORDS[user]} likes tea.",
                )
            )  # fmt: skip
    yield World(h, {"atlas": atlas, "zephyr": zephyr})
    await h.close()


class console:
    """An HTTP client of a console app acting with ``key``, as a browser on loopback."""

    def __init__(self, world: World, key: str) -> None:
        self.grpc = NexusClient(world.harness.target, api_key=key)
        guard = GuardSettings(host="127.0.0.1", port=8090, loopback=True)
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=build_app(self.grpc, guard)),
            base_url=f"http://{HOST}",
        )

    async def __aenter__(self) -> httpx.AsyncClient:
        return self.http

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        await self.grpc.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def team(world):
    async with console(world, TEAM_KEY) as c:
        yield c


async def exported(world: World, user_id: str, project_id: int = 0) -> list[dict]:
    """ExportUser over gRPC with the team's key, as plain dicts."""
    from google.protobuf import json_format

    async with NexusClient(world.harness.target, api_key=TEAM_KEY) as client:
        return [
            json_format.MessageToDict(r, preserving_proto_field_name=True)
            async for r in client.export_user(user_id=user_id, project_id=project_id)
        ]


async def csrf(http: httpx.AsyncClient) -> str:
    await http.get("/status.json")
    token = http.cookies.get(CSRF_COOKIE)
    assert token
    return token


def kinds(records: list[dict]) -> Counter[str]:
    return Counter(next(iter(r)) for r in records)


# The user page ------------------------------------------------------------------


async def test_the_user_page_counts_what_the_export_holds(world, team):
    view = (await team.get("/users.json?user_id=alice")).json()
    held = kinds(await exported(world, "alice"))
    assert view["counts"]["session"] == held["session"] == 3
    assert view["counts"]["episode"] == held["episode"] == 4
    assert view["counts"]["memory"] == held["memory"] == 2
    assert view["counts"] == {k: held[k] for k in view["counts"]}
    by_project = {
        p["name"]: (p["sessions"], p["episodes"], p["memories"]) for p in view["projects"]
    }
    assert by_project == {"Atlas": (2, 3, 1), "Zephyr": (1, 1, 1)}
    page = await team.get("/users?user_id=alice")
    assert page.status_code == 200
    rows = dict(
        re.findall(r'<tr data-kind="(\w+)"><td>[^<]*</td><td class="num">(\d+)</td>', page.text)
    )
    assert rows["session"] == "3" and rows["episode"] == "4" and rows["memory"] == "2"
    assert 'href="/users/export.jsonl?user_id=alice"' in page.text
    assert 'href="/users/forget?user_id=alice"' in page.text
    # Limited to one project, as ExportUser is.
    zephyr = world.projects["zephyr"]
    only = (await team.get(f"/users.json?user_id=alice&project_id={zephyr}")).json()
    assert (only["counts"]["session"], only["counts"]["episode"]) == (1, 1)
    assert only["project"]["name"] == "Zephyr"


async def test_a_user_who_holds_nothing_is_the_servers_not_found(world, team):
    for url in ("/users?user_id=nobody", "/users/export.jsonl?user_id=nobody"):
        answer = await team.get(url)
        assert answer.status_code == 404, url
        assert "user &#39;nobody&#39; holds nothing here" in answer.text
        assert "attachment" not in answer.headers.get("content-disposition", "")
    twin = (await team.get("/users.json?user_id=nobody")).json()
    assert twin["error"] == {"code": "NOT_FOUND", "message": "user 'nobody' holds nothing here"}


# The export --------------------------------------------------------------------


async def test_the_export_downloads_the_users_records_and_none_of_another(world, team):
    answer = await team.get("/users/export.jsonl?user_id=alice")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    assert answer.headers["content-disposition"] == 'attachment; filename="export-user-alice.jsonl"'
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert lines == await exported(world, "alice")
    assert WORDS["alice"] in answer.text
    assert not any(WORDS[u] in answer.text for u in WORDS if u != "alice")
    zephyr = world.projects["zephyr"]
    one = await team.get(f"/users/export.jsonl?user_id=alice&project_id={zephyr}")
    assert one.headers["content-disposition"].endswith(f'-project-{zephyr}.jsonl"')
    assert [json.loads(line) for line in one.text.splitlines()] == await exported(
        world, "alice", zephyr
    )


# Forgetting --------------------------------------------------------------------


async def test_forgetting_needs_the_typed_id_and_the_csrf_token_or_changes_nothing(world, team):
    before = await exported(world, "dave")
    confirm = await team.get("/users/forget?user_id=dave")
    assert confirm.status_code == 200
    assert 'data-user-id="dave"' in confirm.text and 'name="typed_user_id"' in confirm.text
    token = await csrf(team)
    # One id not typed exactly (each such value is refused in
    # tests/unit/test_console_people.py): a 400 and the form again, saying why.
    form = {"user_id": "dave", "csrf_token": token, "typed_user_id": "dave "}
    refused = await team.post("/users/forget", data=form)
    assert refused.status_code == 400
    assert "type the user id exactly" in unescape(refused.text)
    assert 'id="typed-user-id"' in refused.text
    typed = {"user_id": "dave", "typed_user_id": "dave"}
    unsigned = await team.post("/users/forget", data=typed)
    assert unsigned.status_code == 403 and "CSRF" in unsigned.text
    forged = await team.post("/users/forget", data={**typed, "csrf_token": "forged"})
    assert forged.status_code == 403
    foreign = await team.post(
        "/users/forget", data={**typed, "csrf_token": token},
        headers={"origin": "http://evil.example"},
    )  # fmt: skip
    assert foreign.status_code == 403
    assert await exported(world, "dave") == before
    async with NexusClient(world.harness.target, api_key=ADMIN_KEY) as admin:
        assert list((await admin.list_erasures(user_id="dave")).erasures) == []


async def test_forgetting_with_the_typed_id_runs_to_done_and_shows_the_receipt(world, team):
    planned = kinds(await exported(world, "carol"))
    token = await csrf(team)
    started = await team.post(
        "/users/forget", data={"user_id": "carol", "typed_user_id": "carol", "csrf_token": token}
    )
    assert started.status_code == 303
    location = urlsplit(started.headers["location"])
    erasure_id = int(location.path.rsplit("/", 1)[1])
    assert location.path == f"/erasures/{erasure_id}"
    assert parse_qs(location.query)["done"] == [
        f"forgetting user 'carol': erasure {erasure_id} started"
    ]

    # The live stream (WatchErasure) follows it to its receipt and ends.
    events = await team.get(f"/erasures/{erasure_id}/events")
    assert events.headers["content-type"].startswith("text/event-stream")
    steps = [json.loads(d) for d in re.findall(r"^event: erasure\ndata: (.*)$", events.text, re.M)]
    assert steps and steps[-1]["finished"] and steps[-1]["state"] == "done"
    assert not any(s["finished"] for s in steps[:-1])

    view = (await team.get(f"/erasures/{erasure_id}.json")).json()["erasure"]
    assert view["state"] == "done" and view["percent"] == 100 and view["end_time"]
    assert view["counts"]["sessions"] == planned["session"] == 1
    assert view["counts"]["episodes"] == planned["episode"] == 1
    assert view["counts"]["memories"] == planned["memory"] == 1
    assert {p["kind"]: (p["done"], p["planned"]) for p in view["progress"]} == {
        "sessions": (1, 1), "episodes": (1, 1), "memories": (1, 1)
    }  # fmt: skip
    assert view["counts"] == steps[-1]["counts"]
    page = await team.get(started.headers["location"])
    assert "The receipt: what went, by kind" in page.text
    assert f"forgetting user &#39;carol&#39;: erasure {erasure_id} started" in page.text
    assert 'http-equiv="refresh"' not in page.text and "erasure.js" not in page.text
    receipt = dict(
        re.findall(r'<tr data-kind="(\w+)"><td>[^<]*</td><td class="num">(\d+)</td>', page.text)
    )
    assert receipt["sessions"] == receipt["episodes"] == receipt["memories"] == "1"
    # carol is gone; bob is as he was.
    gone = await team.get("/users.json?user_id=carol")
    assert gone.status_code == 404 and "holds nothing" in gone.json()["error"]["message"]
    assert (await team.get("/users.json?user_id=bob")).json()["counts"]["episode"] == 1


async def test_a_running_erasure_page_follows_it_with_or_without_javascript(world, team):
    # A reader holding the WAL keeps the erasure in its last step (the disk
    # scrub waits for it and tries again): it is running while we look.
    reader = sqlite3.connect(world.harness.app.settings.data_dir / "nexus.sqlite3")
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM sessions").fetchone()
        async with NexusClient(world.harness.target, api_key=TEAM_KEY) as client:
            started = await client.forget_user(user_id="frank")

            async def scrubbing() -> bool:
                return (await client.get_erasure(id=started.id)).phase == "disk"

            await wait_until(scrubbing, timeout=30)
        running = (await team.get(f"/erasures/{started.id}")).text
        assert '<span id="erasure-state" class="state pending"><b>running</b>' in running
        assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in running
        assert '<script src="/static/erasure.js" defer>' in running
        assert '<dd id="erasure-end">not yet</dd>' in running
    finally:
        reader.rollback()
        reader.close()

    async def finished() -> bool:
        return (await team.get(f"/erasures/{started.id}.json")).json()["erasure"]["finished"]

    await wait_until(finished, timeout=30)
    done = (await team.get(f"/erasures/{started.id}")).text
    assert 'http-equiv="refresh"' not in done and "erasure.js" not in done


# Who may ------------------------------------------------------------------------


async def test_a_user_key_cannot_reach_another_users_page_export_or_forget(world):
    async with console(world, ALICE_KEY) as alice:
        assert (await alice.get("/users.json?user_id=alice")).json()["counts"]["session"] == 3
        for url in ("/users.json?user_id=bob", "/users/export.jsonl?user_id=bob"):
            answer = await alice.get(url)
            assert answer.status_code == 404, url
            assert WORDS["bob"] not in answer.text
        assert "user 'bob' holds nothing here" in (await alice.get("/users.json?user_id=bob")).text
        token = await csrf(alice)
        refused = await alice.post(
            "/users/forget", data={"user_id": "bob", "typed_user_id": "bob", "csrf_token": token}
        )
        assert refused.status_code == 404
        assert "user &#39;bob&#39; holds nothing here" in refused.text
    assert kinds(await exported(world, "bob"))["episode"] == 1


async def test_only_an_admin_key_lists_the_receipts(world, team):
    async with NexusClient(world.harness.target, api_key=TEAM_KEY) as client:
        started = await client.forget_user(user_id="erin")
        await wait_until(lambda: _done(client, started.id), timeout=30)
    refused = await team.get("/erasures")
    assert refused.status_code == 403 and "PERMISSION_DENIED" in refused.text
    assert (await team.get("/erasures.json")).json()["error"]["code"] == "PERMISSION_DENIED"
    async with console(world, ADMIN_KEY) as admin:
        listed = (await admin.get("/erasures.json")).json()
        row = next(e for e in listed["erasures"] if e["id"] == started.id)
        assert row["user_id"] == "" and row["state"] == "done"  # no one named the user
        named = (await admin.get("/erasures.json?user_id=erin")).json()
        assert [(e["id"], e["user_id"]) for e in named["erasures"]] == [(started.id, "erin")]
        page = await admin.get("/erasures?user_id=erin")
        assert f'<a href="/erasures/{started.id}">{started.id}</a>' in page.text
        assert "user <code>erin</code>" in page.text


async def _done(client: NexusClient, erasure_id: int) -> bool:
    return (await client.get_erasure(id=erasure_id)).state == memory_pb2.ERASURE_STATE_DONE
