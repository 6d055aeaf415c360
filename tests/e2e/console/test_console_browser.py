"""The console as a person sees it: Debian's chromium, driven by Playwright
(pointed at /usr/bin/chromium; no browser is downloaded), in front of the
real ``nexus-grpc console`` command and a real server whose LLM is the
Ollama stand-in with scripted answers (tests/e2e/console/world.py).

One browser, one server and two consoles (a key for every user, and a key
that may act only for alice) serve the whole module. What needs no browser
but needs the scripted world (what an episode produced, the dates of old
episodes, live streams held open) is asked of the same consoles over plain
HTTP. The slider's range over the facts of 2024 is computed without a server
(tests/unit/test_console_graph_data.py, from the walk with every interval in
test_console_pages_reads.py).
"""

from __future__ import annotations

import contextlib
import json
import re
from datetime import datetime
from urllib.parse import urlencode

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, async_playwright, expect

from nexus_grpc.client import NexusClient, NexusResourceExhausted
from nexus_grpc.console.live import PER_BROWSER, TOTAL
from nexus_grpc.console.security import CSRF_COOKIE
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.e2e.console.world import (
    APRIL_15,
    CHROMIUM,
    CHROMIUM_FLAGS,
    HELD,
    World,
    build,
    start_console,
)
from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub
from tests.support import wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEAM_KEY = "acme-browser-team-key-000001"
ALICE_KEY = "acme-browser-alice-key-00001"
# A name another site could rebind to 127.0.0.1 (DNS rebinding), resolved here.
FLAGS = [*CHROMIUM_FLAGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1"]
WAIT_MS = 20_000


class Setup:
    def __init__(self, harness, world: World, team: str, alice: str, port: int) -> None:
        self.harness, self.world, self.team, self.alice, self.port = (
            harness, world, team, alice, port
        )  # fmt: skip


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    keys = tmp / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": TEAM_KEY, "name": "team", "users": "*", "tenant": "acme"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "acme"},
                ]
            }
        )
    )
    with OllamaStub() as stub:
        h = await start_graph_harness(tmp / "data", stub, auth_keys_file=str(keys))
        team_console = alice_console = None
        world = None
        try:
            async with NexusClient(h.target, api_key=TEAM_KEY) as client:
                world = await build(client, stub)
            team_console = await start_console(h.target, TEAM_KEY)
            alice_console = await start_console(h.target, ALICE_KEY)
            yield Setup(h, world, team_console.url, alice_console.url, team_console.port)
        finally:
            if world is not None:
                world.release.set()
            for running in (team_console, alice_console):
                if running is not None:
                    await running.stop()
            await h.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser():
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Browser):
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    await context.close()
    assert not errors, errors  # no script failed on any page the test opened


async def test_the_status_page_shows_the_llm_usage_a_person_reads(setup, page):
    # Before the held episode's test: the world's extractions are all done.
    async with NexusClient(setup.harness.target, api_key=TEAM_KEY) as client:
        report = await client.get_usage()
    stages = {s.stage: s for s in report.total.stages}
    extraction = stages["extraction"]
    assert extraction.calls == len(setup.world.episodes)  # one call an episode
    await page.goto(f"{setup.team}/status")
    await expect(page.locator("#usage-chart")).to_be_visible()
    await expect(page.locator("#usage-chart rect[data-stage='extraction']")).to_have_count(1)
    row = page.locator("#usage-stages tbody tr[data-stage='extraction'] td")
    await expect(row).to_have_text(
        [
            "extraction", f"{extraction.calls:,}", f"{extraction.prompt_tokens:,}",
            f"{extraction.completion_tokens:,}", f"{extraction.seconds:.1f}",
            f"ok {extraction.calls}",
        ]
    )  # fmt: skip
    today = report.budget.llm_tokens_today
    assert today > 0
    await expect(page.locator("#budget")).to_contain_text(
        f"Today: {today:,} tokens; no daily budget"
    )


