"""RestoreProject and `nexus-grpc import --restore`: an export written back
exactly as it was, server-assigned fields included, all or nothing, by an
admin key only.

The restore's own rules (each bad record named, a collision rolling back, the
stream's limits) are tests/unit/test_restore_rules.py's, on the fakes; what
stays here is each path's wiring over a real server on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.transfer import read_records
from tests.project_transfer import (
    REFERENCES,
    cli,
    exported,
    normalized,
    rows,
    seed,
)
from tests.support import bearer, start_harness, wait_until

# Runs on SQLite and on PostgreSQL (tests/conftest.py): the server restored
# into is the parametrized one.
BOTH_STORES = True

ADMIN = "ops-admin-key-000000000001"
USER_KEY = "orchestrator-key-000000001"
TENANT_ADMIN = "acme-admin-key-0000000001"
TENANT_USER = "acme-user-key-00000000001"
RIVAL = "globex-key-000000000000001"

# Derived index state, rebuilt by the receiving server rather than copied:
# where its embedding and extraction jobs stand. Everything else an export
# holds (times, counters, history authors, sources) must come back as it was.
DERIVED = {"embedding_state", "embedding_error", "extraction_state", "extraction_error"}


def compared(lines: list[str]) -> list[tuple[str, dict]]:
    """``normalized`` (ids replaced by positions), but leaving out only the
    derived fields: ``normalized`` leaves out what `import` cannot keep."""
    return normalized(lines, DERIVED)


@pytest.fixture
def keys(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ADMIN, "name": "ops", "users": "*", "admin": True},
                    {"key": USER_KEY, "name": "orchestrator", "users": "*"},
                    {
                        "key": TENANT_ADMIN,
                        "name": "acme-ops",
                        "users": "*",
                        "admin": True,
                        "tenant": "acme",
                    },
                    {"key": TENANT_USER, "name": "acme-app", "users": "*", "tenant": "acme"},
                    {"key": RIVAL, "name": "globex", "users": "*", "tenant": "globex"},
                ]
            }
        )
    )
    return str(path)


@pytest.fixture
async def target(tmp_path, store_settings, keys):
    """The server restored into: auth on, on the parametrized store."""
    h = await start_harness(tmp_path / "target", auth_keys_file=keys, **store_settings)
    yield h
    await h.close()


async def used_source(tmp_path) -> tuple[list[str], int]:
    """A seeded project whose server-assigned fields are not what a fresh
    write would give (used memories, extracted entities, mentions counted
    again, an authored history), and its export (``tmp_path``/first.jsonl)."""
    a = await start_harness(tmp_path / "source")
    try:
        project_id = await seed(a, "MINE")

        def wear(c):
            c.execute(
                "UPDATE memories SET use_count = 3, last_used_at = 1700000000.5"
                " WHERE title = 'alice likes'"
            )
            c.execute("UPDATE memory_history SET principal = 'ops'")
            c.execute(
                "UPDATE entities SET source = 'extraction', mention_count = 4,"
                " last_seen_at = 1700000100.5 WHERE type = 'person'"
            )
            c.execute("UPDATE relationships SET mention_count = 2")

        await a.app.db.write_sql(wear)
        lines = await exported(a, project_id, tmp_path / "first.jsonl")
        return lines, project_id
    finally:
        await a.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def source(tmp_path_factory) -> tuple[list[str], Path]:
    """``used_source``'s export and its file, made once for the module's tests
    (on SQLite: the server restored into is the parametrized one). No test
    changes it."""
    folder = tmp_path_factory.mktemp("source")
    lines, _ = await used_source(folder)
    return lines, folder / "first.jsonl"


def requests(lines: list[str]) -> list[memory_pb2.RestoreProjectRequest]:
    return [memory_pb2.RestoreProjectRequest(record=r) for r in read_records(lines)]


async def test_restore_round_trips_everything_but_ids(tmp_path, source, target):
    lines, path = source
    restored = await cli(
        "import", "--restore", str(path), "--target", target.target, "--api-key", ADMIN
    )
    assert restored.returncode == 0, restored.stderr
    new_id = int(restored.stdout.strip())
    assert f"restored into new project {new_id}" in restored.stderr
    assert "2 session, 6 episode, 4 memory, 2 memory_revision" in restored.stderr

    second = tmp_path / "second.jsonl"
    done = await cli(
        "export", str(new_id), "-o", str(second), "--target", target.target, "--api-key", ADMIN
    )
    assert done.returncode == 0, done.stderr
    again = second.read_text().splitlines()
    assert compared(again) == compared(lines)
    # The ids are the new server's own.
    assert json.loads(again[0])["project"]["id"] == str(new_id)

    # What `import` would have assigned anew came back as it was.
    def records(kind: str, text: list[str]) -> list[dict]:
        return [json.loads(x)[kind] for x in text if next(iter(json.loads(x))) == kind]

    for kind in ("project", "session", "episode", "memory", "entity", "summary"):
        before, after = records(kind, lines), records(kind, again)
        assert [r.get("create_time") for r in after] == [r.get("create_time") for r in before]
    used = next(m for m in records("memory", again) if m["title"] == "alice likes")
    assert used["use_count"] == "3" and used["last_used_time"] == "2023-11-14T22:13:20.500Z"
    history = records("memory_revision", again)
    assert [r["principal"] for r in history] == ["ops", "ops"]
    assert [r["request_id"] for r in history] == [
        r["request_id"] for r in records("memory_revision", lines)
    ]
    assert all(r["request_id"] for r in history)
    person = next(e for e in records("entity", again) if e["type"] == "person")
    assert person["source"] == "ENTITY_SOURCE_EXTRACTION" and person["mention_count"] == "4"
    assert records("relationship", again)[0]["mention_count"] == "2"
    # Every reference field was compared (mapped), not skipped.
    assert set(REFERENCES) <= {k for _, body in compared(again) for k in body} | {"memory_id"}

    # Extraction is not run again: the graph came with the file.
    def extraction(c):
        return (
            c.execute("SELECT DISTINCT extract_state FROM episodes").fetchall(),
            c.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'extract:episode'").fetchone()[0],
        )

    states, extract_jobs = await target.app.db.read_sql(extraction)
    assert [tuple(s) for s in states] == [(2,)] and extract_jobs == 0


async def test_restored_episodes_become_searchable_once_embedded(source, target):
    lines, _ = source
    answer = await target.memory.RestoreProject(iter(requests(lines)), metadata=bearer(ADMIN))
    assert answer.episodes == 6

    async def embedded() -> bool:
        n = await target.app.db.read_sql(
            lambda c: c.execute("SELECT COUNT(*) FROM episodes WHERE embed_state = 2").fetchone()[0]
        )
        return n == 6

    await wait_until(embedded, timeout=60)
    hits = [
        hit
        async for hit in target.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(
                query="MINE question 3",
                project_id=answer.project_id,
                mode=memory_pb2.SEARCH_MODE_SEMANTIC,
            ),
            metadata=bearer(ADMIN),
        )
    ]
    assert hits and hits[0].episode.user_message == "MINE question 3"
    assert hits[0].sources == [memory_pb2.SEARCH_SOURCE_SEMANTIC]


async def test_only_an_admin_key_restores_and_into_its_own_tenant(source, target):
    """Who may restore is the keys' (rpc/auth.py); which tenant the rows go
    into is the domain's (tests/unit/test_restore_rules.py): here, that a
    tenant admin key's tenant reaches it."""
    lines, path = source
    before = await rows(target)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await target.memory.RestoreProject(iter(requests(lines)), metadata=bearer(USER_KEY))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "RestoreProject needs an admin key" in err.value.details()
    assert await rows(target) == before
    # The command says so, and writes nothing either.
    refused = await cli(
        "import",
        "--restore",
        str(path),
        "--target",
        target.target,
        "--api-key",
        USER_KEY,
    )
    assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stderr
    assert "nothing was restored" in refused.stderr
    assert await rows(target) == before

    # A tenant's admin key restores into its tenant.
    answer = await target.memory.RestoreProject(
        iter(requests(lines)), metadata=bearer(TENANT_ADMIN)
    )

    def tenants(c):
        return {
            t: {r[0] for r in c.execute(f"SELECT DISTINCT tenant FROM {t}").fetchall()}
            for t in ("projects", "sessions", "memories", "entities")
        }

    assert await target.app.db.read_sql(tenants) == {
        "projects": {"acme"},
        "sessions": {"acme"},
        "memories": {"acme"},
        "entities": {"acme"},
    }
    # The tenant's other keys see it; another tenant's do not.
    got = await target.memory.GetProject(
        memory_pb2.GetProjectRequest(id=answer.project_id), metadata=bearer(TENANT_USER)
    )
    assert got.name == "MINE project"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await target.memory.GetProject(
            memory_pb2.GetProjectRequest(id=answer.project_id), metadata=bearer(RIVAL)
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def _kind(line: str) -> str:
    return next(iter(json.loads(line)))


def _edited(lines: list[str], kind: str, change) -> list[str]:
    """The lines with the first record of ``kind`` changed by ``change``."""
    out, done = [], False
    for line in lines:
        record = json.loads(line)
        if not done and _kind(line) == kind:
            change(record[kind])
            done = True
        out.append(json.dumps(record))
    return out


def _cases(lines: list[str]) -> dict[str, tuple[list[str], str]]:
    first_episode = next(i for i, x in enumerate(lines) if _kind(x) == "episode")
    return {
        "an unknown session": (
            _edited(lines, "episode", lambda e: e.update(session_id="999999")),
            f"record {first_episode} (episode): episode.session_id 999999 names no session"
            " record earlier in the stream",
        ),
        "an empty record": (
            [*lines[:2], "{}", *lines[2:]],
            "record 2 (empty): record is empty",
        ),
    }


# One refusal per store, for the wiring: the status and the message naming the
# record over the wire, nothing written. Every other case is
# tests/unit/test_restore_rules.py's; an empty record is refused by the wire's
# conversion (api/restore_convert.py), which only a server runs.
WIRED = {"sqlite": "an empty record", "postgresql": "an unknown session"}


async def test_a_bad_record_is_named_and_nothing_is_restored(source, target, store_kind):
    lines, _ = source
    bad, message = _cases(lines)[WIRED[store_kind]]
    before = await rows(target)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await target.memory.RestoreProject(iter(requests(bad)), metadata=bearer(ADMIN))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert message in err.value.details()
    assert "nothing was restored" in err.value.details()
    assert await rows(target) == before


async def test_a_collision_found_while_writing_rolls_back_everything(source, target):
    """The second restore of a file fails at its first session, whose
    external_id the first restore holds, after its project row was written:
    that row goes too. (The first restore's project is renamed: a project's
    name is unique in its tenant, and the name would be refused first.)"""
    lines, _ = source
    first = await target.memory.RestoreProject(iter(requests(lines)), metadata=bearer(ADMIN))
    await target.memory.UpdateProject(
        memory_pb2.UpdateProjectRequest(
            project=memory_pb2.Project(id=first.project_id, name="restored first"),
            update_mask={"paths": ["name"]},
        ),
        metadata=bearer(ADMIN),
    )
    before = await rows(target)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await target.memory.RestoreProject(iter(requests(lines)), metadata=bearer(ADMIN))
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "record 1 (session): a session with external_id" in err.value.details()
    assert await rows(target) == before


async def test_a_file_that_does_not_parse_sends_nothing(tmp_path, source, target):
    lines, _ = source
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines[:3], "not json", *lines[3:]]) + "\n")
    before = await rows(target)
    done = await cli(
        "import", "--restore", str(broken), "--target", target.target, "--api-key", ADMIN
    )
    assert done.returncode == 1
    assert "line 4: not an ExportRecord" in done.stderr
    assert "nothing was restored" in done.stderr
    assert await rows(target) == before
    # --restore writes a new project: it takes no --into.
    into = await cli("import", "--restore", str(broken), "--into", "1", "--target", target.target)
    assert into.returncode == 2 and "takes no --into" in into.stderr
