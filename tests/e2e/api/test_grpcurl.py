"""The real grpcurl binary inspects and drives the server through reflection."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

import grpc
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests import readme

# grpcurl against a server on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
BIN = Path(sys.executable).parent


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


async def test_grpcurl_describe_prints_the_proto_comments(harness):
    method = await grpcurl("-plaintext", harness.target, "describe",
                           "nexus.memory.v1.MemoryService.CreateEpisode")
    assert "// Returns as soon as the episode is durable; embedding, extraction and" in method
    message = await grpcurl("-plaintext", harness.target, "describe", "nexus.memory.v1.Session")
    assert "// The person the conversation is with: their USER memories form from it." in message
    # Field names as the proto writes them, not the JSON camelCase.
    assert "string user_id = 7;" in message
    listed = set((await grpcurl("-plaintext", harness.target, "list")).split())
    assert {"grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"} <= listed  # fmt: skip


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_both_reflection_versions_serve_descriptors_with_comments(harness, version):
    """grpcurl 1.8.8 and later ask v1 first (the pinned 1.8.6 asks v1alpha):
    both answer, with the source info that carries the comments."""
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2

    call = harness.channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="nexus.memory.v1.MemoryService.SearchEpisodes"
        ),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
    ]
    listed, found, missing = [r async for r in call(iter(requests))]
    names = {s.name for s in listed.list_services_response.service}
    assert {"nexus.memory.v1.MemoryService", f"grpc.reflection.{version}.ServerReflection"} <= names
    files = {
        f.name: f
        for f in map(descriptor_pb2.FileDescriptorProto.FromString,
                     found.file_descriptor_response.file_descriptor_proto)
    }  # fmt: skip
    memory = files["nexus/memory/v1/memory_service.proto"]
    comments = [loc.leading_comments for loc in memory.source_code_info.location]
    assert any("Streams hits in rank order" in c for c in comments)
    assert {"google/protobuf/struct.proto", "nexus/graph/v1/graph_service.proto"} <= set(files)
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


async def _quick_start(harness) -> tuple[int, int]:
    """What the README's Python quick start leaves before the walk-through: a
    project and a session holding one exchange (ids 1 and 1 on a new server)."""
    project = await harness.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="quickstart"))
    )
    session = await harness.memory.CreateSession(
        memory_pb2.CreateSessionRequest(
            session=memory_pb2.Session(name="chat", project_id=project.id, user_id="alice")
        )
    )
    await harness.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="Our Postgres runs on port 5433"
        )
    )
    return project.id, session.id


async def _sessions_and_episodes(harness, project_id: int) -> dict[int, int]:
    """The project's sessions, each with how many episodes it holds."""
    listed = await harness.memory.ListSessions(
        memory_pb2.ListSessionsRequest(project_id=project_id)
    )
    return {
        s.id: len(
            (await harness.memory.ListEpisodes(memory_pb2.ListEpisodesRequest(session_id=s.id)))
            .episodes
        )
        for s in listed.sessions
    }


async def test_the_readme_walk_through_runs_as_written(harness):
    """The README's grpcurl block, against this server: its address and where
    the virtualenv is are the only changes. It runs after the quick start, as
    a reader following the README does, and must write into its own project,
    not the quick start's (the ids it uses are those its calls printed)."""
    quick_project, quick_session = await _quick_start(harness)
    script = readme.blocks("## Inspecting with grpcurl", "sh")[0]
    script = script.replace("localhost:50051", harness.target).replace(".venv/bin/", f"{BIN}/")
    proc = await asyncio.create_subprocess_exec(
        "bash", "-euo", "pipefail", "-c", script, cwd=readme.ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out = (await proc.communicate())[0].decode()
    assert proc.returncode == 0, out
    assert "// Streams hits in rank order." in out  # describe, with the comments
    [carried] = re.findall(r"^project (\d+), session (\d+)$", out, re.MULTILINE)
    project, session = map(int, carried)
    assert (project, session) != (quick_project, quick_session)
    assert f'"session_id": "{session}"' in out  # the exchanges went into its own session
    # Its session, with its two exchanges, is in its own project; the quick
    # start's project still holds only the quick start's.
    assert await _sessions_and_episodes(harness, project) == {session: 2}
    assert await _sessions_and_episodes(harness, quick_project) == {quick_session: 1}
    got = await harness.memory.GetSession(memory_pb2.GetSessionRequest(id=session))
    assert (got.project_id, got.user_id) == (project, "alice")
    assert "5433" in out  # the search found the exchange
    assert '"stage": "keyword"' in out and '"note": "matched: ' in out  # explain's stages
    assert "x-nexus-empty-reason: LLM_OFF: " in out  # the empty memory search says why
    assert "state             SERVING" in out and "off   ollama" in out  # doctor, exit 0
    status = await harness.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
    assert status.state == "SERVING"
