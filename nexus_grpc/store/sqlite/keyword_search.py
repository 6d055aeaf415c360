"""Keyword search on SQLite: FTS5 over the episodes and memories (store/sqlite/ddl.py).

The domain builds its query as an FTS5 expression of quoted words ORed
together (domain/retrieval/keyword_query.py). FTS5 finds the rows; it does
not rank them: its ``bm25()`` weighs words by their frequency in the whole
table, so one tenant's rows would move another's scores and order
(store/keyword_scoring.py). Each word is looked up on its own, confined to
the scope (each row's scope token, or a join on the scope's sessions), and
the ranking is computed in the same statement from what those lookups found:
the scope's size and each word's document frequency in it, and the columns
of each row that hold the word. ``ORDER BY ... LIMIT`` then takes the top
from the scope's rows only, so no other row decides which ones make the cut.
store/postgres/keyword_search.py answers the same questions on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, TimeWindow
from nexus_grpc.core.storage import Connection
from nexus_grpc.store.keyword_scoring import K1, match_words, scope_idf
from nexus_grpc.store.sql import placeholders
from nexus_grpc.store.sqlite.ddl import EPISODE_COLUMNS, MEMORY_COLUMNS

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
_MEMORY_COLUMNS = "{title content}"
# A word's rows with their table's row beside them. CROSS JOIN keeps the
# index's lookup the outer loop: left to itself, the planner walked the
# scope's rows by their own index and evaluated the MATCH once a row (4.8 ms
# against 0.5 for a project's memories).
_EPISODE_ROWS = "episodes_fts f CROSS JOIN episodes e ON e.id = f.rowid"
_MEMORY_ROWS = "memories_fts f CROSS JOIN memories m ON m.id = f.rowid"
#: The SQL name of ``scope_idf`` on the store's connections (store/sqlite/connection.py).
IDF_FUNCTION = "nexus_scope_idf"

# Private-use characters mark matches while the snippet is chosen, so brackets
# already in the text (a "[date]" prefix) are not taken for a match.
_OPEN, _CLOSE = "\ue000", "\ue001"


def register_functions(conn: Any) -> None:
    """What the keyword statements call, on one connection."""
    conn.create_function(IDF_FUNCTION, 2, scope_idf, deterministic=True)


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


def _held_in(fts: str, columns: Sequence[tuple[str, float]]) -> str:
    """SQL for the word's weight in the current row: the sum of the weights of
    the columns that hold it. ``bm25()`` with every other column weighted 0 is
    non-zero exactly when the row's column holds the word; only that is read,
    never its value (the whole table's statistics)."""
    terms = []
    for i, (_, weight) in enumerate(columns):
        only = ", ".join("1.0" if j == i else "0.0" for j in range(len(columns) + 1))
        terms.append(f"{weight} * (bm25({fts}, {only}) < 0)")
    return " + ".join(terms)


def _ranked(lookups: list[str], total: str) -> str:
    """One statement that ranks what the per-word ``lookups`` found (each a
    SELECT of (id, word, weight), one row per matching row and word) by the
    scope's BM25, best first, newest first among equals. ``total`` is a scalar
    subquery: the number of rows in the scope."""
    return (
        f"WITH found(id, word, weight) AS MATERIALIZED ({' UNION ALL '.join(lookups)}),"
        f" words(word, idf) AS MATERIALIZED (SELECT word, {IDF_FUNCTION}(({total}), count(*))"
        "  FROM found GROUP BY word)"
        f" SELECT f.id, sum(w.idf * f.weight * {K1 + 1.0} / (f.weight + {K1})) AS score"
        " FROM found f JOIN words w ON w.word = f.word"
        " GROUP BY f.id ORDER BY score DESC, f.id DESC LIMIT ?"
    )


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def episode_keyword_search(
    conn: Connection,
    match: str,
    session_ids: Sequence[int] | None,
    limit: int,
    window: TimeWindow | None = None,
) -> list[tuple[int, float]]:
    """(episode id, score with higher better), best first; see
    store/episodes.keyword_search. Every count is the scope's: the episodes
    of ``session_ids`` (all, when None) inside ``window``."""
    words = match_words(match)
    if not words or (session_ids is not None and not session_ids):
        return []
    when, when_params = _window(window if window and not window.empty else None, "e")
    held = _held_in("episodes_fts", EPISODE_COLUMNS)
    sessions: tuple[Any, ...] = ()
    if session_ids is None:
        prefix, source, where, of_scope = "", _EPISODE_ROWS, "", ""
    elif _scope_first(conn, len(session_ids)):
        # Within the scope's own postings; with a window each lookup reads
        # the episode row beside them.
        prefix = f"scope : ({' OR '.join(f's{int(i)}' for i in session_ids)}) AND "
        source = _EPISODE_ROWS if when else "episodes_fts f"
        where = ""
        of_scope = f" IN ({','.join(str(int(i)) for i in session_ids)})"
    else:
        # One JSON parameter, not one per session: a project's session list has
        # no upper bound, and SQLite builds cap bound variables (32,766 by default).
        prefix, source = "", _EPISODE_ROWS
        of_scope = " IN (SELECT value FROM json_each(?))"
        where = f" AND e.session_id{of_scope}"
        sessions = (json.dumps([int(i) for i in session_ids]),)
    # The scope's size: its sessions' episode counts (kept by triggers:
    # schema_changes.SESSION_EPISODE_COUNTS), or, inside a window, its
    # episodes counted.
    if when:
        of = f" AND e.session_id{of_scope}" if of_scope else ""
        count = f"SELECT count(*) FROM episodes e WHERE 1{of}{when}"
    else:
        of = f" WHERE id{of_scope}" if of_scope else ""
        count = f"SELECT coalesce(sum(episode_count), 0) FROM sessions{of}"
    lookups, params = [], []
    for n, word in enumerate(words):
        lookups.append(
            f"SELECT f.rowid, {n}, {held} FROM {source} WHERE episodes_fts MATCH ?{where}{when}"
        )
        params += [f"{prefix}{_TEXT_COLUMNS} : {_phrase(word)}", *sessions, *when_params]
    rows = conn.execute(
        _ranked(lookups, count), (*params, *sessions, *when_params, limit)
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


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


def keyword_matching(conn: Connection, kind: str, match: str, ids: Sequence[int]) -> set[int]:
    """The ids among ``ids`` (episodes or memories) that ``match`` matches."""
    if not ids:
        return set()
    columns = _TEXT_COLUMNS if kind == "episodes" else _MEMORY_COLUMNS
    rows = conn.execute(
        f"SELECT rowid FROM {kind}_fts WHERE {kind}_fts MATCH ?"
        " AND rowid IN (SELECT value FROM json_each(?))",
        (f"{columns} : ({match})", json.dumps([int(i) for i in ids])),
    ).fetchall()
    return {int(r[0]) for r in rows}


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
    """(memory id, score with higher better), best first: the owners' postings
    only, then the scope's whole visibility rule (``where`` on alias ``m``).
    Every count is of the owners' own memories."""
    owners = memory_scope_tokens(project_id, user_id)
    words = match_words(match)
    if not owners or not words:
        return []
    held = _held_in("memories_fts", MEMORY_COLUMNS)
    scope = f"scope : ({' OR '.join(owners)}) AND {_MEMORY_COLUMNS} : "
    lookups, bound = [], []
    for n, word in enumerate(words):
        lookups.append(
            f"SELECT f.rowid, {n}, {held} FROM {_MEMORY_ROWS}"
            f" WHERE memories_fts MATCH ? AND {where}"
        )
        bound += [scope + _phrase(word), *params]
    # The texts counted are the owners': the user's USER memories in the
    # caller's tenant and the project's PROJECT memories, each one index's
    # count. The visibility rule's tiers, agent and expiry narrow what is
    # searched, not what is counted: counting through the rule read every row
    # (1.6 ms for a user of 1,000 memories), and the owners' rows are the
    # caller's own either way.
    tenant = tenancy.visible()
    mine = "tenant = ? AND user_id = ?" if tenant is not None else "user_id = ?"
    count = (
        f"SELECT (SELECT count(*) FROM memories WHERE {mine} AND kind = ?)"
        " + (SELECT count(*) FROM memories WHERE kind = ? AND project_id = ?)"
    )
    owners_params = (
        *((tenant,) if tenant is not None else ()),
        user_id,
        int(MemoryKind.USER),
        int(MemoryKind.PROJECT),
        project_id,
    )
    ranked = conn.execute(_ranked(lookups, count), (*bound, *owners_params, limit)).fetchall()
    return [(int(i), float(score)) for i, score in ranked]
