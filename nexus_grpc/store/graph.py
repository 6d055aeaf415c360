"""Entities, relationships and their traversal (seed 001/002's knowledge graph).

Each project has its own graph: an entity is keyed by (project, name, type)
(project 0 holds what sessions in no project mention), and a relationship
only joins two entities of one project, so listing, search and every walk
stay inside one project.

Upserts are idempotent per episode: an entity (or relationship) mentioned by
an episode counts that mention once, however often the episode is
re-extracted, because the count only moves when the (row, episode) link is
new.  Mentions without an episode (manual upserts) always count.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import NotFound
from nexus_grpc.store import jobs
from nexus_grpc.store.db import now
from nexus_grpc.store.dialect import is_postgres, json_ints, json_texts, no_limit, pinned_join

SOURCE_EXTRACTION = "extraction"
SOURCE_MANUAL = "manual"


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    type: str
    notes: str | None
    mention_count: int
    confidence: float
    source: str
    last_seen_at: float | None
    created_at: float
    project_id: int = 0
    # Set only for the graph of a session outside any project (project_id 0).
    session_id: int = 0
    # The tenant of the project or session whose graph this is.
    tenant: str = ""


@dataclass(frozen=True)
class Relationship:
    id: int
    from_id: int
    to_id: int
    label: str
    notes: str | None
    mention_count: int
    created_at: float


_ENTITY_COLUMNS = (
    "e.id, e.name, e.type, e.notes, e.mention_count, e.confidence, e.source, e.last_seen_at,"
    " e.created_at, e.project_id, e.session_id, e.tenant"
)
_REL_COLUMNS = "id, from_id, to_id, label, notes, mention_count, created_at"


def _entity(r: Sequence) -> Entity:
    return Entity(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])


def _tenant_clause(tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """`` AND e.tenant = ?`` for one tenant; nothing for a caller who sees all."""
    return ("", ()) if tenant is None else (" AND e.tenant = ?", (tenant,))


def _rel(r: Sequence) -> Relationship:
    return Relationship(r[0], r[1], r[2], r[3], r[4], r[5], r[6])


def _name_is(conn: sqlite3.Connection, column: str, value: str) -> str:
    """``column = value`` regardless of case: SQLite's column is COLLATE NOCASE;
    PostgreSQL's unique index is on lower(name)."""
    if is_postgres(conn):
        return f"lower({column}) = lower({value})"
    return f"{column} = {value}"


def _name_in(conn: sqlite3.Connection, column: str) -> str:
    """``column`` is one of a JSON array of names bound as one parameter, regardless of case."""
    if is_postgres(conn):
        return f"lower({column}) IN (SELECT lower(value) FROM {json_texts(conn)})"
    return f"{column} IN (SELECT value FROM json_each(?))"


def _ids_json(ids: Sequence[int]) -> str:
    return json.dumps([int(i) for i in ids])


# Entities -------------------------------------------------------------------


def entity_id_of(
    conn: sqlite3.Connection, name: str, etype: str, project_id: int, session_id: int
) -> int | None:
    """The id of the entity (graph, name, type), or None."""
    row = conn.execute(
        "SELECT id FROM entities WHERE project_id = ? AND session_id = ?"
        f" AND {_name_is(conn, 'name', '?')} AND type = ?",
        (project_id, session_id, name, etype),
    ).fetchone()
    return None if row is None else int(row[0])


