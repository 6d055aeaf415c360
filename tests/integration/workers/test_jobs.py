"""The jobs outbox: claims, one target's jobs never running at once, and the
tenant a job is queued in."""

from __future__ import annotations

import sqlite3

from nexus_grpc.store import episodes, jobs, memories, sessions
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect
from nexus_grpc.store.sqlite.migrations import migrate


def _db(tmp_path) -> sqlite3.Connection:
    conn = sqlite_connect(tmp_path / "db.sqlite3", isolation_level=None)
    migrate(conn)
    return conn


def test_a_target_with_a_running_job_waits_for_it(tmp_path):
    conn = _db(tmp_path)
    jobs.SqlJobs(conn).enqueue(jobs.INDEX_EPISODE, [1, 2])
    first = jobs.SqlJobs(conn).claim(jobs.INDEX_EPISODE, 10)
    assert sorted(j.target_id for j in first) == [1, 2]
    # A delete for episode 1 arrives while its upsert is running; 3 is new.
    jobs.SqlJobs(conn).enqueue(jobs.INDEX_EPISODE, [1, 3])
    second = jobs.SqlJobs(conn).claim(jobs.INDEX_EPISODE, 10)
    assert [j.target_id for j in second] == [3]  # 1 waits: its first job still runs
    assert jobs.SqlJobs(conn).claim(jobs.INDEX_EPISODE, 10) == []
    conn.execute("DELETE FROM jobs WHERE id = ?", (next(j.id for j in first if j.target_id == 1),))
    third = jobs.SqlJobs(conn).claim(jobs.INDEX_EPISODE, 10)
    assert [j.target_id for j in third] == [1]


def test_other_kinds_do_not_block_each_other(tmp_path):
    conn = _db(tmp_path)
    jobs.SqlJobs(conn).enqueue(jobs.INDEX_EPISODE, [7])
    assert len(jobs.SqlJobs(conn).claim(jobs.INDEX_EPISODE, 10)) == 1
    jobs.SqlJobs(conn).enqueue(jobs.EXTRACT_EPISODE, [7])
    assert [j.target_id for j in jobs.SqlJobs(conn).claim(jobs.EXTRACT_EPISODE, 10)] == [7]


def test_deleting_a_row_queues_its_index_job_in_the_rows_tenant(conn):
    """The job that deletes a point is queued while its row is still there, so
    one tenant's deletes take turns with other tenants' work like the rest
    (a job whose target is gone has no tenant)."""
    session = sessions.SqlSessions(conn).insert("s", "", 0, {}, "atlas")
    episode = episodes.SqlEpisodes(conn).insert(session.id, "hi", "", {}, None)
    memory = memories.MemoryRows(conn).insert(
        {"kind": 2, "title": "t", "content": "c", "tier": 3, "project_id": 0, "agent_id": "",
         "user_id": "ann", "session_id": 0, "confidence": 1.0, "metadata": {}},
        None,
        "atlas",
    )  # fmt: skip
    # The jobs are the domain's (domain/erasure.drop_points, domain/memory_upkeep.py).
    jobs.SqlJobs(conn).enqueue(jobs.INDEX_EPISODE, [episode.id])
    episodes.SqlEpisodes(conn).delete(episode.id)
    jobs.SqlJobs(conn).enqueue(jobs.INDEX_MEMORY, [memory.id])
    memories.MemoryRows(conn).delete(memory.id)
    queued = conn.execute("SELECT kind, target_id, tenant FROM jobs WHERE state = 'pending'")
    assert sorted(tuple(r) for r in queued) == [
        (jobs.INDEX_EPISODE, episode.id, "atlas"),
        (jobs.INDEX_MEMORY, memory.id, "atlas"),
    ]
