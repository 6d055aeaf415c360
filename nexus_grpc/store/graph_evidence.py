"""What episodes said about facts, and the intervals derived from it.

A relationship is derived: relationship_evidence holds each assertion or end
an episode (or an upsert) made, at the episode's time, and the domain derives
the intervals of one (from, label) from it (domain/timeline.py) and writes
them here whole (``write_intervals``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from nexus_grpc.core.graph import Evidence, Interval, Relationship
from nexus_grpc.store.dialect import json_ints
from nexus_grpc.store.graph import REL_COLUMNS, relationship_from_row
from nexus_grpc.store.sql import OnConnection, now

_EVIDENCE_COLUMNS = "id, from_id, to_id, label, kind, at, episode_id, mentions, notes, created_at"


def _evidence(r: Sequence) -> Evidence:
    return Evidence(*r)


def _ids_json(ids: Iterable[int]) -> str:
    return json.dumps([int(i) for i in ids])


class EvidenceRows(OnConnection):
    """The part of ``GraphRepository`` whose rows this module holds, on one
    connection (``SqlGraph`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def add_evidence(
        self,
        from_id: int,
        to_id: int,
        label: str,
        kind: str,
        at: float,
        *,
        episode_id: int | None = None,
        notes: str | None = None,
        mentions: int = 1,
    ) -> int:
        return int(
            self.conn.execute(
                "INSERT INTO relationship_evidence (from_id, to_id, label, kind, at, episode_id,"
                " mentions, notes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (from_id, to_id, label, kind, at, episode_id, mentions, notes, now()),
            ).fetchone()[0]
        )

    def drop_episode_evidence(self, episode_id: int) -> set[tuple[int, str]]:
        """Forget what an episode said (before it is extracted again); returns
        the (from, label) groups whose facts must be derived again."""
        groups = {
            (int(r[0]), r[1])
            for r in self.conn.execute(
                "SELECT from_id, label FROM relationship_evidence WHERE episode_id = ?",
                (episode_id,),
            )
        }
        self.conn.execute("DELETE FROM relationship_evidence WHERE episode_id = ?", (episode_id,))
        return groups

    def drop_triple_evidence(self, from_id: int, to_id: int, label: str) -> int:
        cur = self.conn.execute(
            "DELETE FROM relationship_evidence WHERE from_id = ? AND to_id = ? AND label = ?",
            (from_id, to_id, label),
        )
        return cur.rowcount

    def evidence_of(self, from_id: int, label: str) -> list[Evidence]:
        rows = self.conn.execute(
            f"SELECT {_EVIDENCE_COLUMNS} FROM relationship_evidence WHERE from_id = ? AND label ="
            " ?",
            (from_id, label),
        ).fetchall()
        return [_evidence(r) for r in rows]

    def evidence_in_project(
        self, project_id: int, after_id: int | None, limit: int
    ) -> list[Evidence]:
        rows = self.conn.execute(
            f"SELECT {', '.join('v.' + c for c in _EVIDENCE_COLUMNS.split(', '))}"
            " FROM relationship_evidence v JOIN entities e ON e.id = v.from_id"
            " WHERE e.project_id = ? AND e.session_id = 0 AND v.id > ? ORDER BY v.id LIMIT ?",
            (project_id, after_id or 0, limit),
        ).fetchall()
        return [_evidence(r) for r in rows]

    def groups_of(self, entity_ids: Sequence[int]) -> set[tuple[int, str]]:
        """Every (from, label) whose evidence names one of these entities at either end."""
        members = _ids_json(entity_ids)
        return {
            (int(r[0]), r[1])
            for r in self.conn.execute(
                "SELECT from_id, label FROM relationship_evidence"
                f" WHERE from_id IN (SELECT value FROM {json_ints(self.conn)})"
                " UNION SELECT from_id, label FROM relationship_evidence"
                f" WHERE to_id IN (SELECT value FROM {json_ints(self.conn)})",
                (members, members),
            )
        }

    def write_intervals(self, from_id: int, label: str, intervals: Sequence[Interval]) -> None:
        """Make the relationships of (from, label) exactly ``intervals``.

        A row keeps its id while its interval survives (same object, same start,
        or failing that the same object): clients holding a relationship id keep
        it through a re-derivation that only moved its end.
        """
        existing = [
            relationship_from_row(r)
            for r in self.conn.execute(
                f"SELECT {REL_COLUMNS} FROM relationships WHERE from_id = ? AND label = ? ORDER BY"
                " id",
                (from_id, label),
            )
        ]
        unused = {r.id: r for r in existing}
        pairs: list[tuple[Interval, Relationship | None]] = []
        waiting: list[Interval] = []
        for interval in intervals:
            same = next(
                (
                    r
                    for r in unused.values()
                    if r.to_id == interval.to_id and r.valid_at == interval.valid_at
                ),
                None,
            )
            if same is None:
                waiting.append(interval)
            else:
                del unused[same.id]
                pairs.append((interval, same))
        for interval in waiting:
            other = next((r for r in unused.values() if r.to_id == interval.to_id), None)
            if other is not None:
                del unused[other.id]
            pairs.append((interval, other))
        if unused:
            self.conn.execute(
                f"DELETE FROM relationships WHERE id IN (SELECT value FROM {json_ints(self.conn)})",
                (_ids_json(unused),),
            )
        for interval, row in pairs:
            values = (
                interval.notes,
                interval.mentions,
                interval.valid_at,
                interval.invalid_at,
                interval.asserted_by,
                interval.ended_by,
            )
            if row is None:
                self.conn.execute(
                    "INSERT INTO relationships (from_id, to_id, label, notes, mention_count,"
                    " valid_at, invalid_at, asserted_by, ended_by, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (from_id, interval.to_id, label, *values, interval.created_at or now()),
                )
            elif values != (
                row.notes,
                row.mention_count,
                row.valid_at,
                row.invalid_at,
                row.asserted_by,
                row.ended_by,
            ):
                self.conn.execute(
                    "UPDATE relationships SET notes = ?, mention_count = ?, valid_at = ?,"
                    " invalid_at = ?, asserted_by = ?, ended_by = ? WHERE id = ?",
                    (*values, row.id),
                )

    def delete_relationships(self, from_id: int, to_id: int, label: str) -> int:
        """Every interval of (from, label, to), and the evidence behind them."""
        self.drop_triple_evidence(from_id, to_id, label)
        cur = self.conn.execute(
            "DELETE FROM relationships WHERE from_id = ? AND to_id = ? AND label = ?",
            (from_id, to_id, label),
        )
        return cur.rowcount