def upsert_entity(
    conn: sqlite3.Connection,
    name: str,
    etype: str,
    notes: str | None,
    *,
    source: str,
    project_id: int,
    session_id: int = 0,
    episode_id: int | None = None,
    confidence: float | None = None,
    fallback_tenant: str = DEFAULT_TENANT,
    embedded: bool = False,
) -> int:
    """Insert or update by (graph, name, type); returns the entity id.

    The graph is a project's (``session_id`` 0), or a project-less session's
    own (``project_id`` 0).

    Queues the entity's (re-)embedding in the same transaction; ``embedded``:
    a new entity's vector is written by the caller in this transaction
    (store/pg_vectors.py), so it queues none (an existing one is re-embedded
    by its job as always).
    """
    ts = now()
    existing = entity_id_of(conn, name, etype, project_id, session_id)
    if existing is None:
        # An entity belongs to the tenant of its graph's project or session;
        # the graph of neither (legacy) to the default tenant.
        tenant = conn.execute(
            "SELECT COALESCE((SELECT tenant FROM projects WHERE id = ?),"
            " (SELECT tenant FROM sessions WHERE id = ?), ?)",
            (project_id, session_id, fallback_tenant),
        ).fetchone()[0]
        entity_id = conn.execute(
            "INSERT INTO entities (project_id, session_id, name, type, notes, mention_count,"
            " confidence, source, last_seen_at, created_at, tenant)"
            " VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?) RETURNING id",
            (
                project_id,
                session_id,
                name,
                etype,
                notes,
                1.0 if confidence is None else confidence,
                source,
                ts,
                ts,
                tenant,
            ),
        ).fetchone()[0]
        if episode_id is not None:
            _link(conn, "entity_episodes", "entity_id", entity_id, episode_id)
        if embedded:
            return int(entity_id)
    else:
        entity_id = existing
        new_mention = episode_id is None or _link(
            conn, "entity_episodes", "entity_id", entity_id, episode_id
        )
        conn.execute(
            "UPDATE entities SET mention_count = mention_count + ?, notes = COALESCE(?, notes),"
            " confidence = COALESCE(?, confidence), last_seen_at = ? WHERE id = ?",
            (1 if new_mention else 0, notes, confidence, ts, entity_id),
        )
    jobs.enqueue(conn, jobs.INDEX_ENTITY, [entity_id])
    return entity_id


def _link(conn: sqlite3.Connection, table: str, column: str, row_id: int, episode_id: int) -> bool:
    """Record that an episode mentions a row; True when the link is new."""
    cur = conn.execute(
        f"INSERT INTO {table} ({column}, episode_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (row_id, episode_id),
    )
    return cur.rowcount == 1


def get_entity(conn: sqlite3.Connection, entity_id: int, tenant: str | None = None) -> Entity:
    """The entity; NOT_FOUND, with one message, when it does not exist or
    belongs to another tenant (``tenant`` None: any tenant)."""
    clause, params = _tenant_clause(tenant)
    row = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE e.id = ?{clause}", (entity_id, *params)
    ).fetchone()
    if row is None:
        raise NotFound(f"entity {entity_id} does not exist")
    return _entity(row)


def get_entities(
    conn: sqlite3.Connection, ids: Sequence[int], tenant: str | None = None
) -> dict[int, Entity]:
    if not ids:
        return {}
    clause, params = _tenant_clause(tenant)
    # CROSS JOIN pins the id list as the outer loop: one primary-key lookup
    # per id, never a scan of the table.
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM (SELECT DISTINCT value AS id FROM {json_ints(conn)}) j"
        f" {pinned_join(conn)} entities e ON e.id = j.id WHERE true{clause}",
        (_ids_json(ids), *params),
    ).fetchall()
    return {r[0]: _entity(r) for r in sorted(rows, key=lambda r: r[0])}


def entities_named(
    conn: sqlite3.Connection, project_id: int, session_id: int, names: Sequence[str], limit: int
) -> list[Entity]:
    """The graph's entities whose name is one of ``names`` (case-insensitive,
    answered from the graph's unique name index)."""
    if not names:
        return []
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM entities e"
        " WHERE e.project_id = ? AND e.session_id = ?"
        f" AND {_name_in(conn, 'e.name')}"
        " ORDER BY e.mention_count DESC, e.id LIMIT ?",
        (project_id, session_id, json.dumps(list(names)), limit),
    ).fetchall()
    return [_entity(r) for r in rows]


def entity_project(conn: sqlite3.Connection, entity_id: int) -> int | None:
    """The entity's project (0: none), or None when the entity does not exist."""
    row = conn.execute("SELECT project_id FROM entities WHERE id = ?", (entity_id,)).fetchone()
    return None if row is None else int(row[0])


