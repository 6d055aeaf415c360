"""ExportProject and the `nexus-grpc export` / `nexus-grpc import` commands:
a project moves to another server and exports the same again.

What an export leaves out (an expired memory, an episode past retention, a
user's memories for a key not acting for that user) is decided by
domain/export.py and tested on the fakes (tests/unit/test_export_rules.py);
here are the RPC's and the commands' wiring."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.project_transfer import (
    U,
    cli,
    exported,
    normalized,
    rows,
    seed,
)
from tests.support import bearer, start_harness

# Runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

KEY = "alice-only-export-key-01"


async def test_export_import_export_round_trips_apart_from_ids(tmp_path):
    a = await start_harness(tmp_path / "a")
    b = await start_harness(tmp_path / "b")
    try:
        other = await seed(a, "OTHER")
        project_id = await seed(a, "MINE")
        first = tmp_path / "first.jsonl"
        done = await cli("export", str(project_id), "-o", str(first), "--target", a.target)
        assert done.returncode == 0, done.stderr
        lines = first.read_text().splitlines()
        kinds = [next(iter(json.loads(line))) for line in lines]
        assert kinds[0] == "project"
        assert {k: kinds.count(k) for k in set(kinds)} == {
            "project": 1,
            "session": 2,
            "episode": 6,
            "memory": 4,
            "memory_revision": 2,
            "entity": 2,
            "relationship": 1,
            "entity_alias": 2,
            "relationship_evidence": 1,
            "summary": 2,
        }
        # Nothing of the other project, and episodes keep their time.
        assert "OTHER" not in first.read_text()
        episode = json.loads(lines[3])["episode"]
        assert episode["occur_time"] == "2023-05-08T13:56:00Z"
        assert other != project_id

        imported = await cli("import", str(first), "--target", b.target)
        assert imported.returncode == 0, imported.stderr
        new_id = int(imported.stdout.strip())
        second = tmp_path / "second.jsonl"
        done = await cli("export", str(new_id), "-o", str(second), "--target", b.target)
        assert done.returncode == 0, done.stderr
        again = second.read_text().splitlines()
        assert normalized(again) == normalized(lines)
        # The ids did change (a fresh server's, not copies).
        assert json.loads(again[1])["session"]["project_id"] == str(new_id)
        # The history reads the same versions on the new server.
        revisions = [json.loads(x)["memory_revision"] for x in again if "memory_revision" in x]
        assert [r["changed_fields"] for r in revisions] == [["title"], ["content", "tier"]]
        assert revisions[0]["previous"]["title"] == "deploy"
        assert revisions[1]["previous"]["content"] == "friday"
    finally:
        await a.close()
        await b.close()


async def test_export_follows_tenant_and_user_rules(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": KEY, "name": "orchestrator", "users": ["alice"]},
                    {"key": "rival-tenant-key-0000001", "name": "rival", "users": "*"},
                    {"key": "admin-key-000000000001", "name": "ops", "users": "*", "admin": True},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    try:
        wide = bearer("admin-key-000000000001")
        project = await h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p")),
            metadata=bearer(KEY),
        )
        for user in ("alice", "bob"):
            await h.memory.CreateMemory(
                memory_pb2.CreateMemoryRequest(
                    memory=memory_pb2.Memory(
                        kind=U, user_id=user, project_id=project.id, title=user, content="c"
                    )
                ),
                metadata=wide,
            )

        async def export(key: str) -> list[memory_pb2.ExportRecord]:
            call = h.memory.ExportProject(
                memory_pb2.ExportProjectRequest(project_id=project.id), metadata=bearer(key)
            )
            return [r async for r in call]

        mine = await export(KEY)
        assert [r.memory.user_id for r in mine if r.HasField("memory")] == ["alice"]
        everyone = await export("admin-key-000000000001")
        assert [r.memory.user_id for r in everyone if r.HasField("memory")] == ["alice", "bob"]
        # Another tenant's key: the project does not exist for it.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await export("rival-tenant-key-0000001")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await h.memory.ExportProject(
                memory_pb2.ExportProjectRequest(), metadata=bearer(KEY)
            ).read()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "project_id" in err.value.details()
    finally:
        await h.close()


# Importing again -------------------------------------------------------------


@pytest.fixture
async def source(tmp_path):
    """A server with a seeded project, and that project's export."""
    a = await start_harness(tmp_path / "a")
    try:
        project_id = await seed(a, "MINE")
        lines = await exported(a, project_id, tmp_path / "first.jsonl")
        yield a, project_id, tmp_path / "first.jsonl", lines
    finally:
        await a.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def source_file(tmp_path_factory) -> tuple[Path, list[str]]:
    """A seeded project's export and its file, made once for the module's
    tests that only read it (its server is gone: ``source`` keeps one)."""
    folder = tmp_path_factory.mktemp("source")
    a = await start_harness(folder / "a")
    try:
        project_id = await seed(a, "MINE")
        lines = await exported(a, project_id, folder / "first.jsonl")
    finally:
        await a.close()
    return folder / "first.jsonl", lines


