"""``nexus-grpc usage``: GetUsage as a table in the terminal, for the key's
tenant or a project found by name, against a real server that sums the calls it stored.

The command's own rules without a server (``--since``, the refusals made before a call,
the budget lines, the table's rows from a given GetUsageResponse):
tests/unit/test_client_usage_table.py. The table both check is
tests/usage_calls.py's check_atlas_table."""

from __future__ import annotations

import asyncio
import time

import pytest

from nexus_grpc.cli import main
from nexus_grpc.client import NexusClient
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.usage import usage_table
from tests.support import start_harness
from tests.usage_calls import check_atlas_table


@pytest.fixture
async def seeded(tmp_path):
    h = await start_harness(tmp_path / "data")
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="atlas"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    for text in ("one", "two"):
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=text, ai_response="ok"
            )
        )
    at = time.time()  # today, whenever the test runs
    calls = [
        LLMCall("extraction", project.id, "default", 1200, 300, 2.5, "ok", at),
        LLMCall("extraction", project.id, "default", 0, 0, 120.0, "timeout", at),
        LLMCall("resolution", project.id, "default", 400, 20, 0.4, "ok", at, estimated=True),
        LLMCall("selection", 0, "default", 900, 80, 0.9, "ok", at),
    ]
    await h.app.db.write(lambda uow: uow.usage.insert(calls))
    yield h
    await h.close()


async def test_the_table_shows_each_stage_and_what_it_cost_per_episode(seeded):
    async with NexusClient(seeded.target) as client:
        table = await usage_table(client, project="atlas", since="1d")
    check_atlas_table(table)
    # The tenant's figures include what no project holds (a selection).
    async with NexusClient(seeded.target) as client:
        tenant = await usage_table(client, since="2h", bucket="hour")
    assert "selection" in tenant and "LLM usage of tenant 'default', " in tenant


async def test_the_command_prints_the_table_and_refuses_what_it_cannot_read(seeded, capsys):
    ok = await asyncio.to_thread(
        main, ["usage", "--target", seeded.target, "--project", "atlas", "--since", "7d"]
    )
    out = capsys.readouterr()
    assert ok == 0 and "extraction" in out.out and out.err == ""
    missing = await asyncio.to_thread(
        main, ["usage", "--target", seeded.target, "--project", "nope"]
    )
    assert missing == 2
    assert "no project named 'nope'" in capsys.readouterr().err
