"""Upkeep of the SQLite FTS5 keyword indexes: merging their segments.

An FTS5 index is a set of b-tree segments. Every commit that touches it adds
a small segment, and FTS5's own automerge keeps up to three per level, so a
live index holds 10–20. A query looks every phrase up in every segment, and
bm25 counts each phrase's documents over all of them: on 41,000 episodes a
20-session scoped search took 1.15 ms over 14 segments and 0.25 ms over one
(bench/profile_search.py's seed).

``merge_step`` does a bounded slice of merging (FTS5's 'merge' command): at
most ``pages`` pages are written, so one step holds the writer for a few
milliseconds and live writes interleave between steps. With ``usermerge``
at 2 a level is merged as soon as it holds two segments, so the index stays
at about one segment per level (a few in all) while each page is rewritten
about once per level, not on every pass as a full 'optimize' would.
"""

from __future__ import annotations

from nexus_grpc.core.storage import Connection

#: The keyword indexes kept merged, each an FTS5 table.
TABLES = ("episodes_fts", "memories_fts")
#: Merge a level once it holds this many segments (FTS5's minimum; default 4).
USERMERGE = 2


def prepare(conn: Connection, table: str) -> None:
    """Store the merge policy in the index's own configuration (idempotent)."""
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('usermerge', ?)", (USERMERGE,))


def merge_step(conn: Connection, table: str, pages: int) -> bool:
    """Merge up to ``pages`` pages of ``table``'s segments; whether there was
    anything to merge. FTS5 reports no result, so the change count tells: a
    step that merged writes at least two rows, a no-op writes none."""
    before = _total_changes(conn)
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (max(1, pages),))
    return _total_changes(conn) - before >= 2


def _total_changes(conn: Connection) -> int:
    return int(conn.execute("SELECT total_changes()").fetchone()[0])


def segment_count(conn: Connection, table: str) -> int:
    """How many segments ``table`` holds now (one read of its segment index)."""
    row = conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()
    return int(row[0])


def merge_all_step(conn: Connection, table: str, pages: int) -> bool:
    """One bounded step towards a single segment (FTS5's 'merge' with a
    negative page count merges every level, whatever ``usermerge`` says);
    whether it merged anything. Once one segment is left, no entry of a
    deleted row is: they are dropped as the segments holding them merge."""
    before = _total_changes(conn)
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (-max(1, pages),))
    return _total_changes(conn) - before >= 2