async def test_the_slider_moved_to_a_past_date_shows_the_fact_that_held_then(setup, page):
    w = setup.world
    await page.goto(f"{setup.team}/projects/{w.project_id}/graph?entity_id={w.entities['alice']}")
    facts = page.locator("#facts tbody")
    await expect(facts).to_contain_text("Porto")
    await expect(facts).not_to_contain_text("Lisbon")
    # Drawn: cytoscape put its canvases in the box, one node per entity listed.
    await expect(page.locator("#graph-canvas canvas").first).to_be_attached()
    await expect(page.locator("#graph-canvas")).to_have_attribute("data-drawn", "3")
    await expect(page.locator("#slider-box")).to_be_visible()

    slider = json.loads(await page.locator("#graph-data").text_content())["slider"]
    start, end = (datetime.fromisoformat(slider[k]).timestamp() for k in ("min", "max"))
    april = datetime.fromisoformat(APRIL_15).timestamp()
    position = round((april - start) / (end - start) * 1000)
    await page.locator("#time-slider").evaluate(
        "(s, v) => { s.value = v; s.dispatchEvent(new Event('input', {bubbles: true})); }",
        position,
    )
    await expect(facts).to_contain_text("Lisbon", timeout=WAIT_MS)
    await expect(facts).not_to_contain_text("Porto")
    await expect(page.locator("#slider-label")).to_contain_text("2024-04")
    # The words around the drawing follow the slider.
    await expect(page.locator("#graph-when")).to_have_text(
        re.compile(r"^Facts that held at 2024-04")
    )
    await expect(page.locator("#now-link")).to_be_visible()
    assert "as_of=2024-04" in page.url  # the state is in the URL: a link shows the same
    # Back to now: today's fact again.
    await page.locator("#time-slider").evaluate(
        "s => { s.value = 1000; s.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    await expect(facts).to_contain_text("Porto", timeout=WAIT_MS)
    await expect(facts).not_to_contain_text("Lisbon")
    await expect(page.locator("#graph-when")).to_have_text("Facts that hold now.")
    await expect(page.locator("#now-link")).to_be_hidden()
    # The date field is read as UTC, and says so.
    await expect(page.get_by_label("As of (UTC)")).to_be_visible()


async def test_a_formed_memory_links_to_its_episode_and_its_history_shows_the_superseding_one(
    setup, page
):
    w = setup.world
    lisbon, porto = w.memories["lisbon"], w.memories["porto"]
    await page.goto(f"{setup.team}/projects/{w.project_id}/memories")
    # An operator finds the user from the page itself.
    await page.get_by_role("link", name="alice", exact=True).click()
    await page.get_by_label("include archived").check()
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator("#archived")).to_contain_text("The user lives in Lisbon.")
    await expect(page.locator("#memories")).to_contain_text("The user lives in Porto.")
    await expect(page.locator("#memories")).not_to_contain_text("Lisbon")

    await page.locator(f"#archived tr[data-memory='{lisbon}']").get_by_text("history").click()
    panel = page.locator("#history")
    await expect(panel).to_contain_text(f"superseded by memory {porto}")
    await expect(panel).to_contain_text("the user moved")
    await expect(panel).to_contain_text(f"episode {w.episodes['porto']}")

    await page.locator(f"#memories tr[data-memory='{porto}'] a.episode-link").click()
    await expect(page.locator("h1")).to_have_text(f"Episode {w.episodes['porto']}")
    await expect(page.locator("main")).to_contain_text("I moved to Porto last week.")


async def test_a_finished_extraction_turns_its_episodes_state_without_a_reload(setup, page):
    w = setup.world
    async with NexusClient(setup.harness.target, api_key=TEAM_KEY) as client:
        held = await client.create_episode(
            session_id=w.alice_session, user_message=HELD, ai_response="I will."
        )
    await page.goto(f"{setup.team}/projects/{w.project_id}?session_id={w.alice_session}")
    badge = page.locator(f"#episode-{held.id} [data-job='extraction']")
    await expect(badge).to_have_class(re.compile(r"\bpending\b"))
    await page.evaluate("window.__samePage = true")
    w.release.set()
    await expect(badge).to_have_class(re.compile(r"\bdone\b"), timeout=WAIT_MS)
    await expect(badge).to_contain_text("done")
    assert await page.evaluate("window.__samePage === true")  # no reload happened


async def test_undo_of_a_merge_splits_the_node(setup, page):
    w = setup.world
    base = f"{setup.team}/projects/{w.project_id}/graph"
    await page.goto(base)
    entities = page.locator("#entities tbody")
    # One node, Bob, known also as Robert.
    await expect(entities.get_by_role("link", name="Bob", exact=True)).to_have_count(1)
    await expect(entities.get_by_role("link", name="Robert", exact=True)).to_have_count(0)
    await expect(entities).to_contain_text("also Robert")
    await page.goto(f"{base}?entity_id={w.entities['bob']}")
    await expect(page.locator("#facts")).to_contain_text("works_at")  # Robert's, moved to Bob
    await page.locator(f"#merges tr[data-merge='{w.merge_id}']").get_by_text("undo").click()
    await expect(page.locator("h1")).to_have_text("Are you sure?")
    await page.get_by_role("button", name="Yes, do it").click()
    await expect(page.locator(".notice")).to_contain_text(f"merge {w.merge_id} undone")
    await expect(page.locator("#merges")).to_contain_text("undone")
    await expect(page.locator("h1")).to_have_text("Graph: Bob")  # back where it started
    await page.goto(base)
    await expect(entities.get_by_role("link", name="Robert", exact=True)).to_have_count(1)
    await expect(entities.get_by_role("link", name="Bob", exact=True)).to_have_count(1)
    await expect(entities).not_to_contain_text("also Robert")


