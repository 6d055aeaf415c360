"""Episodes table, its FTS5 index, and the jobs every new episode queues."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.domain.models import Episode, JobState
from nexus_grpc.errors import NotFound
from nexus_grpc.store import jobs
from nexus_grpc.store.db import now, placeholders

# Seed 002's summary trigger: about 200 tokens of text (4 characters a
# token) and at least 5 episodes since the last summary.
SUMMARY_MIN_CHARS = 800
SUMMARY_MIN_NEW_EPISODES = 5


def _row(row: sqlite3.Row) -> Episode:
    return Episode(
        id=row["id"],
        session_id=row["session_id"],
        user_message=row["user_message"],
        ai_response=row["ai_response"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        embed_state=JobState(row["embed_state"]),
        embed_error=row["embed_error"],
        extract_state=JobState(row["extract_state"]),
        extract_error=row["extract_error"],
    )


def find_by_request_id(
    conn: sqlite3.Connection, session_id: int, request_id: str
) -> Episode | None:
    row = conn.execute(
        "SELECT * FROM episodes WHERE session_id = ? AND request_id = ?", (session_id, request_id)
    ).fetchone()
    return _row(row) if row else None


def insert(
    conn: sqlite3.Connection,
    session_id: int,
    user_message: str,
    ai_response: str,
    metadata: Mapping[str, Any],
    request_id: str | None,
) -> Episode:
    """Insert an episode and queue its embedding, extraction and (maybe) summary."""
    cur = conn.execute(
        "INSERT INTO episodes (session_id, user_message, ai_response, metadata, request_id,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, user_message, ai_response, json.dumps(metadata), request_id or None, now()),
    )
    episode_id = cur.lastrowid or 0
    jobs.enqueue(conn, jobs.INDEX_EPISODE, [episode_id])
    jobs.enqueue(conn, jobs.EXTRACT_EPISODE, [episode_id])
    if summary_due(conn, session_id):
        jobs.enqueue(conn, jobs.SUMMARIZE_SESSION, [session_id])
    return get(conn, episode_id)


def summary_due(conn: sqlite3.Connection, session_id: int) -> bool:
    """Whether the session now needs a summary.

    This runs inside every CreateEpisode transaction, so each query is
    bounded: by an index lookup, or by a LIMIT that cannot change the answer.
    """
    if conn.execute(
        "SELECT 1 FROM jobs WHERE kind = ? AND target_id = ? AND state = 'pending'",
        (jobs.SUMMARIZE_SESSION, session_id),
    ).fetchone():
        return False  # already queued; that job will read this episode too
    covered = conn.execute(
        "SELECT COALESCE(MAX(last_episode_id), 0) FROM summaries WHERE session_id = ?",
        (session_id,),
    ).fetchone()[0]
    new = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM episodes WHERE session_id = ? AND id > ? LIMIT ?)",
        (session_id, covered, SUMMARY_MIN_NEW_EPISODES),
    ).fetchone()[0]
    if new < SUMMARY_MIN_NEW_EPISODES:
        return False
    # user_message is never blank, so every episode has at least one character:
    # summing more than SUMMARY_MIN_CHARS episodes cannot change the answer.
    chars = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(user_message) + LENGTH(ai_response)), 0) FROM"
        " (SELECT user_message, ai_response FROM episodes WHERE session_id = ?"
        " ORDER BY id LIMIT ?)",
        (session_id, SUMMARY_MIN_CHARS + 1),
    ).fetchone()[0]
    return bool(chars > SUMMARY_MIN_CHARS)


def get(conn: sqlite3.Connection, episode_id: int, tenant: str | None = None) -> Episode:
    """The episode; NOT_FOUND, with one message, when it does not exist or its
    session belongs to another tenant (``tenant`` None: any tenant)."""
    if tenant is None:
        row = conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
    else:
        row = conn.execute(
            "SELECT e.* FROM episodes e JOIN sessions s ON s.id = e.session_id"
            " WHERE e.id = ? AND s.tenant = ?",
            (episode_id, tenant),
        ).fetchone()
    if row is None:
        raise NotFound(f"episode {episode_id} does not exist")
    return _row(row)


def get_many(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Episode]:
    if not ids:
        return {}
    marks = placeholders(len(ids))
    rows = conn.execute(f"SELECT * FROM episodes WHERE id IN ({marks})", tuple(ids)).fetchall()
    return {r["id"]: _row(r) for r in rows}


def list_page(
    conn: sqlite3.Connection, session_id: int, before_id: int | None, limit: int
) -> list[Episode]:
    """Newest first; the page token holds the smallest id already returned."""
    rows = conn.execute(
        "SELECT * FROM episodes WHERE session_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
        (session_id, before_id if before_id is not None else 2**62, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def list_for_session(
    conn: sqlite3.Connection, session_id: int, after_id: int = 0, limit: int = 10_000
) -> list[Episode]:
    rows = conn.execute(
        "SELECT * FROM episodes WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
        (session_id, after_id, limit),
    ).fetchall()
    return [_row(r) for r in rows]


def delete(conn: sqlite3.Connection, episode_id: int, tenant: str | None = None) -> None:
    get(conn, episode_id, tenant)
    conn.execute("DELETE FROM episodes WHERE id = ?", (episode_id,))
    jobs.enqueue(conn, jobs.INDEX_EPISODE, [episode_id])


def set_embed_state(
    conn: sqlite3.Connection, ids: Sequence[int], state: JobState, error: str = ""
) -> None:
    conn.executemany(
        "UPDATE episodes SET embed_state = ?, embed_error = ? WHERE id = ?",
        [(int(state), error[:2000], i) for i in ids],
    )


def mark_indexed_before(conn: sqlite3.Connection, before: float) -> None:
    """After a full rebuild: every episode that existed when it began is indexed."""
    conn.execute(
        "UPDATE episodes SET embed_state = ?, embed_error = '' WHERE created_at <= ?",
        (int(JobState.DONE), before),
    )


def failed_extraction_ids(conn: sqlite3.Connection, tenant: str) -> list[int]:
    rows = conn.execute(
        "SELECT e.id FROM episodes e JOIN sessions s ON s.id = e.session_id"
        " WHERE e.extract_state = ? AND s.tenant = ? ORDER BY e.id",
        (int(JobState.FAILED), tenant),
    )
    return [int(r[0]) for r in rows]


def set_extract_state(
    conn: sqlite3.Connection, episode_id: int, state: JobState, error: str = ""
) -> None:
    conn.execute(
        "UPDATE episodes SET extract_state = ?, extract_error = ? WHERE id = ?",
        (int(state), error[:2000], episode_id),
    )


def keyword_search(
    conn: sqlite3.Connection, match: str, session_ids: Sequence[int] | None, limit: int
) -> list[tuple[int, float, str]]:
    """(episode id, bm25 score with higher better, snippet), best first.

    session_ids None means every session (used only by admin paths).
    """
    snippet = "snippet(episodes_fts, -1, '[', ']', '…', 16)"
    if session_ids is None:
        rows = conn.execute(
            f"SELECT rowid, bm25(episodes_fts), {snippet} FROM episodes_fts"
            " WHERE episodes_fts MATCH ? ORDER BY bm25(episodes_fts) LIMIT ?",
            (match, limit),
        ).fetchall()
    else:
        if not session_ids:
            return []
        # One JSON parameter, not one per session: a project's session list has
        # no upper bound, and SQLite builds cap bound variables (32,766 by default).
        rows = conn.execute(
            f"SELECT f.rowid, bm25(episodes_fts), {snippet} FROM episodes_fts f"
            " JOIN episodes e ON e.id = f.rowid"
            " WHERE episodes_fts MATCH ? AND e.session_id IN (SELECT value FROM json_each(?))"
            " ORDER BY bm25(episodes_fts) LIMIT ?",
            (match, json.dumps([int(i) for i in session_ids]), limit),
        ).fetchall()
    return [(r[0], -float(r[1]), r[2]) for r in rows]
