"""The real grpcurl binary inspects and drives the server through reflection."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

# grpcurl against a server on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")


async def grpcurl(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


@pytest.fixture
def plain(harness):
    return ["-plaintext", harness.target]


async def test_grpcurl_lists_the_three_services_and_health(harness):
    out = await grpcurl("-plaintext", harness.target, "list")
    services = set(out.split())
    assert {
        "nexus.memory.v1.MemoryService",
        "nexus.graph.v1.GraphService",
        "nexus.summary.v1.SummaryService",
        "grpc.health.v1.Health",
    } <= services


async def test_grpcurl_describes_a_method(harness):
    out = await grpcurl("-plaintext", harness.target, "describe",
                        "nexus.memory.v1.MemoryService.SearchEpisodes")
    assert "returns ( stream .nexus.memory.v1.SearchHit )" in out


async def test_grpcurl_health_check(harness):
    out = await grpcurl("-plaintext", harness.target, "grpc.health.v1.Health/Check")
    assert json.loads(out)["status"] == "SERVING"
    out = await grpcurl("-plaintext", "-d", '{"service": "nexus.memory.v1.MemoryService"}',
                        harness.target, "grpc.health.v1.Health/Check")
    assert json.loads(out)["status"] == "SERVING"


async def test_grpcurl_creates_a_session_and_an_episode_with_json(harness):
    session = json.loads(await grpcurl(
        "-plaintext", "-d", '{"session": {"name": "from grpcurl", "metadata": {"k": "v"}}}',
        harness.target, "nexus.memory.v1.MemoryService/CreateSession"))
    assert session["name"] == "from grpcurl"
    episode = json.loads(await grpcurl(
        "-plaintext", "-d",
        json.dumps({"session_id": session["id"], "user_message": "hello from the shell",
                    "ai_response": "hi"}),
        harness.target, "nexus.memory.v1.MemoryService/CreateEpisode"))
    assert episode["session_id"] == session["id"]
    assert episode["user_message"] == "hello from the shell"
    hits = await grpcurl(
        "-plaintext", "-d",
        json.dumps({"query": "shell", "session_id": session["id"], "mode": "SEARCH_MODE_KEYWORD"}),
        harness.target, "nexus.memory.v1.MemoryService/SearchEpisodes")
    assert "[shell]" in hits