async def test_a_foreign_host_header_is_refused(setup, page):
    answer = await page.goto(f"http://rebind.test:{setup.port}/")
    assert answer is not None and answer.status == 403
    await expect(page.locator("body")).to_contain_text("is not this console's address")
    await expect(page.locator("body")).not_to_contain_text("Atlas")


async def test_a_user_keys_console_shows_nothing_of_another_user(setup, page):
    w = setup.world
    answer = await page.goto(f"{setup.alice}/projects/{w.project_id}/memories?user_id=bob")
    assert answer is not None and answer.status == 403
    await expect(page.locator("#error-message")).to_contain_text("bob")
    await expect(page.locator("main")).not_to_contain_text("chess")
    await page.goto(f"{setup.alice}/projects/{w.project_id}/memories")
    users = page.locator(".users")
    await expect(users).to_contain_text("alice")
    await expect(users).not_to_contain_text("bob")
    await page.goto(f"{setup.alice}/")
    row = page.locator(f"#projects tr[data-project='{w.project_id}']")
    await expect(row).to_contain_text("2 user")  # alice's two (one archived); not bob's
    await page.goto(f"{setup.team}/")
    await expect(page.locator(f"#projects tr[data-project='{w.project_id}']")).to_contain_text(
        "3 user"
    )


# The hubs' drawing ------------------------------------------------------------

CY = "document.getElementById('graph-canvas')._cyreg.cy"  # cytoscape's own registry


async def _drawn(page) -> dict:
    """Where each entity is drawn, and whether it is shown, faded or hidden."""
    await expect(page.locator("#graph-canvas")).to_have_attribute("data-drawn", re.compile(r"\d"))
    return await page.evaluate(
        f"""() => Object.fromEntries({CY}.nodes().map(n => [n.data('name'), {{
            x: Math.round(n.position('x')), y: Math.round(n.position('y')),
            shown: n.visible(), faded: n.hasClass('idle')}}]))"""
    )


async def test_the_hubs_are_drawn_alike_on_every_load_as_they_stood_and_labelled_apart(setup, page):
    base = f"{setup.team}/projects/{setup.world.project_id}/graph"
    await page.goto(base)
    now = await _drawn(page)
    # Lisbon has no fact now (Alice moved): drawn, but told apart.
    assert now["Lisbon"] == {**now["Lisbon"], "shown": True, "faded": True}
    assert all(n["shown"] and not n["faded"] for name, n in now.items() if name != "Lisbon")
    # No label sits on another: every drawn entity's box, its label included.
    boxes = await page.evaluate(
        f"""() => {CY}.nodes(':visible').map(n => n.boundingBox({{includeLabels: true}}))"""
    )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = (
                a["x2"] <= b["x1"] or b["x2"] <= a["x1"] or a["y2"] <= b["y1"] or b["y2"] <= a["y1"]
            )
            assert apart, (a, b)

    await page.reload()
    assert await _drawn(page) == now  # the same places on every load

    # 15 March 2024: Porto (first mentioned in June) and Bob (April) were not there yet.
    await page.goto(f"{base}?as_of=2024-03-15T00:00:00Z")
    march = await _drawn(page)
    assert {name for name, n in march.items() if n["shown"]} == {"Alice", "Lisbon", "Acme"}
    assert not march["Lisbon"]["faded"]  # she lived there then
    assert {k: (v["x"], v["y"]) for k, v in march.items()} == {
        k: (v["x"], v["y"]) for k, v in now.items()
    }  # each entity keeps its place whatever the date
    await expect(page.locator("#entities tbody")).not_to_contain_text("Porto")
    await expect(page.locator("#graph-legend")).to_contain_text("person")


async def test_a_go_back_link_resolves_to_the_console_in_the_browser(setup, page):
    w = setup.world
    confirm = f"{setup.team}/projects/{w.project_id}/delete-memory/{w.memories['chess']}"
    for back in ("/\t/evil.example", "/%09/evil.example", "/\\evil.example", " /\n/evil.example",
                 "//evil.example", "/\t\\evil.example"):  # fmt: skip
        await page.goto(confirm + "?" + urlencode({"user_id": "bob", "back": back}))
        link = page.get_by_role("link", name="No, go back")
        # What the browser itself makes of the link: never another site.
        resolved = await link.evaluate("a => new URL(a.href).origin")
        assert resolved == setup.team, (back, await link.get_attribute("href"))


