"""A project whose graph and memories formed from conversations, for the
console's browser tests and its screenshots (bench/console_screenshots.py).

The LLM is the Ollama stand-in with scripted answers: extraction finds the
entities, facts and memory candidates each message states, and formation's
question is answered as a careful model would (a new home supersedes the
old one).  Alice moved from Lisbon (March 2024) to Porto (June 2024); Bob
plays chess and was merged with "Robert", who works at Acme.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass, field

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.ollama_stub import OllamaStub, Reply

CHROMIUM = "/usr/bin/chromium"
# Debian's chromium, headless, with no network of its own: no component
# updates, sync or background fetches.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
MARCH, APRIL, JUNE = 1_709_251_200, 1_711_929_600, 1_717_200_000  # 2024-03-01, 04-01, 06-01
APRIL_15 = "2024-04-15T00:00:00Z"
DECISION_PROMPT = "Kept memories:"
#: A message whose extraction waits until ``World.release`` is set.
HELD = "Remind me about the dentist on Friday."


def _said(content: str, quote: str) -> dict:
    return {"about": "user", "title": content[:30], "content": content, "tier": "longterm",
            "quote": quote}  # fmt: skip


def _entity(name: str, kind: str) -> dict:
    return {"name": name, "type": kind, "notes": None}


def _fact(subject: str, label: str, obj: str) -> dict:
    return {"from": subject, "to": obj, "label": label, "notes": None}


# What each message says, as the extraction model would answer.
SCRIPT = {
    "I live in Lisbon and I work at Acme.": {
        "entities": [_entity("Alice", "person"), _entity("Lisbon", "place"),
                     _entity("Acme", "organization")],
        "relationships": [_fact("Alice", "lives_in", "Lisbon"), _fact("Alice", "works_at", "Acme")],
        "memories": [_said("The user lives in Lisbon.", "I live in Lisbon")],
    },
    "I'm Bob and I play chess every Sunday.": {
        "entities": [_entity("Bob", "person"), _entity("Chess", "concept")],
        "relationships": [_fact("Bob", "plays", "Chess")],
        "memories": [_said("The user plays chess every Sunday.", "I play chess every Sunday")],
    },
    "I moved to Porto last week.": {
        "entities": [_entity("Alice", "person"), _entity("Porto", "place")],
        "relationships": [_fact("Alice", "lives_in", "Porto")],
        "memories": [_said("The user lives in Porto.", "I moved to Porto")],
    },
}  # fmt: skip
EMPTY = {"entities": [], "relationships": [], "ended": [], "memories": []}


@dataclass
class World:
    project_id: int
    alice_session: int
    bob_session: int
    episodes: dict[str, int]
    #: Memory ids: lisbon (archived), porto (superseded it), chess (bob's).
    memories: dict[str, int]
    entities: dict[str, int]
    merge_id: int
    release: threading.Event = field(default_factory=threading.Event)


def script(stub: OllamaStub, release: threading.Event) -> None:
    """Extraction answers from SCRIPT; a new home supersedes the old one; the
    HELD message's extraction waits for ``release``."""
    for message, answer in SCRIPT.items():
        stub.add_rule({**EMPTY, **answer}, contains=f"User message:\n{message}\n")

    def respond(endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if f"User message:\n{HELD}\n" in prompt:
            release.wait(60)
            return Reply.of(EMPTY)
        if DECISION_PROMPT not in prompt:
            return None
        decisions = []
        for block in re.split(r"(?m)^Candidate ", prompt)[1:]:
            number = int(block.split(" ", 1)[0].rstrip(":"))
            content = re.search(r': "(.*)"', block.splitlines()[0]).group(1)
            kept = [(int(i), c) for i, c in re.findall(r'- id (\d+)[^:]*: "(.*)"', block)]
            home = [i for i, c in kept if "lives in" in c and "lives in" in content]
            action, target = ("SUPERSEDE", home[0]) if home else ("ADD", 0)
            decisions.append(
                {"candidate": number, "action": action, "memory_id": target,
                 "reason": "the user moved" if home else "new"}
            )  # fmt: skip
        return Reply.of({"decisions": decisions})

    stub.responder = respond


async def _formed(client: NexusClient, episode_id: int) -> None:
    """Waits for the event that ends the episode's memory formation."""
    stream = client.watch_extractions(episode_id=episode_id)
    try:
        async with asyncio.timeout(30):
            async for event in stream:
                if event.HasField("memory_formation"):
                    return
    finally:
        stream.cancel()


async def build(client: NexusClient, stub: OllamaStub) -> World:
    release = threading.Event()
    script(stub, release)
    project = await client.create_project(
        project=memory_pb2.Project(name="Atlas assistant", description="Alice's and Bob's chats")
    )
    pid = project.id
    alice = await client.create_session(
        session=memory_pb2.Session(project_id=pid, user_id="alice", name="Alice's assistant")
    )
    bob = await client.create_session(
        session=memory_pb2.Session(project_id=pid, user_id="bob", name="Bob's assistant")
    )
    episodes: dict[str, int] = {}
    for key, session, message, at in (
        ("lisbon", alice.id, "I live in Lisbon and I work at Acme.", MARCH),
        ("chess", bob.id, "I'm Bob and I play chess every Sunday.", APRIL),
        ("porto", alice.id, "I moved to Porto last week.", JUNE),
    ):
        episode = await client.create_episode(
            session_id=session, user_message=message, ai_response="Noted, thanks.",
            occur_time=Timestamp(seconds=at),
        )  # fmt: skip
        episodes[key] = episode.id
        await _formed(client, episode.id)

    async def of(user: str) -> list[memory_pb2.Memory]:
        page = await client.list_memories(
            scope=memory_pb2.MemoryScope(project_id=pid, user_id=user, include_archived=True),
            kind=memory_pb2.MEMORY_KIND_USER,
        )
        return list(page.memories)

    memories = {}
    for m in await of("alice") + await of("bob"):
        key = next(k for k in ("Lisbon", "Porto", "chess") if k in m.content)
        memories[key.lower()] = m.id
    entities = {}
    for name in ("Alice", "Lisbon", "Porto", "Acme", "Bob", "Chess"):
        [found] = (await client.list_entities(project_id=pid, name=name)).entities
        entities[name.lower()] = found.id
    robert = await client.upsert_entity(name="Robert", type="person", project_id=pid)
    await client.upsert_relationship(
        from_id=robert.id, to_id=entities["acme"], label="works_at",
        valid_time=Timestamp(seconds=APRIL),
    )  # fmt: skip
    entities["robert"] = robert.id
    merge = await client.merge_entities(
        target_id=entities["bob"], source_ids=[robert.id], reason="Robert is Bob"
    )
    return World(pid, alice.id, bob.id, episodes, memories, entities, merge.id, release)


@dataclass
class RunningConsole:
    process: asyncio.subprocess.Process
    url: str
    port: int
    log: list[str] = field(default_factory=list)
    drain: asyncio.Task | None = None

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                async with asyncio.timeout(10):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def start_console(target: str, api_key: str = "", *extra: str) -> RunningConsole:
    """``nexus-grpc console`` as a subprocess on a free loopback port, once it
    says where it serves."""
    import os
    import sys

    env = {**os.environ, "NEXUS_API_KEY": api_key}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nexus_grpc.cli", "console", "--target", target,
        "--listen", "127.0.0.1:0", *extra,
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    async with asyncio.timeout(30):
        while True:
            line = (await process.stderr.readline()).decode()
            if not line:
                raise RuntimeError(f"nexus-grpc console exited ({await process.wait()})")
            found = re.search(r"serving on (http://127\.0\.0\.1:(\d+))/", line)
            if found:
                running = RunningConsole(process, found.group(1), int(found.group(2)))
                # Its later lines (warnings) must not fill the pipe and stall it.
                running.drain = asyncio.create_task(_drain(process.stderr, running.log))
                return running


async def _drain(stream: asyncio.StreamReader, into: list[str]) -> None:
    while line := await stream.readline():
        into.append(line.decode(errors="replace"))
