"""``nexus-grpc export-user`` and ``nexus-grpc forget-user`` against a real
server: the export holds the user's records in the export format, the erasure
draws its progress and ends with a receipt that holds counts, not content."""

from __future__ import annotations

import asyncio
import json

import pytest

from nexus_grpc.cli import main
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import start_harness

WORD = "quixoticplum"


@pytest.fixture
async def seeded(tmp_path):
    h = await start_harness(tmp_path / "data")
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="atlas"))
    )
    for user in ("alice", "bob"):
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(project_id=project.id, user_id=user)
            )
        )
        await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=session.id, user_message=f"{user} says {WORD}", ai_response="ok"
            )
        )
    yield h
    await h.close()


async def test_export_user_writes_the_users_records_as_json_lines(seeded, tmp_path, capsys):
    out = tmp_path / "alice.jsonl"
    code = await asyncio.to_thread(
        main, ["export-user", "--user", "alice", "-o", str(out), "--target", seeded.target]
    )
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {next(iter(r)) for r in records} == {"session", "episode"}
    assert all("bob" not in json.dumps(r) for r in records)
    assert "exported 1 session, 1 episode" in capsys.readouterr().err


async def test_forget_user_prints_progress_and_a_receipt_without_content(seeded, capsys):
    code = await asyncio.to_thread(
        main, ["forget-user", "--user", "alice", "--json", "--target", seeded.target]
    )
    out = capsys.readouterr()
    assert code == 0
    receipt = json.loads(out.out)
    assert receipt["state"] == "ERASURE_STATE_DONE" and receipt["user_id"] == "alice"
    # int64 is a string in protobuf's JSON mapping.
    assert receipt["counts"]["episodes"] == "1" and receipt["counts"]["sessions"] == "1"
    assert WORD not in out.out
    assert "[" in out.err and "done" in out.err  # the bar, to its end
    again = await asyncio.to_thread(
        main, ["forget-user", "--user", "alice", "--target", seeded.target]
    )
    assert again == 1
    assert "user 'alice' holds nothing here" in capsys.readouterr().err
    bob = await asyncio.to_thread(main, ["export-user", "--user", "bob", "--target", seeded.target])
    assert bob == 0 and WORD in capsys.readouterr().out