async def test_forgetting_a_user_asks_for_their_id_typed_then_shows_the_receipt(setup, page):
    # A user of this test alone (a memory outside any project: the project's
    # figures other tests read stay as they are).
    async with NexusClient(setup.harness.target, api_key=TEAM_KEY) as client:
        await client.create_memory(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER, user_id="zoe", title="Zoe's note",
                content="Zoe likes rain.",
            )
        )  # fmt: skip
    await page.goto(f"{setup.team}/users?user_id=zoe")
    await expect(page.locator("#held tr[data-kind='memory'] td.num")).to_have_text("1")
    await page.click("#forget")
    button = page.locator("#forget-button")
    await expect(button).to_be_disabled()
    await page.fill("#typed-user-id", "Zoe")
    await expect(button).to_be_disabled()
    await page.fill("#typed-user-id", "zoe")
    await expect(button).to_be_enabled()
    await button.click()
    await expect(page).to_have_url(re.compile(r"/erasures/\d+\?done="))
    await expect(page.locator("#erasure-state")).to_have_text("done", timeout=WAIT_MS)
    await expect(page.locator("#receipt tr[data-kind='memories'] td.num")).to_have_text("1")
    await expect(page.locator("#erasure-bar")).to_have_attribute("value", "100")


# The scripted world over HTTP ---------------------------------------------------


async def test_the_episode_page_shows_what_the_episode_produced(setup):
    w = setup.world
    url = f"{setup.team}/projects/{w.project_id}/episodes/{w.episodes['porto']}"
    async with httpx.AsyncClient() as http:
        view = (await http.get(url + ".json")).json()
        page = (await http.get(url)).text
    produced = view["produced"]
    facts = [(f["from_name"], f["label"], f["to_name"]) for f in produced["extraction"]["facts"]]
    assert facts == [("Alice", "lives_in", "Porto")]
    assert {e["name"] for e in produced["extraction"]["entities"]} == {"Alice", "Porto"}
    [op] = produced["formation"]["operations"]
    assert (op["action"], op["memory_id"], op["related_memory_id"]) == (
        "supersede",
        w.memories["porto"],
        w.memories["lisbon"],
    )
    assert '<nav class="project"' in page  # the project's navigation
    assert f"memory {w.memories['porto']}</a>" in page and "superseded" in page
    assert '<table class="grid" id="produced-facts">' in page


async def test_a_memory_formed_from_an_old_episode_says_when_it_was_said(setup):
    w = setup.world
    url = (
        f"{setup.team}/projects/{w.project_id}/memories?user_id=alice&include_archived=1"
        f"&memory_id={w.memories['lisbon']}"
    )
    async with httpx.AsyncClient() as http:
        view = (await http.get(url.replace("/memories?", "/memories.json?"))).json()
        page = (await http.get(url)).text
    times = view["episode_times"]
    assert times[str(w.episodes["lisbon"])] == "2024-03-01T00:00:00Z"
    assert times[str(w.episodes["porto"])] == "2024-06-01T00:00:00Z"
    assert "said 2024-06-01" in page and "said 2024-03-01" in page


async def test_twenty_open_live_streams_leave_the_key_its_watch_slots(setup):
    w = setup.world
    events = setup.harness.app.graph.events
    url = f"{setup.team}/projects/{w.project_id}/events?episodes={w.episodes['porto']}"
    answers: list[int] = []
    readers: list = []
    async with contextlib.AsyncExitStack() as held, httpx.AsyncClient(timeout=30) as http:
        before = events.watchers
        refused = await http.get(url)  # a client that never loaded a page
        assert refused.status_code == 403
        for n in range(20):
            browser = {CSRF_COOKIE: f"browser-{n // PER_BROWSER}".ljust(43, "x")}
            stream = await held.enter_async_context(http.stream("GET", url, cookies=browser))
            answers.append(stream.status_code)
            if stream.status_code == 200:
                # Kept: an abandoned reader would close its stream.
                readers.append(stream.aiter_text())
                async for chunk in readers[-1]:
                    if "event: episode" in chunk:
                        break  # its watch is open
            else:
                said = json.loads(await stream.aread())["error"]["message"]
                assert f"already streams {TOTAL} live timelines" in said, said

        async def held_open() -> bool:
            return events.watchers >= before + min(answers.count(200), 16)

        await wait_until(held_open)
        assert answers.count(200) == TOTAL and answers.count(429) == 20 - TOTAL
        # The key's own client still opens its watch (and replays its events).
        async with NexusClient(setup.harness.target, api_key=TEAM_KEY) as client:
            watch = client.watch_extractions(project_id=w.project_id)
            try:
                first = await anext(aiter(watch))
            except NexusResourceExhausted as exc:
                raise AssertionError(f"the console took the key's watch slots: {exc}") from exc
            finally:
                watch.cancel()
        assert first.project_id == w.project_id
