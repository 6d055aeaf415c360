"""Entity merges: their records, and moving what an entity holds to another
and back (domain/merges.py decides when)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from nexus_grpc.core.graph import Entity, EntityMerge, MergedSource
from nexus_grpc.core.names import name_key
from nexus_grpc.errors import NotFound
from nexus_grpc.store import dialect
from nexus_grpc.store.dialect import json_ints, json_texts
from nexus_grpc.store.graph import Graph, GraphRows
from nexus_grpc.store.sql import OnConnection, now

_MERGE_COLUMNS = (
    "id, project_id, session_id, tenant, target_id, source_ids, method, reason, created_at,"
    " undone_at, request_id, principal, snapshot"
)


def _ids_json(ids: Sequence[int]) -> str:
    return json.dumps([int(i) for i in ids])


def _merge(r: Sequence) -> EntityMerge:
    snapshot = json.loads(r[12])
    return EntityMerge(
        id=r[0],
        project_id=r[1],
        session_id=r[2],
        tenant=r[3],
        target_id=r[4],
        source_ids=tuple(json.loads(r[5])),
        method=r[6],
        reason=r[7],
        created_at=r[8],
        undone_at=r[9],
        request_id=r[10],
        principal=r[11],
        target_notes=snapshot.get("target_notes"),
        sources=tuple(_source_from_json(s) for s in snapshot.get("sources", [])),
    )


def _source_to_json(s: MergedSource) -> dict[str, object]:
    e = s.entity
    return {
        "entity": {
            "id": e.id,
            "name": e.name,
            "type": e.type,
            "notes": e.notes,
            "mention_count": e.mention_count,
            "confidence": e.confidence,
            "source": e.source,
            "last_seen_at": e.last_seen_at,
            "created_at": e.created_at,
            "project_id": e.project_id,
            "session_id": e.session_id,
            "tenant": e.tenant,
            "resolution": e.resolution,
        },
        "alias_names": list(s.alias_names),
        "episode_ids": list(s.episode_ids),
        "shared_episode_ids": list(s.shared_episode_ids),
        "evidence_from": list(s.evidence_from),
        "evidence_to": list(s.evidence_to),
    }


def _source_from_json(d: dict) -> MergedSource:
    return MergedSource(
        entity=Entity(**d["entity"]),
        alias_names=tuple(d.get("alias_names", ())),
        episode_ids=tuple(d.get("episode_ids", ())),
        shared_episode_ids=tuple(d.get("shared_episode_ids", ())),
        evidence_from=tuple(d.get("evidence_from", ())),
        evidence_to=tuple(d.get("evidence_to", ())),
    )


def _lower(column: str) -> str:
    return f"lower({column})"


class MergeRows(OnConnection):
    """The part of ``GraphRepository`` whose rows this module holds, on one
    connection (``SqlGraph`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def insert_merge(self, m: EntityMerge) -> int:
        snapshot = json.dumps(
            {"target_notes": m.target_notes, "sources": [_source_to_json(s) for s in m.sources]}
        )
        return int(
            self.conn.execute(
                "INSERT INTO entity_merges (project_id, session_id, tenant, target_id, source_ids,"
                " method, reason, request_id, principal, snapshot, created_at, undone_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    m.project_id,
                    m.session_id,
                    m.tenant,
                    m.target_id,
                    json.dumps(list(m.source_ids)),
                    m.method,
                    m.reason,
                    m.request_id,
                    m.principal,
                    snapshot,
                    m.created_at or now(),
                    m.undone_at,
                ),
            ).fetchone()[0]
        )

    def get_merge(self, merge_id: int, tenant: str | None = None) -> EntityMerge:
        clause, params = ("", ()) if tenant is None else (" AND tenant = ?", (tenant,))
        row = self.conn.execute(
            f"SELECT {_MERGE_COLUMNS} FROM entity_merges WHERE id = ?{clause}", (merge_id, *params)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"merge {merge_id} does not exist",
                resource_type="merge",
                resource_name=str(merge_id),
            )
        return _merge(row)

    def merge_by_request(self, tenant: str, request_id: str) -> EntityMerge | None:
        row = self.conn.execute(
            f"SELECT {_MERGE_COLUMNS} FROM entity_merges WHERE tenant = ? AND request_id = ?",
            (tenant, request_id),
        ).fetchone()
        return None if row is None else _merge(row)

    def list_merges(
        self,
        graph: Graph | None,
        entity_id: int,
        after_id: int | None,
        limit: int,
        tenant: str | None,
    ) -> list[EntityMerge]:
        """A graph's merges, or those an entity took part in, oldest first."""
        where = ["id > ?"]
        params: list[object] = [after_id or 0]
        if graph is not None:
            where.append("project_id = ? AND session_id = ?")
            params.extend(graph)
        if entity_id:
            where.append(
                "(target_id = ? OR EXISTS (SELECT 1 FROM"
                f" {json_ints(self.conn).replace('?', 'source_ids')}"
                " s WHERE s.value = ?))"
            )
            params.extend((entity_id, entity_id))
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        rows = self.conn.execute(
            f"SELECT {_MERGE_COLUMNS} FROM entity_merges WHERE {' AND '.join(where)}"
            " ORDER BY id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_merge(r) for r in rows]

    def merges_after(self, merge: EntityMerge) -> list[EntityMerge]:
        """The merges of the same graph made after ``merge`` and not undone."""
        rows = self.conn.execute(
            f"SELECT {_MERGE_COLUMNS} FROM entity_merges WHERE project_id = ? AND session_id = ?"
            " AND id > ? AND undone_at IS NULL ORDER BY id",
            (merge.project_id, merge.session_id, merge.id),
        ).fetchall()
        return [_merge(r) for r in rows]

    def mark_undone(self, merge_id: int) -> None:
        self.conn.execute("UPDATE entity_merges SET undone_at = ? WHERE id = ?", (now(), merge_id))

    def move_aliases(self, source_id: int, target_id: int) -> list[str]:
        """The source's aliases become the target's (a name both have stays the
        target's); returns the names that moved."""
        moved = [
            r[0]
            for r in self.conn.execute(
                "SELECT name FROM entity_aliases s WHERE s.entity_id = ? AND NOT EXISTS ("
                " SELECT 1 FROM entity_aliases t WHERE t.entity_id = ?"
                f" AND {_lower('t.name')} = {_lower('s.name')}) ORDER BY id",
                (source_id, target_id),
            )
        ]
        self._move_alias_rows(source_id, target_id, moved)
        return moved

    def return_aliases(self, target_id: int, source_id: int, names: Sequence[str]) -> None:
        self._move_alias_rows(target_id, source_id, names)

    def _move_alias_rows(self, from_id: int, to_id: int, names: Sequence[str]) -> None:
        self.conn.execute(
            "UPDATE entity_aliases SET entity_id = ? WHERE entity_id = ?"
            f" AND lower(name) IN (SELECT lower(value) FROM {json_texts(self.conn)})",
            (to_id, from_id, json.dumps(list(names))),
        )

    def move_episode_links(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]:
        """(episodes whose link moved to the target, episodes both were linked to)."""
        mine = [
            r[0]
            for r in self.conn.execute(
                "SELECT episode_id FROM entity_episodes WHERE entity_id = ? ORDER BY episode_id",
                (source_id,),
            )
        ]
        moved = [e for e in mine if GraphRows(self.conn).link_episode(target_id, e)]
        shared = sorted(set(mine) - set(moved))
        self.conn.execute("DELETE FROM entity_episodes WHERE entity_id = ?", (source_id,))
        return moved, shared

    def return_episode_links(
        self,
        target_id: int,
        source_id: int,
        moved: Sequence[int],
        shared: Sequence[int],
    ) -> None:
        episodes = _ids_json([*moved, *shared])
        self.conn.execute(
            "INSERT INTO entity_episodes (entity_id, episode_id)"
            f" SELECT ?, value FROM {json_ints(self.conn)} e"
            " WHERE EXISTS (SELECT 1 FROM episodes WHERE id = e.value) ON CONFLICT DO NOTHING",
            (source_id, episodes),
        )
        self.conn.execute(
            "DELETE FROM entity_episodes WHERE entity_id = ? AND episode_id IN"
            f" (SELECT value FROM {json_ints(self.conn)})",
            (target_id, _ids_json(moved)),
        )

    def move_evidence(self, source_id: int, target_id: int) -> tuple[list[int], list[int]]:
        """Re-point the source's evidence at the target; returns the ids moved at
        each end (from, to)."""
        ends = []
        for column in ("from_id", "to_id"):
            ids = [
                r[0]
                for r in self.conn.execute(
                    f"SELECT id FROM relationship_evidence WHERE {column} = ? ORDER BY id",
                    (source_id,),
                )
            ]
            self.conn.execute(
                f"UPDATE relationship_evidence SET {column} = ? WHERE {column} = ?",
                (target_id, source_id),
            )
            ends.append(ids)
        return ends[0], ends[1]

    def return_evidence(
        self, source_id: int, from_ids: Sequence[int], to_ids: Sequence[int]
    ) -> None:
        for column, ids in (("from_id", from_ids), ("to_id", to_ids)):
            self.conn.execute(
                f"UPDATE relationship_evidence SET {column} = ?"
                f" WHERE id IN (SELECT value FROM {json_ints(self.conn)})",
                (source_id, _ids_json(ids)),
            )

    def add_mentions(self, entity_id: int, count: int, notes: str | None = None) -> None:
        self.conn.execute(
            f"UPDATE entities SET mention_count = {dialect.of(self.conn).greatest}(mention_count +"
            " ?, 0),"
            " notes = COALESCE(notes, ?) WHERE id = ?",
            (count, notes, entity_id),
        )

    def set_notes(self, entity_id: int, notes: str | None) -> None:
        self.conn.execute("UPDATE entities SET notes = ? WHERE id = ?", (notes, entity_id))

    def delete_entity_row(self, entity_id: int) -> None:
        """Remove a merged source (what it held has moved already)."""
        self.conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))

    def reinsert_entity(self, e: Entity) -> int:
        """A merged source back (undo): under its own id, or a new one when it
        never had one here (a merge restored from another server). Its key is a
        placeholder until ``restore_name_key``: the target may hold it until its
        aliases are returned."""
        columns = (
            "project_id, session_id, name, name_key, type, notes, mention_count, confidence,"
            " source, last_seen_at, created_at, tenant, resolution"
        )
        values = (
            e.project_id,
            e.session_id,
            e.name,
            f"{name_key(e.name, e.type)}#undo{e.id}",
            e.type,
            e.notes,
            e.mention_count,
            e.confidence,
            e.source,
            e.last_seen_at,
            e.created_at,
            e.tenant,
            e.resolution,
        )
        if e.id:
            self.conn.execute(
                f"INSERT INTO entities (id, {columns}) VALUES (?, {', '.join('?' * len(values))})",
                (e.id, *values),
            )
            entity_id = e.id
        else:
            entity_id = int(
                self.conn.execute(
                    f"INSERT INTO entities ({columns}) VALUES ({', '.join('?' * len(values))})"
                    " RETURNING id",
                    values,
                ).fetchone()[0]
            )
        return entity_id

    def restore_name_key(self, entity_id: int) -> None:
        """The entity's key from its name again, when no other entity holds it."""
        row = self.conn.execute(
            "SELECT project_id, session_id, name, type FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        if row is None:
            return
        key = name_key(row[2], row[3])
        taken = self.conn.execute(
            "SELECT 1 FROM entities WHERE project_id = ? AND session_id = ? AND name_key = ?"
            " AND type = ? AND id != ?",
            (row[0], row[1], key, row[3], entity_id),
        ).fetchone()
        if taken is None:
            self.conn.execute("UPDATE entities SET name_key = ? WHERE id = ?", (key, entity_id))