async def test_importing_a_file_again_duplicates_nothing_and_says_so(source, harness, tmp_path):
    a, project_id, path, lines = source
    b = harness
    first = await cli("import", str(path), "--target", b.target)
    assert first.returncode == 0, first.stderr
    new_id = int(first.stdout.strip())
    assert f"importing into new project {new_id}" in first.stderr
    before = await rows(b)

    again = await cli("import", str(path), "--target", b.target)
    assert again.returncode == 0, again.stderr
    assert int(again.stdout.strip()) == new_id
    assert f"nothing to import: project {new_id} already holds everything" in again.stderr
    assert "2 session, 6 episode, 4 memory, 2 memory_revision" in again.stderr
    assert await rows(b) == before
    assert normalized(await exported(b, new_id, tmp_path / "again.jsonl")) == normalized(lines)

    # Imported back into the server it came from, whose project still holds
    # it: nothing is written there either.
    held = await rows(a)
    home = await cli("import", str(path), "--target", a.target)
    assert home.returncode == 0, home.stderr
    assert int(home.stdout.strip()) == project_id
    assert "nothing to import" in home.stderr
    assert await rows(a) == held


def cut_after(lines: list[str], kind: str, nth: int) -> list[str]:
    """The lines up to and including the ``nth`` record of ``kind``."""
    seen = 0
    for i, line in enumerate(lines):
        if next(iter(json.loads(line))) == kind:
            seen += 1
            if seen == nth:
                return lines[: i + 1]
    raise AssertionError(f"no {kind} #{nth}")


@pytest.mark.parametrize(
    "kind, nth",
    [
        ("episode", 3),  # half the episodes
        ("memory_revision", 1),  # a memory with half its history applied
        ("relationship", 1),  # the graph, not yet the summaries
        ("summary", 1),  # one summary of two
    ],
)
async def test_an_interrupted_import_finishes_when_run_again(
    source_file, harness, tmp_path, kind, nth
):
    path, lines = source_file
    b = harness
    # The first run stops after the cut: what it wrote stays.
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join(cut_after(lines, kind, nth)) + "\n")
    first = await cli("import", str(partial), "--target", b.target)
    assert first.returncode == 0, first.stderr
    new_id = int(first.stdout.strip())

    rest = await cli("import", str(path), "--target", b.target)
    assert rest.returncode == 0, rest.stderr
    assert int(rest.stdout.strip()) == new_id
    assert f"project {new_id} already holds this file's first records" in rest.stderr
    assert "already there:" in rest.stderr
    assert normalized(await exported(b, new_id, tmp_path / "done.jsonl")) == normalized(lines)
    counts = await rows(b)
    assert counts == {
        "projects": 1,
        "sessions": 2,
        "episodes": 6,
        "memories": 4,
        "memory_history": 2,
        "entities": 2,
        "relationships": 1,
        "summaries": 2,
        "entities mentions": 2,
        "relationships mentions": 1,
    }
    # And once more: nothing left to write.
    done = await cli("import", str(path), "--target", b.target)
    assert done.returncode == 0 and "nothing to import" in done.stderr, done.stderr
    assert await rows(b) == counts


async def test_a_failed_import_names_its_project_and_into_finishes_it(
    source_file, harness, tmp_path
):
    path, lines = source_file
    b = harness
    empty = await rows(b)
    # Broken before anything but the project record: nothing is written.
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\nnot json\n")
    failed = await cli("import", str(broken), "--target", b.target)
    assert failed.returncode == 1 and "line 2: not an ExportRecord" in failed.stderr
    assert "--into" not in failed.stderr
    assert await rows(b) == empty
    # Broken after the project was created but before any session: nothing
    # on the server ties the project to the file, so the error names it.
    memory = next(x for x in lines if next(iter(json.loads(x))) == "memory")
    broken.write_text(f"{lines[0]}\n{memory}\nnot json\n")
    failed = await cli("import", str(broken), "--target", b.target)
    assert failed.returncode == 1 and "line 3: not an ExportRecord" in failed.stderr
    new_id = int(failed.stderr.split("importing into new project ")[1].split()[0])
    assert f"the same command with --into {new_id} finishes it" in failed.stderr

    done = await cli("import", str(path), "--into", str(new_id), "--target", b.target)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) == new_id
    assert normalized(await exported(b, new_id, tmp_path / "done.jsonl")) == normalized(lines)
    assert (await rows(b))["projects"] == 1

    # --into a project the key cannot see is refused before anything is written.
    before = await rows(b)
    missing = await cli("import", str(path), "--into", "999", "--target", b.target)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr
    assert await rows(b) == before


async def test_import_keeps_the_project_retention(harness, tmp_path):
    h = harness
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(name="kept a week", retention={"seconds": 604800})
        )
    )
    lines = await exported(h, project.id, tmp_path / "p.jsonl")
    b = await start_harness(tmp_path / "b")
    try:
        imported = await cli("import", str(tmp_path / "p.jsonl"), "--target", b.target)
        assert imported.returncode == 0, imported.stderr
        got = await b.memory.GetProject(
            memory_pb2.GetProjectRequest(id=int(imported.stdout.strip()))
        )
        assert got.retention.seconds == 604800
        assert normalized(await exported(b, got.id, tmp_path / "q.jsonl")) == normalized(lines)
    finally:
        await b.close()


async def test_live_episodes_import_again_to_nothing(harness, tmp_path):
    """Episodes stored at now (fractional seconds) compare as the same on a
    second run."""
    a = await start_harness(tmp_path / "a")
    try:
        project = await a.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
        )
        session = await a.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
        )
        for i in range(20):
            await a.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=f"q{i}")
            )
        await exported(a, project.id, tmp_path / "live.jsonl")
    finally:
        await a.close()
    b = harness
    first = await cli("import", str(tmp_path / "live.jsonl"), "--target", b.target)
    assert first.returncode == 0, first.stderr
    before = await rows(b)
    again = await cli("import", str(tmp_path / "live.jsonl"), "--target", b.target)
    assert again.returncode == 0, again.stderr
    assert "nothing to import" in again.stderr and "20 episode" in again.stderr
    assert await rows(b) == before
