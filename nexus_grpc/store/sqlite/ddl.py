"""The declared schema (store/schema.py) in SQLite's words, and what only SQLite has.

SQLite's own: the keyword indexes are FTS5 tables kept by triggers, reading
each row through a view that adds its scope token, so a search confined to
one session's episodes or one owner's memories intersects that scope's
postings instead of walking every match (docs/recall.md); an edge's two
entities belong to one graph by a trigger.
"""

from __future__ import annotations

from nexus_grpc.store import schema, schema_changes
from nexus_grpc.store.schema import Column, Identity, Index, Table, Type
from nexus_grpc.store.schema_changes import Operation

BACKEND = "sqlite"

_TYPES = {Type.KEY: "INTEGER", Type.INT: "INTEGER", Type.REAL: "REAL", Type.TEXT: "TEXT"}


def literal(value: str | int | float) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def column_sql(table: Table, column: Column) -> str:
    parts = [column.name, _TYPES[column.type]]
    if table.primary_key == (column.name,):
        parts.append("PRIMARY KEY")
        if table.identity is Identity.NEVER_REUSED:
            parts.append("AUTOINCREMENT")
    elif not column.null:
        parts.append("NOT NULL")
    if column.default is not None:
        parts.append(f"DEFAULT {literal(column.default)}")
    if column.nocase:
        parts.append("COLLATE NOCASE")
    if column.references:
        target, key = column.target
        parts.append(f"REFERENCES {target}({key})")
        if column.on_delete:
            parts.append(f"ON DELETE {column.on_delete}")
    return " ".join(parts)


def create_table(table: Table, *, if_missing: bool = False) -> list[str]:
    lines = [column_sql(table, c) for c in schema.columns_of(table.name, BACKEND)]
    if len(table.primary_key) > 1:
        lines.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    for name, columns in table.unique:
        lines.append(f"CONSTRAINT {name} UNIQUE ({', '.join(columns)})")
    body = ",\n    ".join(lines)
    guard = "IF NOT EXISTS " if if_missing else ""
    suffix = " WITHOUT ROWID" if table.without_rowid else ""
    return [
        f"CREATE TABLE {guard}{table.name} (\n    {body}\n){suffix}",
        *(create_index(table, i, if_missing=if_missing) for i in table.indexes),
    ]


def create_index(table: Table, index: Index, *, if_missing: bool = False) -> str:
    # A nocase column's index compares as the column does (COLLATE NOCASE).
    unique = "UNIQUE " if index.unique else ""
    guard = "IF NOT EXISTS " if if_missing else ""
    where = f" WHERE {index.where}" if index.where else ""
    return (
        f"CREATE {unique}INDEX {guard}{index.name} ON {table.name}"
        f"({', '.join(index.columns)}){where}"
    )


def operation(op: Operation) -> list[str]:
    """The statements that carry out one declared schema change."""
    return schema_changes.render(
        op,
        BACKEND,
        lambda table, column: f"ALTER TABLE {table.name} ADD COLUMN {column_sql(table, column)}",
        lambda table: create_table(table, if_missing=True),
        lambda table, index: create_index(table, index, if_missing=True),
    )


# The keyword indexes: FTS5 over a view that adds each row's scope token
# ("s<session>" for an episode; "p<project>" for a PROJECT memory, "u<hex of
# the user id>" for a USER memory), the last column. Each indexed column has a
# weight in a row's keyword score (store/sqlite/keyword_search.py): an
# episode's context (the turns around it) counts at half its own text's.
_MEMORY_SCOPE = (
    "CASE {row}kind WHEN 1 THEN 'p' || {row}project_id ELSE 'u' || hex({row}user_id) END"
)
_EPISODE_SCOPE = "'s' || {row}session_id"

#: (column, weight) of each keyword index, in the index's column order.
EPISODE_COLUMNS = (("user_message", 1.0), ("ai_response", 1.0), ("context", 0.5))
MEMORY_COLUMNS = (("title", 1.0), ("content", 1.0))


def _bm25(columns: tuple[tuple[str, float], ...]) -> str:
    # The index's configured rank: FTS5's bm25 with these weights and 0 for
    # the scope. Searches no longer order by it (its statistics are the whole
    # table's); it stays as the index was created.
    return f"bm25({', '.join(str(w) for _, w in columns)}, 0.0)"


KEYWORD_INDEXES: tuple[tuple[str, tuple[str, ...], str, str, tuple[str, ...]], ...] = (
    # (table, indexed columns, scope expression, rank, columns whose change re-indexes)
    (
        "episodes",
        tuple(c for c, _ in EPISODE_COLUMNS),
        _EPISODE_SCOPE,
        _bm25(EPISODE_COLUMNS),
        ("user_message", "ai_response", "context", "session_id"),
    ),
    (
        "memories",
        tuple(c for c, _ in MEMORY_COLUMNS),
        _MEMORY_SCOPE,
        _bm25(MEMORY_COLUMNS),
        ("title", "content", "kind", "project_id", "user_id"),
    ),
)


def _keyword_index(
    table: str, columns: tuple[str, ...], scope: str, rank: str, watched: tuple[str, ...]
) -> list[str]:
    fts, fields = f"{table}_fts", ", ".join((*columns, "scope"))

    def values(row: str) -> str:
        return ", ".join(
            (f"{row}.id", *(f"{row}.{c}" for c in columns), scope.format(row=row + "."))
        )

    add = f"INSERT INTO {fts}(rowid, {fields}) VALUES ({values('new')});"
    remove = f"INSERT INTO {fts}({fts}, rowid, {fields}) VALUES ('delete', {values('old')});"
    return [
        f"CREATE VIEW {fts}_source AS SELECT id, {', '.join(columns)},"
        f" {scope.format(row='')} AS scope FROM {table}",
        f"CREATE VIRTUAL TABLE {fts} USING fts5({fields}, content='{fts}_source',"
        " content_rowid='id', tokenize='porter unicode61')",
        f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} BEGIN {add} END",
        f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} BEGIN {remove} END",
        f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {', '.join(watched)} ON {table}"
        f" BEGIN {remove} {add} END",
        f"INSERT INTO {fts}({fts}, rank) VALUES ('rank', '{rank}')",
    ]


# An edge never joins two graphs: the store's guarantee behind the API's
# FAILED_PRECONDITION (an entity's graph never changes).
SAME_GRAPH_TRIGGER = """CREATE TRIGGER relationships_same_graph BEFORE INSERT ON relationships
WHEN (SELECT project_id || '/' || session_id FROM entities WHERE id = new.from_id)
    IS NOT (SELECT project_id || '/' || session_id FROM entities WHERE id = new.to_id)
BEGIN
    SELECT RAISE(ABORT, 'relationship endpoints belong to different graphs');
END"""


def create_all() -> list[str]:
    """Every statement that builds the latest schema in an empty database."""
    statements = [s for table in schema.TABLES for s in create_table(table)]
    for spec in KEYWORD_INDEXES:
        statements += _keyword_index(*spec)
    statements.append(SAME_GRAPH_TRIGGER)
    statements += schema_changes.EPISODE_COUNT_TRIGGERS
    return statements
