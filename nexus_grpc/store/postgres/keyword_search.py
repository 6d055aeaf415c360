"""Keyword search on PostgreSQL: the same answers as the FTS5 queries of
store/episodes.py and store/memories.py, over ``tsvector`` columns.

The domain builds its query as an FTS5 expression of quoted words ORed
together (domain/retrieval/keyword_query.py); here those words become a ``tsquery`` of the same
words ORed, normalised as the columns were indexed (store/postgres/migrations.py's ``nexus``
configuration: English stems and no stop words, as FTS5's porter tokenizer).
Episodes rank as BM25 does: each word's ``ts_rank`` (columns weighted as
SQLite weights them, an episode's own turns 1.0 and the turns around
it 0.5; length-normalised, divided by 1 + log of the document's length) times
the word's inverse document frequency. Memories rank by ``ts_rank`` alone.
Every query is scoped in SQL, as on SQLite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nexus_grpc.core.models import TimeWindow
from nexus_grpc.core.storage import Connection
from nexus_grpc.store.keyword_scoring import match_words

# ts_rank's weights, in the order {D, C, B, A}: A holds an episode's own
# turns, C the neighbouring turns (store/postgres/migrations.py).
_EPISODE_WEIGHTS = "{0, 0.5, 0, 1.0}"
# Private-use characters mark matches while the snippet is chosen (as
# store/episodes.py does), so brackets already in the text are not taken
# for a match.
_OPEN, _CLOSE = "\ue000", "\ue001"
_HEADLINE = f"StartSel={_OPEN}, StopSel={_CLOSE}, MaxWords=16, MinWords=6, ShortWord=2"


def tsquery(match: str) -> str:
    """The FTS5 expression's quoted words as a tsquery of the same words ORed."""
    return " | ".join(_lexeme(w) for w in match_words(match))


def _window(window: TimeWindow | None) -> tuple[str, tuple[float, ...]]:
    if window is None or window.empty:
        return "", ()
    sql, params = "", []
    if window.start is not None:
        sql += " AND e.occur_at >= ?"
        params.append(window.start)
    if window.end is not None:
        sql += " AND e.occur_at < ?"
        params.append(window.end)
    return sql, tuple(params)


def _lexeme(word: str) -> str:
    return "'" + word.replace("'", "''").replace("\\", "\\\\") + "'"


def episode_keyword_search(
    conn: Connection,
    match: str,
    session_ids: Sequence[int] | None,
    limit: int,
    window: TimeWindow | None = None,
) -> list[tuple[int, float]]:
    """(episode id, score with higher better), best first; see episodes.keyword_search.

    Scored as BM25 scores: each word's ``ts_rank`` (its frequency in the
    episode, weighted by column, length-normalised) times the word's inverse
    document frequency in the scope. ``ts_rank`` alone has no IDF, so a
    common word's matches would count as much as a rare one's. On the LoCoMo
    dev split, keyword recall@10 was 0.836 without IDF and 0.874 with it
    (SQLite's bm25 over the whole table, then: 0.879); see docs/scale-out.md.
    The IDF is over the scope, as SQLite's is (store/keyword_scoring.py),
    which costs a count of the scope.
    """
    if session_ids is not None and not session_ids:
        return []
    words = match_words(match)
    if not words:
        return []
    when, when_params = _window(window)
    scope, scope_params = (
        ("", ()) if session_ids is None else (" AND e.session_id = ANY(?)", ([*session_ids],))
    )
    every = " | ".join(_lexeme(w) for w in words)
    # Each word's document frequency among the scope's matching episodes, and
    # the scope's size: one pass over the candidates, one count of the scope.
    counts = conn.execute(
        "SELECT "
        + ", ".join("count(*) FILTER (WHERE e.fts @@ to_tsquery('nexus', ?))" for _ in words)
        + f" FROM episodes e WHERE e.fts @@ to_tsquery('nexus', ?){scope}{when}",
        (*[_lexeme(w) for w in words], every, *scope_params, *when_params),
    ).fetchone()
    total = conn.execute(
        f"SELECT count(*) FROM episodes e WHERE true{scope}{when}", (*scope_params, *when_params)
    ).fetchone()[0]
    weighted = [
        (w, math.log((total - df + 0.5) / (df + 0.5) + 1.0))
        for w, df in zip(words, counts, strict=True)
        if df
    ]
    if not weighted:
        return []
    score = " + ".join(
        f"? * ts_rank('{_EPISODE_WEIGHTS}', e.fts, to_tsquery('nexus', ?), 1)" for _ in weighted
    )
    score_params = [p for w, idf in weighted for p in (idf, _lexeme(w))]
    rows = conn.execute(
        f"SELECT e.id, {score} AS score FROM episodes e"
        f" WHERE e.fts @@ to_tsquery('nexus', ?){scope}{when}"
        " ORDER BY score DESC, e.id DESC LIMIT ?",
        (*score_params, every, *scope_params, *when_params, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def episode_snippets(conn: Connection, match: str, ids: Sequence[int]) -> dict[int, str]:
    """The matching text of each id, hits in [ and ]: from the user message or the
    answer, whichever matched; see episodes.snippets."""
    query = tsquery(match)
    if not ids or not query:
        return {}
    rows = conn.execute(
        "SELECT e.id, ts_headline('nexus', e.user_message, q, ?),"
        " ts_headline('nexus', e.ai_response, q, ?)"
        " FROM episodes e, to_tsquery('nexus', ?) q WHERE e.id = ANY(?) AND e.fts @@ q",
        (_HEADLINE, _HEADLINE, query, [*ids]),
    ).fetchall()
    out = {}
    for row_id, user, answer in rows:
        chosen = user if _OPEN in user or _OPEN not in answer else answer
        out[int(row_id)] = chosen.replace(_OPEN, "[").replace(_CLOSE, "]")
    return out


def keyword_matching(conn: Connection, kind: str, match: str, ids: Sequence[int]) -> set[int]:
    """The ids among ``ids`` (episodes or memories) that ``match`` matches."""
    query = tsquery(match)
    if not ids or not query:
        return set()
    table = "episodes" if kind == "episodes" else "memories"
    rows = conn.execute(
        f"SELECT id FROM {table} WHERE id = ANY(?) AND fts @@ to_tsquery('nexus', ?)",
        ([*ids], query),
    ).fetchall()
    return {int(r[0]) for r in rows}


def episode_scope_sample(conn: Connection, session_ids: Sequence[int], limit: int) -> list[str]:
    rows = conn.execute(
        "SELECT user_message, ai_response FROM episodes WHERE session_id = ANY(?)"
        " ORDER BY id DESC LIMIT ?",
        ([*session_ids], limit),
    ).fetchall()
    return [f"{u}\n{a}" for u, a in rows]


def memory_keyword_search(
    conn: Connection,
    match: str,
    project_id: int,
    user_id: str,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[tuple[int, float]]:
    """(memory id, score with higher better), best first, ``where`` (alias m)
    deciding visibility in the same query; see memories.keyword_search."""
    del project_id, user_id  # ``where`` confines the search to the scope
    query = tsquery(match)
    if not query:
        return []
    rows = conn.execute(
        "SELECT m.id, ts_rank(m.fts, q, 1) AS score"
        " FROM memories m, to_tsquery('nexus', ?) q"
        f" WHERE m.fts @@ q AND {where} ORDER BY score DESC, m.id DESC LIMIT ?",
        (query, *params, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
