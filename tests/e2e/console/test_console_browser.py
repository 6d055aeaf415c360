"""The console as a person sees it: Debian's chromium, driven by Playwright
(pointed at /usr/bin/chromium; no browser is downloaded), in front of the
real ``nexus-grpc console`` command and a real server whose LLM is the
Ollama stand-in with scripted answers (tests/e2e/console/world.py).

One browser, one server and two consoles (a key for every user, and a key
that may act only for alice) serve the whole module.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
import pytest_asyncio
from playwright.async_api import Browser, async_playwright, expect

from nexus_grpc.client import NexusClient
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
    assert "as_of=2024-04" in page.url  # the state is in the URL: a link shows the same
    # Back to now: today's fact again.
    await page.locator("#time-slider").evaluate(
        "s => { s.value = 1000; s.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    await expect(facts).to_contain_text("Porto", timeout=WAIT_MS)
    await expect(facts).not_to_contain_text("Lisbon")


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
