"""Entities, their aliases, relationships as intervals, evidence, merges and
traversal (the knowledge graph, docs/graph.md).

Each project has its own graph, and so does each session outside any project
(``project_id`` 0, ``session_id`` set). An entity is keyed in its graph by
the key of its display name and its type (core/names.name_key); every
surface name it was seen under is an alias, with the alias's words indexed
for resolution (entity_tokens). A relationship joins two entities of one
graph and is one interval of time a fact held, derived from what episodes
said (store/graph_evidence.py); merges live in store/entity_merges.py.

Mentions are idempotent per episode: an entity mentioned by an episode counts
that mention once, however often the episode is re-extracted, because the
count only moves when the (entity, episode) link is new; an episode's
evidence is replaced, not added to, when it is extracted again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from nexus_grpc.core.graph import (
    CURRENT,
    METHOD_NEW,
    RESOLVED,
    SOURCE_EXTRACTION,
    SOURCE_MANUAL,
    CandidateRow,
    Entity,
    EntityAlias,
    EntityMerge,
    Graph,
    Relationship,
    When,
)
from nexus_grpc.core.names import best_display, display_form, index_tokens, name_key
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import NotFound
from nexus_grpc.store import dialect
from nexus_grpc.store.dialect import json_ints, json_texts, no_limit, pinned_join
from nexus_grpc.store.sql import OnConnection, now

__all__ = [
    "SOURCE_EXTRACTION",
    "SOURCE_MANUAL",
    "Entity",
    "EntityAlias",
    "EntityMerge",
    "Relationship",
    "When",
]


_ENTITY_COLUMNS = (
    "e.id, e.name, e.type, e.notes, e.mention_count, e.confidence, e.source, e.last_seen_at,"
    " e.created_at, e.project_id, e.session_id, e.tenant, e.resolution"
)
_REL_FIELDS = (
    "id",
    "from_id",
    "to_id",
    "label",
    "notes",
    "mention_count",
    "created_at",
    "valid_at",
    "invalid_at",
    "asserted_by",
    "ended_by",
)
REL_COLUMNS = ", ".join(_REL_FIELDS)
ALIAS_COLUMNS = "id, entity_id, name, norm, method, score, episode_id, created_at"


def _when_clause(when: When, alias: str) -> tuple[str, tuple[float, ...]]:
    """`` AND <condition>`` on relationship columns prefixed ``alias``: the
    intervals ``when`` shows."""
    p = f"{alias}." if alias else ""
    if when.history:
        return "", ()
    if when.as_of is not None:
        return (
            f" AND {p}valid_at <= ? AND ({p}invalid_at IS NULL OR {p}invalid_at > ?)",
            (when.as_of, when.as_of),
        )
    return f" AND {p}invalid_at IS NULL", ()


def _entity(r: Sequence, aliases: tuple[str, ...] = ()) -> Entity:
    return Entity(
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], aliases, r[12]
    )


def relationship_from_row(r: Sequence) -> Relationship:
    """A Relationship from a row of ``REL_COLUMNS``."""
    return Relationship(*r)


def _alias(r: Sequence) -> EntityAlias:
    return EntityAlias(*r)


def _tenant_clause(tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """`` AND e.tenant = ?`` for one tenant; nothing for a caller who sees all."""
    return ("", ()) if tenant is None else (" AND e.tenant = ?", (tenant,))


def _ids_json(ids: Iterable[int]) -> str:
    return json.dumps([int(i) for i in ids])


class GraphRows(OnConnection):
    """The part of ``GraphRepository`` whose rows this module holds, on one
    connection (``SqlGraph`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def _with_aliases(self, rows: Sequence[Sequence]) -> list[Entity]:
        """Entities from rows, each with its aliases (one query for all of them)."""
        if not rows:
            return []
        names: dict[int, list[str]] = {}
        for entity_id, alias in self.conn.execute(
            "SELECT a.entity_id, a.name FROM entity_aliases a"
            f" WHERE a.entity_id IN (SELECT value FROM {json_ints(self.conn)}) ORDER BY a.id",
            (_ids_json(r[0] for r in rows),),
        ):
            names.setdefault(entity_id, []).append(alias)
        return [_entity(r, tuple(dict.fromkeys(names.get(r[0], ())))) for r in rows]

    # Entities -------------------------------------------------------------------

    def entity_id_of(self, key: str, etype: str, project_id: int, session_id: int) -> int | None:
        """The entity whose display name has this key, in this graph, or None."""
        row = self.conn.execute(
            "SELECT id FROM entities WHERE project_id = ? AND session_id = ? AND name_key = ?"
            " AND type = ?",
            (project_id, session_id, key, etype),
        ).fetchone()
        return None if row is None else int(row[0])

    def entities_with_key(self, graph: Graph, key: str, types: Iterable[str]) -> list[int]:
        """Entities of these types with an alias of this key, oldest first."""
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT DISTINCT a.entity_id FROM entity_aliases a JOIN entities e"
                " ON e.id = a.entity_id WHERE a.project_id = ? AND a.session_id = ? AND a.norm = ?"
                f" AND e.type IN (SELECT value FROM {json_texts(self.conn)}) ORDER BY a.entity_id",
                (graph[0], graph[1], key, json.dumps(sorted(types))),
            )
        ]

    def insert_entity(
        self,
        graph: Graph,
        surface: str,
        etype: str,
        notes: str | None,
        *,
        source: str,
        method: str = METHOD_NEW,
        episode_id: int | None = None,
        confidence: float | None = None,
        fallback_tenant: str = DEFAULT_TENANT,
        resolution: str = RESOLVED,
    ) -> int:
        """A new entity for a surface name, with that name as its first alias.

        Its embedding is the domain's to queue (domain/entity_writes.py).
        """
        ts = now()
        project_id, session_id = graph
        display = display_form(surface, etype) or surface.strip()
        # An entity belongs to the tenant of its graph's project or session; the
        # graph of neither (legacy) to the default tenant.
        tenant = self.conn.execute(
            "SELECT COALESCE((SELECT tenant FROM projects WHERE id = ?),"
            " (SELECT tenant FROM sessions WHERE id = ?), ?)",
            (project_id, session_id, fallback_tenant),
        ).fetchone()[0]
        entity_id = int(
            self.conn.execute(
                "INSERT INTO entities (project_id, session_id, name, name_key, type, notes,"
                " mention_count, confidence, source, last_seen_at, created_at, tenant, resolution)"
                " VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    project_id,
                    session_id,
                    display,
                    name_key(display, etype),
                    etype,
                    notes,
                    1.0 if confidence is None else confidence,
                    source,
                    ts,
                    ts,
                    tenant,
                    resolution,
                ),
            ).fetchone()[0]
        )
        self.add_alias(entity_id, surface, method=method, episode_id=episode_id, refresh=False)
        if episode_id is not None:
            self.link_episode(entity_id, episode_id)
        return entity_id

    def add_alias(
        self,
        entity_id: int,
        surface: str,
        *,
        method: str,
        score: float = 1.0,
        episode_id: int | None = None,
        refresh: bool = True,
        at: float | None = None,
    ) -> bool:
        """Record a surface name of an entity; True when the name is new to it.

        A new alias's words join the entity's tokens and the display name becomes
        the best of its names (``refresh``); its vector, which carries the
        aliases, is the domain's to queue again (domain/entity_writes.py).
        """
        row = self.conn.execute(
            "SELECT project_id, session_id, type FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        project_id, session_id, etype = row
        display = display_form(surface, etype) or surface.strip()
        norm = name_key(display, etype)
        cur = self.conn.execute(
            "INSERT INTO entity_aliases (entity_id, project_id, session_id, name, norm, method,"
            " score, episode_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (
                entity_id,
                project_id,
                session_id,
                display,
                norm,
                method,
                score,
                episode_id,
                at or now(),
            ),
        )
        if cur.rowcount != 1:
            return False
        self._add_tokens(entity_id, project_id, session_id, etype, [norm])
        if refresh:
            self.refresh_display_name(entity_id)
        return True

    def _add_tokens(
        self,
        entity_id: int,
        project_id: int,
        session_id: int,
        etype: str,
        norms: Iterable[str],
    ) -> None:
        words = sorted({t for n in norms for t in index_tokens(n)})
        if words:
            self.conn.executemany(
                "INSERT INTO entity_tokens (project_id, session_id, type, token, entity_id)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(project_id, session_id, etype, w, entity_id) for w in words],
            )

    def rebuild_tokens(self, entity_id: int) -> None:
        """The entity's tokens again from its aliases (after aliases moved)."""
        self.conn.execute("DELETE FROM entity_tokens WHERE entity_id = ?", (entity_id,))
        row = self.conn.execute(
            "SELECT project_id, session_id, type FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return
        norms = [
            r[0]
            for r in self.conn.execute(
                "SELECT norm FROM entity_aliases WHERE entity_id = ?", (entity_id,)
            )
        ]
        self._add_tokens(entity_id, row[0], row[1], row[2], norms)

    def refresh_display_name(self, entity_id: int) -> None:
        """Show the entity under the best of its names ("Priya Raman", not
        "Priya"), unless another entity of its graph and type holds that key."""
        row = self.conn.execute(
            "SELECT project_id, session_id, type, name FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return
        project_id, session_id, etype, current = row
        names = [
            r[0]
            for r in self.conn.execute(
                "SELECT name FROM entity_aliases WHERE entity_id = ? ORDER BY id", (entity_id,)
            )
        ]
        if not names:
            return
        best = best_display([current, *names]) if current in names else best_display(names)
        if best == current:
            return
        key = name_key(best, etype)
        taken = self.conn.execute(
            "SELECT 1 FROM entities WHERE project_id = ? AND session_id = ? AND name_key = ?"
            " AND type = ? AND id != ?",
            (project_id, session_id, key, etype, entity_id),
        ).fetchone()
        if taken is None:
            self.conn.execute(
                "UPDATE entities SET name = ?, name_key = ? WHERE id = ?", (best, key, entity_id)
            )

    def link_episode(self, entity_id: int, episode_id: int) -> bool:
        """Record that an episode mentions an entity; True when the link is new."""
        cur = self.conn.execute(
            "INSERT INTO entity_episodes (entity_id, episode_id) VALUES (?, ?) ON CONFLICT DO"
            " NOTHING",
            (entity_id, episode_id),
        )
        return cur.rowcount == 1

    def mention(
        self,
        entity_id: int,
        notes: str | None,
        *,
        episode_id: int | None = None,
        confidence: float | None = None,
    ) -> None:
        """One more mention of an existing entity: counted once per episode (every
        time without one); new notes replace the old, absent ones keep them."""
        new_mention = episode_id is None or self.link_episode(entity_id, episode_id)
        self.conn.execute(
            "UPDATE entities SET mention_count = mention_count + ?, notes = COALESCE(?, notes),"
            " confidence = COALESCE(?, confidence), last_seen_at = ? WHERE id = ?",
            (1 if new_mention else 0, notes, confidence, now(), entity_id),
        )

    def set_resolution(self, entity_id: int, state: str) -> None:
        self.conn.execute("UPDATE entities SET resolution = ? WHERE id = ?", (state, entity_id))

    def get_entity(self, entity_id: int, tenant: str | None = None) -> Entity:
        """The entity; NOT_FOUND, with one message, when it does not exist or
        belongs to another tenant (``tenant`` None: any tenant)."""
        clause, params = _tenant_clause(tenant)
        row = self.conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE e.id = ?{clause}", (entity_id, *params)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"entity {entity_id} does not exist",
                resource_type="entity",
                resource_name=str(entity_id),
            )
        return self._with_aliases([row])[0]

    def get_entities(self, ids: Sequence[int], tenant: str | None = None) -> dict[int, Entity]:
        if not ids:
            return {}
        clause, params = _tenant_clause(tenant)
        # CROSS JOIN pins the id list as the outer loop: one primary-key lookup
        # per id, never a scan of the table.
        rows = self.conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM (SELECT DISTINCT value AS id FROM"
            f" {json_ints(self.conn)}) j"
            f" {pinned_join(self.conn)} entities e ON e.id = j.id WHERE true{clause}",
            (_ids_json(ids), *params),
        ).fetchall()
        return {e.id: e for e in self._with_aliases(sorted(rows, key=lambda r: r[0]))}

    def entities_named(
        self, project_id: int, session_id: int, keys: Sequence[str], limit: int
    ) -> list[Entity]:
        """The graph's entities with an alias whose key is one of ``keys``."""
        if not keys:
            return []
        rows = self.conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE e.id IN ("
            " SELECT a.entity_id FROM entity_aliases a WHERE a.project_id = ? AND a.session_id = ?"
            f" AND a.norm IN (SELECT value FROM {json_texts(self.conn)}))"
            " ORDER BY e.mention_count DESC, e.id LIMIT ?",
            (project_id, session_id, json.dumps(list(keys)), limit),
        ).fetchall()
        return self._with_aliases(rows)

    def entity_graph(self, entity_id: int, tenant: str | None = None) -> tuple[int, int] | None:
        """The entity's graph as (project_id, session_id), or None when it does not
        exist (or belongs to another tenant)."""
        clause, params = _tenant_clause(tenant)
        row = self.conn.execute(
            f"SELECT e.project_id, e.session_id FROM entities e WHERE e.id = ?{clause}",
            (entity_id, *params),
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def delete_entity(self, entity_id: int) -> int:
        """Delete an entity and (by cascade) its edges and evidence; returns how
        many edges went. The caller re-derives the facts its evidence touched."""
        self.get_entity(entity_id)
        edges = self.conn.execute(
            "SELECT COUNT(*) FROM relationships WHERE from_id = ? OR to_id = ?",
            (entity_id, entity_id),
        ).fetchone()[0]
        self.conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
        return int(edges)

    def list_entities(
        self,
        etype: str,
        project_id: int,
        after_id: int | None,
        limit: int,
        session_id: int = 0,
        tenant: str | None = None,
        keys: Sequence[str] = (),
    ) -> list[Entity]:
        """Oldest first (keyset on id), optionally by type, by project or session
        graph, and by name (``keys``: an alias with one of these keys)."""
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
        if keys:
            where.append(
                "e.id IN (SELECT a.entity_id FROM entity_aliases a"
                f" WHERE a.norm IN (SELECT value FROM {json_texts(self.conn)}))"
            )
            params.append(json.dumps(list(keys)))
        rows = self.conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE {' AND '.join(where)}"
            " ORDER BY e.id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return self._with_aliases(rows)

    def recent_entities(self, project_id: int, limit: int, session_id: int = 0) -> list[Entity]:
        """The last ``limit`` entities seen in one graph, oldest first."""
        rows = self.conn.execute(
            f"SELECT {_ENTITY_COLUMNS} FROM entities e WHERE e.project_id = ? AND e.session_id = ?"
            " ORDER BY e.last_seen_at DESC, e.id DESC LIMIT ?",
            (project_id, session_id, limit),
        ).fetchall()
        return list(reversed(self._with_aliases(rows)))

    def list_aliases(self, entity_id: int, after_id: int | None, limit: int) -> list[EntityAlias]:
        rows = self.conn.execute(
            f"SELECT {ALIAS_COLUMNS} FROM entity_aliases WHERE entity_id = ? AND id > ?"
            " ORDER BY id LIMIT ?",
            (entity_id, after_id or 0, limit),
        ).fetchall()
        return [_alias(r) for r in rows]

    def aliases_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[EntityAlias]:
        rows = self.conn.execute(
            f"SELECT {ALIAS_COLUMNS} FROM entity_aliases WHERE project_id = ? AND session_id = 0"
            " AND id > ? ORDER BY id LIMIT ?",
            (project_id, after_id or 0, limit),
        ).fetchall()
        return [_alias(r) for r in rows]

    def episode_links_in_project(
        self, project_id: int, after: tuple[int, int] | None, limit: int
    ) -> list[tuple[int, int]]:
        """(entity_id, episode_id) of the project's graph, in that order (keyset)."""
        a_entity, a_episode = after or (0, 0)
        rows = self.conn.execute(
            "SELECT l.entity_id, l.episode_id FROM entity_episodes l"
            " JOIN entities e ON e.id = l.entity_id"
            " WHERE e.project_id = ? AND e.session_id = 0"
            " AND (l.entity_id > ? OR (l.entity_id = ? AND l.episode_id > ?))"
            " ORDER BY l.entity_id, l.episode_id LIMIT ?",
            (project_id, a_entity, a_entity, a_episode, limit),
        ).fetchall()
        return [(int(r[0]), int(r[1])) for r in rows]

    # What entity resolution reads --------------------------------------------------

    def resolution_candidates(
        self,
        graph: Graph,
        keys: Iterable[str],
        words: Iterable[str],
        *,
        word_limit: int,
    ) -> list[CandidateRow]:
        """The graph's entities with an alias of one of these keys, or with one
        of these words (at most ``word_limit`` a word, and a word that many share
        is ambiguous whichever are read): answered from the alias and token
        indexes, so the cost follows the matches, not the graph's size."""
        project_id, session_id = graph
        ids: set[int] = set()
        key_list = sorted(set(keys))
        if key_list:
            ids.update(
                r[0]
                for r in self.conn.execute(
                    "SELECT entity_id FROM entity_aliases WHERE project_id = ? AND session_id = ?"
                    f" AND norm IN (SELECT value FROM {json_texts(self.conn)})",
                    (project_id, session_id, json.dumps(key_list)),
                )
            )
        for word in sorted(set(words)):
            ids.update(
                r[0]
                for r in self.conn.execute(
                    "SELECT entity_id FROM entity_tokens WHERE project_id = ? AND session_id = ?"
                    " AND token = ? LIMIT ?",
                    (project_id, session_id, word, word_limit),
                )
            )
        return self.candidate_rows(ids)

    def block_candidates(
        self,
        graph: Graph,
        blocks: Iterable[str],
        types: Iterable[str],
        *,
        limit: int,
    ) -> list[CandidateRow]:
        """Entities of these types with a word starting with one of ``blocks``:
        near-duplicate candidates. A block holding more than ``limit`` entities is
        too common to tell anything apart ("inte", "john") and reads as empty."""
        project_id, session_id = graph
        ids: set[int] = set()
        type_list = json.dumps(sorted(set(types)))
        for block in sorted(set(blocks)):
            upper = block[:-1] + chr(ord(block[-1]) + 1)
            found = [
                r[0]
                for r in self.conn.execute(
                    "SELECT entity_id FROM entity_tokens WHERE project_id = ? AND session_id = ?"
                    f" AND type IN (SELECT value FROM {json_texts(self.conn)})"
                    " AND token >= ? AND token < ? LIMIT ?",
                    (project_id, session_id, type_list, block, upper, limit + 1),
                )
            ]
            if len(found) <= limit:
                ids.update(found)
        return self.candidate_rows(ids)

    def candidate_rows(self, ids: Iterable[int]) -> list[CandidateRow]:
        id_list = sorted(set(ids))
        if not id_list:
            return []
        members = _ids_json(id_list)
        keys: dict[int, set[str]] = {}
        for entity_id, norm in self.conn.execute(
            "SELECT entity_id, norm FROM entity_aliases"
            f" WHERE entity_id IN (SELECT value FROM {json_ints(self.conn)})",
            (members,),
        ):
            keys.setdefault(entity_id, set()).add(norm)
        distinct: dict[int, set[int]] = {}
        for a, b in self.conn.execute(
            "SELECT a_id, b_id FROM entity_distinctions"
            f" WHERE a_id IN (SELECT value FROM {json_ints(self.conn)})"
            f" OR b_id IN (SELECT value FROM {json_ints(self.conn)})",
            (members, members),
        ):
            distinct.setdefault(a, set()).add(b)
            distinct.setdefault(b, set()).add(a)
        rows = self.conn.execute(
            "SELECT id, name, name_key, type, notes, resolution FROM entities"
            f" WHERE id IN (SELECT value FROM {json_ints(self.conn)}) ORDER BY id",
            (members,),
        ).fetchall()
        return [
            CandidateRow(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                frozenset(keys.get(r[0], ())),
                frozenset(distinct.get(r[0], ())),
            )
            for r in rows
        ]

    def add_distinction(self, a: int, b: int, episode_id: int | None = None) -> None:
        """The LLM said ``a`` and ``b`` are two things: do not ask again."""
        lo, hi = sorted((a, b))
        self.conn.execute(
            "INSERT INTO entity_distinctions (a_id, b_id, episode_id, created_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (lo, hi, episode_id, now()),
        )

    def recent_mentions(self, entity_id: int, limit: int) -> list[str]:
        """The user messages of the newest episodes mentioning an entity."""
        rows = self.conn.execute(
            "SELECT ep.user_message FROM entity_episodes l JOIN episodes ep ON ep.id = l.episode_id"
            " WHERE l.entity_id = ? ORDER BY ep.occur_at DESC, ep.id DESC LIMIT ?",
            (entity_id, limit),
        ).fetchall()
        return [r[0] for r in rows]

    # Relationships ----------------------------------------------------------------

    def relationship_at(
        self, from_id: int, to_id: int, label: str, at: float
    ) -> Relationship | None:
        """The interval of (from, label, to) holding at ``at``, else its latest."""
        row = self.conn.execute(
            f"SELECT {REL_COLUMNS} FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?"
            " ORDER BY (valid_at <= ? AND (invalid_at IS NULL OR invalid_at > ?)) DESC,"
            " valid_at DESC LIMIT 1",
            (from_id, to_id, label, at, at),
        ).fetchone()
        return None if row is None else relationship_from_row(row)

    def get_relationships(self, ids: Sequence[int]) -> list[Relationship]:
        rows = self.conn.execute(
            f"SELECT {REL_COLUMNS} FROM relationships"
            f" WHERE id IN (SELECT value FROM {json_ints(self.conn)}) ORDER BY id",
            (_ids_json(ids),),
        ).fetchall()
        return [relationship_from_row(r) for r in rows]

    def current_facts(
        self, entity_ids: Sequence[int], limit: int
    ) -> list[tuple[str, str, str, float | None]]:
        """(from name, label, to name, since) of the facts holding now about
        these entities, newest first: what an extraction prompt shows, so the
        model can say which of them an exchange ends."""
        if not entity_ids:
            return []
        members = _ids_json(entity_ids)
        rows = self.conn.execute(
            "SELECT f.name, r.label, t.name, r.valid_at FROM relationships r"
            " JOIN entities f ON f.id = r.from_id JOIN entities t ON t.id = r.to_id"
            " WHERE r.invalid_at IS NULL AND (r.from_id IN"
            f" (SELECT value FROM {json_ints(self.conn)}) OR r.to_id IN"
            f" (SELECT value FROM {json_ints(self.conn)}))"
            " ORDER BY r.valid_at DESC, r.id DESC LIMIT ?",
            (members, members, limit),
        ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def list_relationships(
        self,
        entity_id: int,
        include_inbound: bool,
        after_id: int | None = None,
        limit: int = -1,
        when: When = CURRENT,
    ) -> list[Relationship]:
        """An entity's edges in id order (keyset: ids after ``after_id``); ``limit``
        -1: all of them."""
        after = after_id or 0
        count = limit if limit >= 0 else no_limit(self.conn)
        clause, times = _when_clause(when, "")
        if include_inbound:
            sql = (
                f"SELECT {REL_COLUMNS} FROM relationships WHERE from_id = ? AND id > ?{clause}"
                f" UNION SELECT {REL_COLUMNS} FROM relationships WHERE to_id = ? AND id > ?{clause}"
                " ORDER BY id LIMIT ?"
            )
            params: tuple = (entity_id, after, *times, entity_id, after, *times, count)
        else:
            sql = (
                f"SELECT {REL_COLUMNS} FROM relationships WHERE from_id = ? AND id > ?{clause}"
                " ORDER BY id LIMIT ?"
            )
            params = (entity_id, after, *times, count)
        return [relationship_from_row(r) for r in self.conn.execute(sql, params)]

    # Traversal ------------------------------------------------------------------

    # Bidirectional walk.  UNION (not UNION ALL) drops rows already produced, so a
    # cycle cannot feed itself; the depth bound ends the walk.  Each direction is
    # its own recursive branch so both use an index (from_id via
    # idx_relationships_from, to_id via idx_relationships_to) instead of an OR
    # that scans. {when} confines each step to the intervals the read shows.
    def edges_within(self, ids: Sequence[int], when: When = CURRENT) -> list[Relationship]:
        """Every relationship with both ends in ``ids``."""
        if not ids:
            return []
        members = _ids_json(ids)
        clause, times = _when_clause(when, "r")
        # Outbound edges of each member (idx_relationships_from), kept when the
        # other end is a member too.
        rows = self.conn.execute(
            f"SELECT {', '.join('r.' + c for c in _REL_FIELDS)}"
            f" FROM (SELECT DISTINCT value AS id FROM {json_ints(self.conn)}) j"
            f" {pinned_join(self.conn)} relationships r ON r.from_id = j.id"
            f" WHERE +r.to_id IN (SELECT value FROM {json_ints(self.conn)}){clause}",  # + : filter
            (members, members, *times),
        ).fetchall()
        return [relationship_from_row(r) for r in sorted(rows, key=lambda r: r[0])]

    def neighborhood(
        self, entity_id: int, depth: int, when: When = CURRENT
    ) -> tuple[list[Entity], list[Relationship]]:
        self.get_entity(entity_id)
        clause, times = _when_clause(when, "r")
        ids = dialect.of(self.conn).neighborhood(self.conn, entity_id, depth, clause, times)
        nodes = self.get_entities(ids)
        return list(nodes.values()), self.edges_within(list(nodes), when)

    def neighbors(
        self, entity_ids: Sequence[int], when: When = CURRENT
    ) -> tuple[list[Entity], list[Relationship]]:
        """One hop from a set, plus every edge inside the combined set."""
        seeds = _ids_json(entity_ids)
        clause, times = _when_clause(when, "r")
        ids = [
            r[0]
            for r in self.conn.execute(
                f"WITH seeds(id) AS (SELECT value FROM {json_ints(self.conn)})"
                " SELECT id FROM seeds"
                " UNION SELECT r.to_id FROM relationships r"
                f" WHERE r.from_id IN (SELECT id FROM seeds){clause}"
                " UNION SELECT r.from_id FROM relationships r"
                f" WHERE r.to_id IN (SELECT id FROM seeds){clause}",
                (seeds, *times, *times),
            )
        ]
        nodes = self.get_entities(ids)
        return list(nodes.values()), self.edges_within(list(nodes), when)

    def relationships_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Relationship]:
        """Every interval of a project's graph, in id order (a relationship never
        leaves its graph, so its from-entity's project is the edge's)."""
        rows = self.conn.execute(
            f"SELECT {', '.join('r.' + c for c in _REL_FIELDS)}"
            " FROM relationships r JOIN entities e ON e.id = r.from_id"
            " WHERE e.project_id = ? AND r.id > ? ORDER BY r.id LIMIT ?",
            (project_id, after_id or 0, limit),
        ).fetchall()
        return [relationship_from_row(r) for r in rows]
