"""Memory formation through a real server and the Ollama stand-in: ``said``
writes a memory candidate, ``script`` has the stand-in propose candidates for
an episode's extraction, and ``formed`` waits for the event that ends an
episode's formation. Not a test module: formation's own wiring
(tests/e2e/service/test_memory_formation.py) and the agent hooks' formation
loop (tests/e2e/agent_hooks/test_formation_loop.py) script and wait alike."""

from __future__ import annotations

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from tests.graph_support import EMPTY
from tests.support import Harness, take


def said(content: str, quote: str, about: str = "user", tier: str = "longterm") -> dict:
    """A memory candidate as extraction proposes it, quoting the user."""
    return {"about": about, "title": content[:30], "content": content, "tier": tier, "quote": quote}


def extraction(user: str, *memories: dict) -> dict:
    """An extraction's answer with no entities and these memory candidates."""
    return {**EMPTY, "ended": [], "memories": list(memories)}


def script(stub, user: str, *memories: dict) -> None:
    """Answer the extraction of the episode whose user message is ``user``."""
    stub.add_rule(extraction(user, *memories), contains=f"User message:\n{user}\n")


async def formed(h: Harness, episode_id: int, limit: float = 20.0) -> graph_pb2.ExtractionEvent:
    """The event that ends the episode's memory formation."""
    call = h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(episode_id=episode_id))
    try:
        while True:
            [event] = await take(call, 1, limit)
            if event.HasField("memory_formation"):
                return event
    finally:
        call.cancel()
