"""Two users' words on every path into the store, and where to look for them
afterwards: the canary world the forgetting tests share (docs/privacy.md)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.store import schema
from tests.graph_support import EMPTY
from tests.ollama_stub import Reply
from tests.support import Harness, take, wait_until

DECISION_PROMPT = "Kept memories:"
SESSION_PROMPT = "You summarise a conversation"
OVERVIEW_PROMPT = "You write a project overview"
PATHS = (
    "episode",
    "reply",
    "imported",
    "memory",
    "formed_user",
    "formed_project",
    "entity",
    "label_notes",
    "summary",
)
__all__ = ["EMPTY", "World", "every_text", "files_of", "tail"]


def canary(rng: random.Random) -> str:
    """A word no other shares a long prefix with (FTS5 stores a term after
    the prefix it shares with the one before), ending in digits (the porter
    stemmer leaves it whole)."""
    return "".join(rng.choices("bcdfghjkmnpqrstvwxz", k=10)) + f"{rng.randrange(100):02d}"


def said(words: dict[str, str]) -> str:
    """What a user says in their episode (a quote of two words or more)."""
    return f"I say {words['episode']} today"


def tail(word: str) -> bytes:
    """What of a word is on disk contiguously whatever prefix FTS5 shares."""
    return word[-8:].encode()


async def every_text(h: Harness) -> str:
    """Every value of every table, as text."""

    def dump(conn) -> str:
        parts = []
        for table in schema.TABLES:
            for row in conn.execute(f"SELECT * FROM {table.name}").fetchall():
                parts.extend(str(v) for v in row)
        return "\n".join(parts)

    return await h.app.db.read_sql(dump)


def files_of(data: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in data.rglob("*") if p.is_file()}


def watch_extraction(h: Harness, episode_id: int):
    return h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=episode_id))


async def formed(h: Harness, episode_id: int) -> None:
    call = watch_extraction(h, episode_id)
    try:
        while True:
            [event] = await take(call, 1, 30)
            if event.HasField("memory_formation"):
                return
    finally:
        call.cancel()


class World:
    """Two users of one project, each with a canary word on every path."""

    def __init__(self, h: Harness, stub, seed: int) -> None:
        self.h, self.stub = h, stub
        rng = random.Random(seed)
        self.words = {u: {p: canary(rng) for p in PATHS} for u in ("alice", "bob")}
        self.shared = "Lisbon"
        self.sessions: dict[str, int] = {}
        self.project = 0
        stub.responder = self._answer

    def _answer(self, endpoint: str, body: dict) -> Reply | None:
        prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
        if DECISION_PROMPT in prompt:
            # Every candidate is new: formation adds it.
            numbers = [int(n) for n in re.findall(r"(?m)^Candidate (\d+)", prompt)]
            return Reply.of(
                {
                    "decisions": [
                        {"candidate": n, "action": "ADD", "memory_id": 0, "reason": "new"}
                        for n in numbers
                    ]
                }
            )
        if SESSION_PROMPT in prompt:
            for words in self.words.values():
                if words["episode"] in prompt:
                    return Reply.of(f"They talked about {words['summary']} at length.")
        if OVERVIEW_PROMPT in prompt:
            both = " and ".join(w["summary"] for w in self.words.values())
            return Reply.of(f"The project covered {both}.")
        for user, words in self.words.items():
            if f"User message:\n{said(words)}" in prompt:
                return Reply.of(self._extraction(user, words))
        return None

    def _extraction(self, user: str, words: dict[str, str]) -> dict:
        person = f"Person {words['entity']}"
        return {
            "entities": [
                {"name": person, "type": "person", "notes": f"notes {words['label_notes']}"},
                {"name": self.shared, "type": "place", "notes": None},
            ],
            "relationships": [
                {
                    "from": person,
                    "to": self.shared,
                    "label": "lives_in",
                    "notes": f"said {words['label_notes']}",
                }
            ],
            "ended": [],
            "memories": [
                {
                    "about": "user",
                    "title": "home",
                    "content": f"The user's word is {words['formed_user']}.",
                    "tier": "longterm",
                    "quote": said(words),
                },
                {
                    "about": "project",
                    "title": "fact",
                    "content": f"The project's word is {words['formed_project']}.",
                    "tier": "longterm",
                    "quote": said(words),
                },
            ],
        }

    async def build(self) -> None:
        h = self.h
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(
                project=memory_pb2.Project(
                    name="shared",
                    memory_formation=memory_pb2.MEMORY_FORMATION_USER_AND_PROJECT,
                )
            )
        )
        self.project = project.id
        for user, words in self.words.items():
            session = await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(
                    session=memory_pb2.Session(project_id=project.id, user_id=user)
                )
            )
            self.sessions[user] = session.id
            episode = await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(
                    session_id=session.id,
                    user_message=said(words),
                    ai_response=f"Noted: {words['reply']}",
                    request_id=f"ep-{user}",
                )
            )
            await formed(h, episode.id)
            await h.memory.ImportEpisodes(
                iter(
                    [
                        memory_pb2.ImportEpisodesRequest(
                            episode=memory_pb2.CreateEpisodeRequest(
                                session_id=session.id,
                                user_message=f"imported {words['imported']}",
                                ai_response="ok",
                                request_id=f"imp-{user}",
                            )
                        )
                    ]
                )
            )
            await h.memory.CreateMemory(
                memory_pb2.CreateMemoryRequest(
                    memory=memory_pb2.Memory(
                        kind=memory_pb2.MEMORY_KIND_USER,
                        user_id=user,
                        project_id=project.id,
                        title="direct",
                        content=f"stored {words['memory']}",
                        tier=memory_pb2.TIER_LONGTERM,
                    ),
                    request_id=f"mem-{user}",
                )
            )
            await h.summary.SummarizeSession(
                summary_pb2.SummarizeSessionRequest(session_id=session.id)
            )
        [*_] = [
            x
            async for x in h.summary.SummarizeProject(
                summary_pb2.SummarizeProjectRequest(project_id=project.id)
            )
        ]
        # Every index job has run: the vector index holds every row's point.
        await wait_until(lambda: _queues_idle(h), timeout=30)


async def _queues_idle(h: Harness) -> bool:
    status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    return all(q.pending == 0 for q in status.queues if q.kind.startswith("index:"))