def entity_graph(
    conn: sqlite3.Connection, entity_id: int, tenant: str | None = None
) -> tuple[int, int] | None:
    """The entity's graph as (project_id, session_id), or None when it does not
    exist (or belongs to another tenant)."""
    clause, params = _tenant_clause(tenant)
    row = conn.execute(
        f"SELECT e.project_id, e.session_id FROM entities e WHERE e.id = ?{clause}",
        (entity_id, *params),
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def delete_entity(conn: sqlite3.Connection, entity_id: int) -> int:
    """Delete an entity and (by cascade) its edges; returns how many edges went."""
    get_entity(conn, entity_id)
    edges = conn.execute(
        "SELECT COUNT(*) FROM relationships WHERE from_id = ? OR to_id = ?",
        (entity_id, entity_id),
    ).fetchone()[0]
    conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
    jobs.enqueue(conn, jobs.INDEX_ENTITY, [entity_id])  # row gone: the point is deleted
    return int(edges)


def list_entities(
    conn: sqlite3.Connection,
    etype: str,
    project_id: int,
    after_id: int | None,
    limit: int,
    session_id: int = 0,
    tenant: str | None = None,
) -> list[Entity]:
    """Oldest first (keyset on id), optionally by type and by project or session graph."""
    where = ["e.id > ?"]
    params: list[object] = [after_id or 0]
    if tenant is not None:
        where.append("e.tenant = ?")
        params.append(tenant)
    if etype:
        where.append("e.type = ?")
        params.append(etype)
    if project_id:
        where.append("e.project_id = ?")
        params.append(project_id)
    if session_id:
        where.append("e.project_id = 0 AND e.session_id = ?")
        params.append(session_id)
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE {' AND '.join(where)}"
        " ORDER BY e.id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [_entity(r) for r in rows]


def recent_entities(
    conn: sqlite3.Connection, project_id: int, limit: int, session_id: int = 0
) -> list[tuple[str, str]]:
    """The last ``limit`` entities seen in one graph, oldest first."""
    rows = conn.execute(
        "SELECT name, type FROM entities WHERE project_id = ? AND session_id = ?"
        " ORDER BY last_seen_at DESC, id DESC LIMIT ?",
        (project_id, session_id, limit),
    ).fetchall()
    return [(r[0], r[1]) for r in reversed(rows)]


# Relationships --------------------------------------------------------------


def upsert_relationship(
    conn: sqlite3.Connection,
    from_id: int,
    to_id: int,
    label: str,
    notes: str | None,
    *,
    episode_id: int | None = None,
) -> int:
    row = conn.execute(
        "SELECT id FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?",
        (from_id, to_id, label),
    ).fetchone()
    if row is None:
        rel_id = conn.execute(
            "INSERT INTO relationships (from_id, to_id, label, notes, mention_count, created_at)"
            " VALUES (?, ?, ?, ?, 1, ?) RETURNING id",
            (from_id, to_id, label, notes, now()),
        ).fetchone()[0]
        if episode_id is not None:
            _link(conn, "relationship_episodes", "relationship_id", rel_id, episode_id)
        return rel_id
    rel_id = row[0]
    new_mention = episode_id is None or _link(
        conn, "relationship_episodes", "relationship_id", rel_id, episode_id
    )
    conn.execute(
        "UPDATE relationships SET mention_count = mention_count + ?, notes = COALESCE(?, notes)"
        " WHERE id = ?",
        (1 if new_mention else 0, notes, rel_id),
    )
    return rel_id


def get_relationship(conn: sqlite3.Connection, rel_id: int) -> Relationship:
    row = conn.execute(f"SELECT {_REL_COLUMNS} FROM relationships WHERE id = ?", (rel_id,))
    found = row.fetchone()
    if found is None:
        raise NotFound(f"relationship {rel_id} does not exist")
    return _rel(found)


def get_relationships(conn: sqlite3.Connection, ids: Sequence[int]) -> list[Relationship]:
    rows = conn.execute(
        f"SELECT {_REL_COLUMNS} FROM relationships"
        f" WHERE id IN (SELECT value FROM {json_ints(conn)}) ORDER BY id",
        (_ids_json(ids),),
    ).fetchall()
    return [_rel(r) for r in rows]


def list_relationships(
    conn: sqlite3.Connection,
    entity_id: int,
    include_inbound: bool,
    after_id: int | None = None,
    limit: int = -1,
) -> list[Relationship]:
    """An entity's edges in id order (keyset: ids after ``after_id``); ``limit``
    -1: all of them."""
    after = after_id or 0
    count = limit if limit >= 0 else no_limit(conn)
    if include_inbound:
        sql = (
            f"SELECT {_REL_COLUMNS} FROM relationships WHERE from_id = ? AND id > ?"
            f" UNION SELECT {_REL_COLUMNS} FROM relationships WHERE to_id = ? AND id > ?"
            " ORDER BY id LIMIT ?"
        )
        params: tuple = (entity_id, after, entity_id, after, count)
    else:
        sql = (
            f"SELECT {_REL_COLUMNS} FROM relationships WHERE from_id = ? AND id > ?"
            " ORDER BY id LIMIT ?"
        )
        params = (entity_id, after, count)
    return [_rel(r) for r in conn.execute(sql, params)]


def delete_relationship(conn: sqlite3.Connection, from_id: int, to_id: int, label: str) -> bool:
    cur = conn.execute(
        "DELETE FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?",
        (from_id, to_id, label),
    )
    return cur.rowcount > 0


# Traversal ------------------------------------------------------------------

# Bidirectional walk.  UNION (not UNION ALL) drops rows already produced, so a
# cycle cannot feed itself; the depth bound ends the walk.  Each direction is
# its own recursive branch so both use an index (from_id via the UNIQUE key,
# to_id via idx_relationships_to) instead of an OR that scans.
_NEIGHBORHOOD = """
WITH RECURSIVE walk(id, depth) AS (
    SELECT ?, 0
    UNION
    SELECT r.to_id, w.depth + 1 FROM walk w JOIN relationships r ON r.from_id = w.id
    WHERE w.depth < ?
    UNION
    SELECT r.from_id, w.depth + 1 FROM walk w JOIN relationships r ON r.to_id = w.id
    WHERE w.depth < ?
)
SELECT DISTINCT id FROM walk
"""
# PostgreSQL allows one recursive term: both directions are one lateral step.
_NEIGHBORHOOD_PG = """
WITH RECURSIVE walk(id, depth) AS (
    SELECT ?::bigint, 0
    UNION
    SELECT n.id, w.depth + 1 FROM walk w CROSS JOIN LATERAL (
        SELECT r.to_id AS id FROM relationships r WHERE r.from_id = w.id
        UNION ALL
        SELECT r.from_id FROM relationships r WHERE r.to_id = w.id
    ) n
    WHERE w.depth < ?
)
SELECT DISTINCT id FROM walk
"""


def edges_within(conn: sqlite3.Connection, ids: Sequence[int]) -> list[Relationship]:
    """Every relationship with both ends in ``ids``."""
    if not ids:
        return []
    members = _ids_json(ids)
    # Outbound edges of each member (UNIQUE(from_id, ...) index), kept when
    # the other end is a member too.
    rows = conn.execute(
        f"SELECT {', '.join('r.' + c for c in _REL_COLUMNS.split(', '))}"
        f" FROM (SELECT DISTINCT value AS id FROM {json_ints(conn)}) j"
        f" {pinned_join(conn)} relationships r ON r.from_id = j.id"
        f" WHERE +r.to_id IN (SELECT value FROM {json_ints(conn)})",  # + : filter, not probe
        (members, members),
    ).fetchall()
    return [_rel(r) for r in sorted(rows, key=lambda r: r[0])]


def neighborhood(
    conn: sqlite3.Connection, entity_id: int, depth: int
) -> tuple[list[Entity], list[Relationship]]:
    get_entity(conn, entity_id)
    if is_postgres(conn):
        walk = conn.execute(_NEIGHBORHOOD_PG, (entity_id, depth))
    else:
        walk = conn.execute(_NEIGHBORHOOD, (entity_id, depth, depth))
    ids = [r[0] for r in walk]
    nodes = get_entities(conn, ids)
    return list(nodes.values()), edges_within(conn, list(nodes))


def neighbors(
    conn: sqlite3.Connection, entity_ids: Sequence[int]
) -> tuple[list[Entity], list[Relationship]]:
    """One hop from a set, plus every edge inside the combined set."""
    seeds = _ids_json(entity_ids)
    ids = [
        r[0]
        for r in conn.execute(
            f"WITH seeds(id) AS (SELECT value FROM {json_ints(conn)})"
            " SELECT id FROM seeds"
            " UNION SELECT r.to_id FROM relationships r WHERE r.from_id IN (SELECT id FROM seeds)"
            " UNION SELECT r.from_id FROM relationships r WHERE r.to_id IN (SELECT id FROM seeds)",
            (seeds,),
        )
    ]
    nodes = get_entities(conn, ids)
    return list(nodes.values()), edges_within(conn, list(nodes))


def relationships_in_project(
    conn: sqlite3.Connection, project_id: int, after_id: int | None, limit: int
) -> list[Relationship]:
    """The edges of a project's graph, in id order (a relationship never
    leaves its graph, so its from-entity's project is the edge's)."""
    rows = conn.execute(
        "SELECT r.id, r.from_id, r.to_id, r.label, r.notes, r.mention_count, r.created_at"
        " FROM relationships r JOIN entities e ON e.id = r.from_id"
        " WHERE e.project_id = ? AND r.id > ? ORDER BY r.id LIMIT ?",
        (project_id, after_id or 0, limit),
    ).fetchall()
    return [_rel(r) for r in rows]
