"""What a database's schema holds, in terms both stores can be compared by.

A table's columns (type family, NOT NULL, default), primary key, foreign keys
(column, table, key, ON DELETE) and indexes (columns, unique, partial
condition; a case-insensitive key column reads ``lower(column)`` on both:
SQLite's COLLATE NOCASE, PostgreSQL's index expression), and the names of
the triggers and views beside them. Names of indexes that carry a unique
key are not compared: SQLite names a table's own UNIQUE itself.
"""

from __future__ import annotations

import re
from typing import Any


def _default(value: Any) -> str | None:
    if value is None:
        return None
    text = re.sub(r"::[a-z ]+$", "", str(value)).strip("()")
    if text.startswith("'"):
        return text
    try:
        return repr(float(text))
    except ValueError:
        return text


def _family(declared: str) -> str:
    declared = declared.lower()
    if "int" in declared:
        return "int"
    if declared in ("real", "double precision"):
        return "real"
    return declared


def sqlite_shape(conn: Any) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE '%_fts%' ORDER BY name"
        )
    ]
    for name in names:
        info = list(conn.execute(f'PRAGMA table_info("{name}")'))
        columns = {r[1]: (_family(r[2]), bool(r[3]) or r[5] > 0, _default(r[4])) for r in info}
        key = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
        foreign = sorted(
            (r[3], r[2], r[4], r[6]) for r in conn.execute(f'PRAGMA foreign_key_list("{name}")')
        )
        indexes = set()
        for _, index, unique, origin, partial in conn.execute(f'PRAGMA index_list("{name}")'):
            if origin == "pk":
                continue
            parts = tuple(
                f"lower({r[2]})" if r[4].upper() == "NOCASE" else r[2]
                for r in conn.execute(f'PRAGMA index_xinfo("{index}")')
                if r[5]
            )
            where = None
            if partial:
                sql = conn.execute(
                    "SELECT sql FROM sqlite_master WHERE name = ?", (index,)
                ).fetchone()[0]
                where = re.sub(r"\s+", " ", sql.split(" WHERE ", 1)[1]).strip()
            indexes.add((parts, bool(unique), where))
        tables[name] = {
            "columns": columns,
            "key": key,
            "foreign": foreign,
            "indexes": sorted(indexes, key=repr),
        }
    others = sorted(
        (r[0], r[1])
        for r in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')"
        )
    )
    return {"tables": tables, "others": others}


def postgres_shape(conn: Any) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    names = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            " AND table_type = 'BASE TABLE' AND table_name != 'nexus_schema' ORDER BY 1"
        )
    ]
    for name in names:
        columns = {
            r[0]: (_family(r[1]), r[2] == "NO", _default(r[3]))
            for r in conn.execute(
                "SELECT column_name, data_type, is_nullable, column_default FROM"
                " information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
                " AND is_generated = 'NEVER'",
                (name,),
            )
        }
        key = tuple(
            r[0]
            for r in conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
                " ORDER BY array_position(i.indkey, a.attnum)",
                (name,),
            )
        )
        foreign = sorted(
            tuple(r)
            for r in conn.execute(
                "SELECT a.attname, t.relname, k.attname, CASE c.confdeltype WHEN 'c' THEN"
                " 'CASCADE' WHEN 'n' THEN 'SET NULL' ELSE 'NO ACTION' END FROM pg_constraint c"
                " JOIN pg_class t ON t.oid = c.confrelid JOIN pg_attribute a ON a.attrelid ="
                " c.conrelid AND a.attnum = c.conkey[1] JOIN pg_attribute k ON k.attrelid ="
                " c.confrelid AND k.attnum = c.confkey[1] WHERE c.contype = 'f'"
                " AND c.conrelid = %s::regclass",
                (name,),
            )
        )
        indexes = set()
        for (definition,) in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = %s",
            (name,),
        ):
            found = re.match(
                r"CREATE (UNIQUE )?INDEX (\S+) ON \S+ USING (\w+) \((.*?)\)( WHERE \((.*)\))?$",
                definition,
            )
            assert found, definition
            if found.group(2).endswith("_pkey"):
                continue
            parts = tuple(c.strip() for c in found.group(4).split(","))
            where = found.group(6) and found.group(6).replace("::text", "")
            indexes.add((parts, bool(found.group(1)), where))
        tables[name] = {
            "columns": columns,
            "key": key,
            "foreign": foreign,
            "indexes": sorted(indexes, key=repr),
        }
    others = sorted(
        [
            ("trigger", r[0])
            for r in conn.execute(
                "SELECT DISTINCT trigger_name FROM information_schema.triggers"
                " WHERE trigger_schema = 'public'"
            )
        ]
        + [
            ("function", r[0])
            for r in conn.execute(
                "SELECT routine_name FROM information_schema.routines"
                " WHERE routine_schema = 'public'"
            )
        ]
    )
    return {"tables": tables, "others": others}
