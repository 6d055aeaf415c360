"""ExportProject and the `nexus-grpc export` / `nexus-grpc import` commands:
a project moves to another server and exports the same again.

What an export leaves out (an expired memory, an episode past retention, a
user's memories for a key not acting for that user) is decided by
domain/export.py and tested on the fakes (tests/unit/test_export_rules.py);
here are the RPC's and the commands' wiring."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from tests.support import bearer, start_harness

# Runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

NEXUS = str(Path(sys.executable).with_name("nexus-grpc"))
BASE = 1_683_554_160  # 8 May 2023, 13:56 UTC
KEY = "alice-only-export-key-01"
P, U = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t


async def cli(*args: str) -> subprocess.CompletedProcess:
    """The real command, in its own process."""
    return await asyncio.to_thread(
        subprocess.run, [NEXUS, *args], capture_output=True, text=True, timeout=120
    )


async def seed(h, marker: str) -> int:
    """A project with some of everything; returns its id."""
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(
            project=memory_pb2.Project(
                name=f"{marker} project", description="d", notes="n", icon="i"
            )
        )
    )
    sessions = []
    for i in range(2):
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(
                session=memory_pb2.Session(
                    name=f"{marker} s{i}", project_id=project.id, metadata={"n": i}
                )
            )
        )
        sessions.append(session.id)
    episodes = []
    for i in range(6):
        ep = await h.memory.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(
                session_id=sessions[i % 2],
                user_message=f"{marker} question {i}",
                ai_response=f"answer {i}",
                metadata={"turn": i},
                occur_time=ts(BASE + 60 * i),
            )
        )
        episodes.append(ep.id)
    edited = await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=P, project_id=project.id, title="deploy", content="friday"
            )
        )
    )
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=edited.id, title="deploys"),
            update_mask=FieldMask(paths=["title"]),
        )
    )
    await h.memory.UpdateMemory(
        memory_pb2.UpdateMemoryRequest(
            memory=memory_pb2.Memory(id=edited.id, content="tuesday", tier=memory_pb2.TIER_ARCHIVE),
            update_mask=FieldMask(paths=["content", "tier"]),
        )
    )
    for user in ("alice", "bob"):
        await h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=U,
                    user_id=user,
                    project_id=project.id,
                    title=f"{user} likes",
                    content="tea",
                )
            )
        )
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=P,
                project_id=project.id,
                session_id=sessions[0],
                tier=memory_pb2.TIER_TASK,
                title="task note",
                content="ship it",
                expire_time=ts(4_102_444_800),
            )
        )
    )
    a = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name=f"{marker} Ada", type="person", project_id=project.id)
    )
    b = await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(
            name="Postgres", type="technology", notes="db", project_id=project.id
        )
    )
    await h.graph.UpsertRelationship(
        graph_pb2.UpsertRelationshipRequest(
            from_id=a.id, to_id=b.id, label="maintains", notes="since 2020"
        )
    )
    await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(
                session_id=sessions[0],
                content=f"{marker} they talked",
                first_episode_id=episodes[0],
                last_episode_id=episodes[4],
                episode_count=3,
            )
        )
    )
    await h.summary.CreateSummary(
        summary_pb2.CreateSummaryRequest(
            summary=summary_pb2.Summary(project_id=project.id, content="overview")
        )
    )
    return project.id


# What the receiving server assigns itself, and is left out of the comparison.
ASSIGNED = {
    "create_time",
    "update_time",
    "last_seen_time",
    "last_used_time",
    "change_time",
    "request_id",
    "principal",
    "use_count",
    "mention_count",
    "embedding_state",
    "embedding_error",
    "extraction_state",
    "extraction_error",
}
# How the graph came to be (aliases and how each was resolved, which episodes
# said what, merges): only a restore carries it; `nexus-grpc import` writes
# through the public API, where the receiving server records its own.
GRAPH_HISTORY = {"entity_alias", "entity_episode", "relationship_evidence", "entity_merge"}
# Reference fields, by the kind of record they name.
REFERENCES = {
    "session_id": "session",
    "project_id": "project",
    "memory_id": "memory",
    "from_id": "entity",
    "to_id": "entity",
    "first_episode_id": "episode",
    "last_episode_id": "episode",
}


def normalized(lines: list[str]) -> list[tuple[str, dict]]:
    """Each record with every id replaced by the position of its row among
    the export's rows of that kind, and the assigned fields left out."""
    records = [json.loads(line) for line in lines]
    order: dict[str, dict[str, int]] = {}
    for record in records:
        [(kind, body)] = record.items()
        if kind in GRAPH_HISTORY:
            continue
        seen = order.setdefault(kind, {})
        seen[body["id"]] = len(seen)

    def clean(kind: str, body: dict) -> dict:
        out = {}
        for key, value in body.items():
            if key in ASSIGNED:
                continue
            if key == "id":
                out[key] = order[kind][value]
            elif key in REFERENCES and value not in ("0", 0):
                out[key] = order[REFERENCES[key]][value]
            elif key == "previous":
                out[key] = clean("memory", value)
            else:
                out[key] = value
        return out

    return [
        (k, clean(k, b)) for record in records for k, b in record.items() if k not in GRAPH_HISTORY
    ]


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

TABLES = (
    "projects",
    "sessions",
    "episodes",
    "memories",
    "memory_history",
    "entities",
    "relationships",
    "summaries",
)


async def rows(h) -> dict[str, int]:
    """Every table's row count, and the graph's mention counters' sum (an
    entity or relationship upserted again counts one more mention)."""

    def read(c):
        got = {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
        for t in ("entities", "relationships"):
            got[f"{t} mentions"] = c.execute(
                f"SELECT COALESCE(SUM(mention_count), 0) FROM {t}"
            ).fetchone()[0]
        return got

    return await h.app.db.read_sql(read)


async def exported(h, project_id: int, path: Path) -> list[str]:
    done = await cli("export", str(project_id), "-o", str(path), "--target", h.target)
    assert done.returncode == 0, done.stderr
    return (await asyncio.to_thread(path.read_text)).splitlines()


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
