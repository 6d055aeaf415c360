"""Keyword search on SQLite: FTS5 over the episodes and memories (store/sqlite/ddl.py).

The domain builds its query as an FTS5 expression of quoted words ORed
together (domain/retrieval/keyword_query.py); bm25 ranks with the columns
weighted as the index was configured, so ``ORDER BY rank ... LIMIT`` is FTS5's
own top-N. Each row's scope token confines a search to one scope's postings
(store/postgres/keyword_search.py answers the same questions on PostgreSQL).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nexus_grpc.core.models import TimeWindow
from nexus_grpc.core.storage import Connection
from nexus_grpc.store.sql import placeholders

#: When to search inside the scope's own postings (its sessions' scope tokens)
#: rather than walk the words' postings and filter by session. The first costs
#: about the scope's size, the second about the table's: measured on a 21,000
#: episode table (bench/profile_search.py's seed), 1 session took 0.12 ms against
#: 0.76, 8 sessions 0.38 against 0.72, and 20 sessions 1.16 against 0.61; the
#: second grows with the table, the first does not. So a scope goes first when
#: it has at most one session per SESSIONS_PER_ROWS rows of the table (and
#: always at SCOPE_FIRST_MIN_SESSIONS or fewer).
SCOPE_FIRST_MIN_SESSIONS = 4
SESSIONS_PER_ROWS = 2_000
#: Sessions written into one MATCH; past this, SQLite's expression depth is near.
SCOPE_FIRST_MAX_SESSIONS = 500
_TEXT_COLUMNS = "{user_message ai_response context}"

# Private-use characters mark matches while the snippet is chosen, so brackets
# already in the text (a "[date]" prefix) are not taken for a match.
_OPEN, _CLOSE = "\ue000", "\ue001"


def _window(window: TimeWindow | None, alias: str) -> tuple[str, tuple[float, ...]]:
    """The occur_at condition of a [start, end) window (" AND ..."), or nothing."""
    if window is None:
        return "", ()
    sql, params = "", []
    if window.start is not None:
        sql += f" AND {alias}.occur_at >= ?"
        params.append(window.start)
    if window.end is not None:
        sql += f" AND {alias}.occur_at < ?"
        params.append(window.end)
    return sql, tuple(params)


def episode_keyword_search(
    conn: Connection,
    match: str,
    session_ids: Sequence[int] | None,
    limit: int,
    window: TimeWindow | None = None,
) -> list[tuple[int, float]]:
    """(episode id, bm25 score with higher better), best first; see
    store/episodes.keyword_search."""
    words = f"{_TEXT_COLUMNS} : ({match})"
    when, when_params = _window(window if window and not window.empty else None, "e")
    # With a window each shape reads the episode row beside its postings.
    source = "episodes_fts f JOIN episodes e ON e.id = f.rowid" if when else "episodes_fts f"
    if session_ids is None:
        rows = conn.execute(
            f"SELECT f.rowid, f.rank FROM {source} WHERE episodes_fts MATCH ?{when}"
            " ORDER BY f.rank LIMIT ?",
            (words, *when_params, limit),
        ).fetchall()
    elif not session_ids:
        return []
    elif _scope_first(conn, len(session_ids)):
        scope = " OR ".join(f"s{int(i)}" for i in session_ids)
        rows = conn.execute(
            f"SELECT f.rowid, f.rank FROM {source} WHERE episodes_fts MATCH ?{when}"
            " ORDER BY f.rank LIMIT ?",
            (f"scope : ({scope}) AND {words}", *when_params, limit),
        ).fetchall()
    else:
        # One JSON parameter, not one per session: a project's session list has
        # no upper bound, and SQLite builds cap bound variables (32,766 by default).
        rows = conn.execute(
            "SELECT f.rowid, f.rank FROM episodes_fts f"
            " JOIN episodes e ON e.id = f.rowid"
            " WHERE episodes_fts MATCH ? AND e.session_id IN (SELECT value FROM json_each(?))"
            f"{when} ORDER BY f.rank LIMIT ?",
            (words, json.dumps([int(i) for i in session_ids]), *when_params, limit),
        ).fetchall()
    return [(r[0], -float(r[1])) for r in rows]


def _scope_first(conn: Connection, sessions: int) -> bool:
    if sessions <= SCOPE_FIRST_MIN_SESSIONS:
        return True
    if sessions > SCOPE_FIRST_MAX_SESSIONS:
        return False
    # The largest id stands in for the table's size: one step down the b-tree.
    rows = conn.execute("SELECT MAX(id) FROM episodes").fetchone()[0] or 0
    return sessions * SESSIONS_PER_ROWS <= rows


def episode_snippets(conn: Connection, match: str, ids: Sequence[int]) -> dict[int, str]:
    """The matching text of each id; see store/episodes.snippets."""
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT rowid, snippet(episodes_fts, 0, '{_OPEN}', '{_CLOSE}', '…', 16),"
        f" snippet(episodes_fts, 1, '{_OPEN}', '{_CLOSE}', '…', 16)"
        f" FROM episodes_fts WHERE episodes_fts MATCH ? AND rowid IN ({placeholders(len(ids))})",
        (f"{_TEXT_COLUMNS} : ({match})", *ids),
    ).fetchall()
    out = {}
    for rowid, user, answer in rows:
        chosen = user if _OPEN in user or _OPEN not in answer else answer
        out[rowid] = chosen.replace(_OPEN, "[").replace(_CLOSE, "]")
    return out


def episode_scope_sample(conn: Connection, session_ids: Sequence[int], limit: int) -> list[str]:
    """The texts of up to ``limit`` of the scope's most recent episodes."""
    if len(session_ids) <= SCOPE_FIRST_MAX_SESSIONS:
        rows = conn.execute(
            "SELECT user_message, ai_response FROM episodes WHERE session_id IN"
            f" ({placeholders(len(session_ids))}) ORDER BY id DESC LIMIT ?",
            (*session_ids, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT user_message, ai_response FROM episodes WHERE session_id IN"
            " (SELECT value FROM json_each(?)) ORDER BY id DESC LIMIT ?",
            (json.dumps([int(i) for i in session_ids]), limit),
        ).fetchall()
    return [f"{u}\n{a}" for u, a in rows]


def memory_scope_tokens(project_id: int, user_id: str) -> list[str]:
    """The memories_fts scope tokens of a search's owners (store/sqlite/ddl.py)."""
    tokens = []
    if project_id:
        tokens.append(f"p{int(project_id)}")
    if user_id:
        tokens.append("u" + user_id.encode().hex())
    return tokens


def memory_keyword_search(
    conn: Connection,
    match: str,
    project_id: int,
    user_id: str,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[tuple[int, float]]:
    """(memory id, bm25 with higher better), best first: the owners' postings
    only, then the scope's whole visibility rule (``where`` on alias ``m``)."""
    owners = memory_scope_tokens(project_id, user_id)
    if not owners:
        return []
    expression = f"scope : ({' OR '.join(owners)}) AND {{title content}} : ({match})"
    ranked = conn.execute(
        "SELECT f.rowid, f.rank FROM memories_fts f"
        " JOIN memories m ON m.id = f.rowid"
        f" WHERE memories_fts MATCH ? AND {where}"
        " ORDER BY f.rank LIMIT ?",
        (expression, *params, limit),
    ).fetchall()
    return [(int(i), -float(score)) for i, score in ranked]
