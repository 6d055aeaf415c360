"""Screenshots of every console page for docs/console.md.

A real server whose LLM is the Ollama stand-in with the scripted answers of
tests/e2e/console/world.py (Alice moved from Lisbon to Porto, Bob plays chess and
was merged with Robert; one extraction fails for good), the real
``nexus-grpc console`` in front of it, and Debian's chromium, headless,
through Playwright::

    .venv/bin/python -m bench.console_screenshots [--out docs/console]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from playwright.async_api import async_playwright

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.e2e.console.world import APRIL_15, CHROMIUM, CHROMIUM_FLAGS, build, start_console
from tests.graph_support import start_graph_harness
from tests.ollama_stub import OllamaStub, Reply

ROOT = Path(__file__).resolve().parent.parent
FAILING = "Please summarise the supplier contract."


async def main(out: Path) -> None:
    with OllamaStub() as stub, tempfile.TemporaryDirectory() as tmp:
        h = await start_graph_harness(Path(tmp) / "data", stub)
        console = None
        try:
            async with NexusClient(h.target) as client:
                world = await build(client, stub)
                world.release.set()
                stub.add_rule(
                    Reply.error_status(500, "model runner crashed"),
                    contains=f"User message:\n{FAILING}\n",
                )
                failing = await client.create_episode(
                    session_id=world.bob_session, user_message=FAILING, ai_response="On it."
                )
                while True:  # until its last attempt is given up
                    got = await client.get_episode(id=failing.id)
                    if got.extraction_state == 3:
                        break
                    await asyncio.sleep(0.2)
            console = await start_console(h.target)
            pid, w = world.project_id, world
            pages = {
                "projects": "/",
                "timeline": f"/projects/{pid}",
                "episode": f"/projects/{pid}/episodes/{w.episodes['porto']}",
                "memories": f"/projects/{pid}/memories?user_id=alice&include_archived=1"
                f"&memory_id={w.memories['lisbon']}",
                "graph-overview": f"/projects/{pid}/graph",
                "graph": f"/projects/{pid}/graph?entity_id={w.entities['alice']}",
                "graph-april-2024": f"/projects/{pid}/graph?entity_id={w.entities['alice']}"
                f"&as_of={APRIL_15}",
                "graph-merges": f"/projects/{pid}/graph?entity_id={w.entities['bob']}",
                "search": f"/projects/{pid}/search?q=where+does+alice+live&kind=episodes",
                "status": "/status",
                "user": "/users?user_id=alice",
                "forget": "/users/forget?user_id=bob",
            }
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
                page = await browser.new_page(viewport={"width": 1280, "height": 860})
                for name, path in pages.items():
                    await page.goto(console.url + path)
                    await page.wait_for_load_state("networkidle")
                    await page.wait_for_timeout(400)  # the graph's layout settles
                    await page.screenshot(path=str(out / f"{name}.png"), full_page=True)
                    print(f"{name}: {path}")
                # Last: an erasure's receipt, of a user of its own.
                async with NexusClient(h.target) as client:
                    await client.create_memory(
                        memory=memory_pb2.Memory(
                            kind=memory_pb2.MEMORY_KIND_USER, user_id="carol",
                            project_id=pid, title="Carol's note", content="Carol likes rain.",
                        )
                    )  # fmt: skip
                await page.goto(console.url + "/users/forget?user_id=carol")
                await page.fill("#typed-user-id", "carol")
                await page.click("#forget-button")
                await page.wait_for_selector("#erasure[data-state='done']", timeout=60_000)
                await page.screenshot(path=str(out / "erasure.png"), full_page=True)
                print(f"erasure: {page.url}")
                await browser.close()
        finally:
            if console is not None:
                await console.stop()
            await h.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(out))
