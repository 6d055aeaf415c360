"""``nexus-grpc migrate-store``: an embedded dataset moves into PostgreSQL whole,
ids kept, verified, and a copy cut off part way finishes when run again."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.beside_server.migrate_store import MigrateError, migrate_store
from nexus_grpc.runtime.config import Settings
from nexus_grpc.store import copy
from nexus_grpc.store.postgres.database import PostgresDatabase
from tests.support import start_harness, wait_until


async def embedded_dataset(data_dir) -> dict[str, list[int]]:
    """A real server's dataset on SQLite: a project, sessions, episodes, a memory."""
    h = await start_harness(data_dir)
    try:
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
        )
        sessions, episodes = [], []
        for s in range(3):
            session = await h.memory.CreateSession(
                memory_pb2.CreateSessionRequest(
                    session=memory_pb2.Session(project_id=project.id if s else 0)
                )
            )
            sessions.append(session.id)
            for i in range(7):
                ep = await h.memory.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=session.id,
                        user_message=f"session {s} turn {i} about kubernetes upgrades",
                        ai_response="noted",
                        request_id=f"r{s}-{i}",
                    )
                )
                episodes.append(ep.id)
        # A deleted episode leaves a gap in the ids: a copy must keep ids, not renumber.
        await h.memory.DeleteEpisode(memory_pb2.DeleteEpisodeRequest(id=episodes.pop(3)))
        memory = await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT,
                    project_id=project.id,
                    title="deploys",
                    content="deploys happen on tuesdays",
                    tier=memory_pb2.TIER_LONGTERM,
                )
            )
        )
        return {"sessions": sessions, "episodes": episodes, "memories": [memory.id]}
    finally:
        await h.close()


async def table_rows(url: str, table: str, columns: str) -> list[tuple]:
    db = PostgresDatabase(url)
    await db.open()
    try:
        return await db.read_sql(
            lambda c: [tuple(r) for r in c.execute(f"SELECT {columns} FROM {table} ORDER BY 1")]
        )
    finally:
        await db.close()


async def test_an_embedded_dataset_moves_whole_and_serves_from_postgresql(tmp_path, pg_url):
    made = await embedded_dataset(tmp_path / "data")
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url)
    out = io.StringIO()
    counts = await migrate_store(settings, out)
    assert counts["episodes"] == len(made["episodes"]) == 20
    assert "verified" in out.getvalue() and "episodes" in out.getvalue()
    copied = await table_rows(pg_url, "episodes", "id, request_id")
    assert [r[0] for r in copied] == made["episodes"]  # the same ids, the gap kept

    # A server on PostgreSQL serves the moved data: by id, by keyword and by
    # meaning once it has indexed the moved rows into pgvector.
    h = await start_harness(tmp_path / "server", database_url=pg_url)
    try:
        got = await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=made["episodes"][-1]))
        assert "kubernetes" in got.user_message
        fresh = await h.memory.CreateSession(memory_pb2.CreateSessionRequest())
        assert fresh.id > max(made["sessions"])  # new ids never reuse moved ones

        async def search(mode):
            request = memory_pb2.SearchEpisodesRequest(
                query="kubernetes upgrades", session_id=made["sessions"][0], mode=mode, limit=50
            )
            return {hit.episode.id async for hit in h.memory.SearchEpisodes(request)}

        first_session = set(made["episodes"][:6])
        assert await search(memory_pb2.SEARCH_MODE_KEYWORD) == first_session

        async def indexed():
            return await search(memory_pb2.SEARCH_MODE_SEMANTIC) == first_session

        await wait_until(indexed, timeout=30)
    finally:
        await h.close()


async def test_a_copy_cut_off_part_way_finishes_when_run_again(tmp_path, pg_url, monkeypatch):
    made = await embedded_dataset(tmp_path / "data")
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url)
    monkeypatch.setattr("nexus_grpc.ops.beside_server.migrate_store.BATCH", 4)
    real = copy.write_batch
    batches = 0

    def cut_off(conn, table, columns, rows):
        nonlocal batches
        batches += 1
        if table.name == "episodes" and batches > 5:
            raise ConnectionResetError("the network went away")
        real(conn, table, columns, rows)

    monkeypatch.setattr(copy, "write_batch", cut_off)
    with pytest.raises(ConnectionResetError):
        await migrate_store(settings, io.StringIO())
    partial = await table_rows(pg_url, "episodes", "id")
    assert 0 < len(partial) < len(made["episodes"])

    monkeypatch.setattr(copy, "write_batch", real)
    counts = await migrate_store(settings, io.StringIO())
    assert counts["episodes"] == len(made["episodes"])
    assert [r[0] for r in await table_rows(pg_url, "episodes", "id")] == made["episodes"]
    # And once more: nothing doubles.
    await migrate_store(settings, io.StringIO())
    assert len(await table_rows(pg_url, "episodes", "id")) == len(made["episodes"])
    assert len(await table_rows(pg_url, "memories", "id")) == 1


async def test_a_database_that_already_holds_data_is_refused(tmp_path, pg_url):
    await embedded_dataset(tmp_path / "data")
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url)
    db = PostgresDatabase(pg_url)
    await db.open()
    await db.write_sql(
        lambda c: c.execute(
            "INSERT INTO projects (id, name, created_at, updated_at, tenant)"
            " VALUES (999, 'stray', 0, 0, 'default')"
        )
    )
    await db.close()
    with pytest.raises(MigrateError, match="already holds data that migrate-store did not copy"):
        await migrate_store(settings, io.StringIO())
    # Nothing was copied into it.
    assert await table_rows(pg_url, "projects", "id") == [(999,)]
    assert await table_rows(pg_url, "meta", "key") == []


def test_the_command_needs_a_dataset_and_a_url(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "nexus_grpc.cli", "migrate-store", *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    missing_url = run("--data-dir", str(tmp_path))
    assert missing_url.returncode == 2 and "--database-url is required" in missing_url.stderr
    no_data = run("--data-dir", str(tmp_path), "--database-url", "postgresql://u:pw@/x")
    assert no_data.returncode == 2 and "no embedded database at" in no_data.stderr
