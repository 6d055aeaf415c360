"""GetProjectStats on the wire: a key for every user reads a whole response
(every count the servicer maps), a read mask as the client sends it, and a
bad field refused (the status and the field; each field's check in
tests/unit/test_api_stats_request.py). The counting rules (a user key counts
only its users' USER memories, another tenant's project is NOT_FOUND as a
missing one, retention and archive tiers) are tested on the use case, on the
fakes, in tests/unit/test_stats_project_counts.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient, NexusInvalidArgument
from nexus_grpc.core.models import JobState
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.store import episodes as episode_store
from tests.support import start_harness, wait_until

BOTH_STORES = True

TEAM_KEY = "acme-all-users-key-00000001"
ALICE_KEY = "acme-alice-only-key-0000001"
RIVAL_KEY = "rival-tenant-key-0000000001"
DAY = 86_400


def key_file(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": TEAM_KEY, "name": "team", "users": "*", "tenant": "acme"},
                    {"key": ALICE_KEY, "name": "alice-app", "users": ["alice"], "tenant": "acme"},
                    {"key": RIVAL_KEY, "name": "rival", "users": "*", "tenant": "other"},
                ]
            }
        )
    )
    return path


def ts(seconds: float) -> Timestamp:
    t = Timestamp()
    t.FromSeconds(int(seconds))
    return t


@pytest.fixture
async def world(tmp_path, store_settings):
    h = await start_harness(
        tmp_path / "data", auth_keys_file=str(key_file(tmp_path / "keys.json")), **store_settings
    )
    team = NexusClient(h.target, api_key=TEAM_KEY)
    try:
        project = await team.create_project(project=memory_pb2.Project(name="p"))
        pid = project.id
        s_alice = await team.create_session(
            session=memory_pb2.Session(project_id=pid, user_id="alice")
        )
        s_bob = await team.create_session(session=memory_pb2.Session(project_id=pid, user_id="bob"))
        episodes = [
            await team.create_episode(session_id=s.id, user_message=f"m{i}", ai_response="ok")
            for i, s in enumerate([s_alice, s_alice, s_bob])
        ]

        written = iter(range(1000))

        def memory(**fields) -> memory_pb2.Memory:
            # Words of their own: the same words in one tier are one memory.
            return memory_pb2.Memory(
                title="t", content=f"fact {next(written)}", tier=memory_pb2.TIER_LONGTERM, **fields
            )

        project_kind, user_kind = memory_pb2.MEMORY_KIND_PROJECT, memory_pb2.MEMORY_KIND_USER
        await team.create_memory(memory=memory(kind=project_kind, project_id=pid))
        archived = memory(kind=project_kind, project_id=pid)
        archived.tier = memory_pb2.TIER_ARCHIVE
        await team.create_memory(memory=archived)
        for user in ("alice", "alice", "bob"):
            await team.create_memory(memory=memory(kind=user_kind, project_id=pid, user_id=user))
        bob_archived = memory(kind=user_kind, project_id=pid, user_id="bob")
        bob_archived.tier = memory_pb2.TIER_ARCHIVE
        await team.create_memory(memory=bob_archived)
        # Outside any project: alice's, but not the project's.
        await team.create_memory(memory=memory(kind=user_kind, user_id="alice"))

        names = ["Ana", "Bruno", "Carla", "Dora"]
        ids = [(await team.upsert_entity(name=n, type="person", project_id=pid)).id for n in names]
        a, b, c, d = ids
        for to in (b, c, d):
            await team.upsert_relationship(from_id=a, to_id=to, label="knows")
        await team.upsert_relationship(
            from_id=b, to_id=c, label="knows", valid_time=ts(time.time() - 2 * DAY),
            invalid_time=ts(time.time() - DAY),
        )  # fmt: skip

        # One piece of work given up: the third episode's memory formation.
        await h.app.db.write_sql(
            lambda conn: episode_store.SqlEpisodes(conn).set_memory_state(
                episodes[2].id, JobState.FAILED, "gave up"
            )
        )

        async def embedded() -> bool:
            got = [await team.get_episode(id=e.id) for e in episodes]
            return all(e.embedding_state == memory_pb2.JOB_STATE_DONE for e in got)

        await wait_until(embedded)
        yield h, pid, ids
    finally:
        await team.close()
        await h.close()


async def stats(key: str, target: str, project_id: int, **kw) -> memory_pb2.ProjectStats:
    async with NexusClient(target, api_key=key) as client:
        return await client.get_project_stats(project_id=project_id, **kw)


async def test_a_key_for_every_user_counts_everything_the_reads_return(world):
    h, pid, (a, b, c, d) = world
    got = await stats(TEAM_KEY, h.target, pid, top_entities=2)
    assert (got.project_id, got.sessions, got.episodes) == (pid, 2, 3)
    assert (got.project_memories, got.user_memories, got.archived_memories) == (2, 4, 2)
    assert [(u.user_id, u.memories) for u in got.users] == [("alice", 2), ("bob", 2)]
    assert got.user_count == 2
    # Four entities; three facts hold now (b->c ended yesterday).
    assert (got.entities, got.relationships) == (4, 3)
    # a has three relationships; b and c two each (the ended one counts): b by id.
    assert list(got.top_entity_ids) == [a, b]
    # No LLM: every extraction waits, and so does the formation of alice's two
    # episodes; bob's formation was given up.
    assert (got.jobs_pending, got.jobs_failed) == (3 + 2, 1)


async def test_a_read_mask_counts_only_what_it_names(world):
    h, pid, (a, _b, _c, _d) = world
    only_users = FieldMask(paths=["users", "user_count"])
    got = await stats(TEAM_KEY, h.target, pid, top_entities=1, read_mask=only_users)
    assert [(u.user_id, u.memories) for u in got.users] == [("alice", 2), ("bob", 2)]
    assert (got.user_count, got.user_memories, got.project_memories) == (2, 4, 2)
    # Not asked: not counted.
    assert (got.sessions, got.episodes, got.jobs_pending, got.entities) == (0, 0, 0, 0)
    assert not got.top_entity_ids
    only_hubs = FieldMask(paths=["top_entity_ids"])
    hubs = await stats(TEAM_KEY, h.target, pid, top_entities=1, read_mask=only_hubs)
    assert list(hubs.top_entity_ids) == [a] and hubs.episodes == 0 and not hubs.users


async def test_bad_input_is_refused_naming_the_field(world):
    """One field over the wire (the wiring); each field's check is tested on
    the use case in tests/unit/test_api_stats_request.py."""
    h, pid, _ = world
    with pytest.raises(NexusInvalidArgument) as refused:
        await stats(TEAM_KEY, h.target, project_id=pid, top_entities=101)
    assert [v.field for v in refused.value.field_violations] == ["top_entities"]
