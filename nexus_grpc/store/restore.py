"""Rows written by RestoreProject, with the values an export carries.

The other writers stamp what the server assigns (create and update times,
counters, a history entry's time and author) as they write; a restore keeps
the exported values instead, so each row here is inserted with them given.
What a row's live writer would queue for its derived state (an index job, an
expiry, a retention sweep) is queued by the domain (domain/restore.py), in the
same transaction, at ``jobs.BULK``, behind live traffic. The SQL is shared by
SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.core.graph import METHOD_NEW, EntityAlias, EntityMerge, Evidence
from nexus_grpc.core.names import name_key
from nexus_grpc.errors import AlreadyExists
from nexus_grpc.store import entity_merges as merge_store
from nexus_grpc.store import graph as graph_store
from nexus_grpc.store import memory_history, projects
from nexus_grpc.store.graph import Entity, Relationship
from nexus_grpc.store.memories import Memory
from nexus_grpc.store.sql import OnConnection
from nexus_grpc.store.summaries import Summary

#: What a restore refused for its project's name may do instead.
RESTORE_KEEPS_NAME = (
    "a restore keeps the project's name, and a name is unique in its tenant: rename or delete"
    " that project first (UpdateProject, DeleteProject), or import the file without --restore,"
    " which gives the new project a free name; nothing was restored"
)


class SqlRestore(OnConnection):
    """``RestoreRepository`` on one connection."""

    __slots__ = ()

    def insert_project(
        self,
        values: Mapping[str, Any],
        created_at: float,
        updated_at: float,
        tenant: str,
    ) -> int:
        """``values``: the project's columns (store/projects.py's COLUMNS).
        ALREADY_EXISTS when ``tenant`` has a project of its name: a restore keeps
        the name, and a name is unique in its tenant."""
        row = self.conn.execute(
            "INSERT INTO projects (name, description, colour, icon, notes, system_prompt,"
            " retention, single_valued_labels, memory_formation, isolated, created_at, updated_at,"
            " tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)"
            " ON CONFLICT (tenant, name) DO NOTHING RETURNING id",
            (
                values["name"],
                values["description"],
                values["colour"],
                values["icon"],
                values["notes"],
                values["system_prompt"],
                values["retention"],
                json.dumps(list(labels))
                if (labels := values.get("single_valued_labels"))
                else None,
                values.get("memory_formation"),
                created_at,
                updated_at,
                tenant,
            ),
        ).fetchone()
        if row is None:
            raise projects.ProjectRows(self.conn).name_taken(
                values["name"], tenant, RESTORE_KEEPS_NAME
            )
        return int(row[0])

    def insert_session(
        self,
        external_id: str,
        name: str,
        project_id: int,
        metadata: Mapping[str, Any],
        created_at: float,
        tenant: str,
        user_id: str = "",
        agent_id: str = "",
    ) -> int:
        # Checked first rather than caught: on PostgreSQL a failed INSERT would
        # abort the transaction, and the restore's message should name the
        # session, not a constraint.
        held = self.conn.execute(
            "SELECT id FROM sessions WHERE tenant = ? AND external_id = ?", (tenant, external_id)
        ).fetchone()
        if held is not None:
            raise AlreadyExists(
                f"a session with external_id {external_id!r} already exists (session {held[0]});"
                " a restore keeps its sessions' external_ids, so it cannot go into a server"
                " that already holds one of them"
            )
        row = self.conn.execute(
            "INSERT INTO sessions (tenant, external_id, name, project_id, metadata, created_at,"
            " user_id, agent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                tenant,
                external_id,
                name,
                project_id,
                json.dumps(metadata),
                created_at,
                user_id,
                agent_id,
            ),
        ).fetchone()
        return int(row[0])

    def insert_memory(self, m: Memory, tenant: str) -> int:
        """``m`` with its new project and session ids; its own id is ignored."""
        row = self.conn.execute(
            "INSERT INTO memories (kind, title, content, tier, project_id, agent_id, user_id,"
            " session_id, confidence, metadata, request_id, created_at, updated_at, last_used_at,"
            " use_count, tenant, expire_at, source, source_episode_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                m.kind,
                m.title,
                m.content,
                m.tier,
                m.project_id,
                m.agent_id,
                m.user_id,
                m.session_id,
                m.confidence,
                json.dumps(m.metadata),
                m.created_at,
                m.updated_at,
                m.last_used_at,
                m.use_count,
                tenant,
                m.expire_at,
                m.source,
                m.source_episode_id,
            ),
        ).fetchone()
        return int(row[0])

    def insert_revision(self, r: memory_history.Revision) -> None:
        """``r`` with its new memory id, and ``previous`` with the new ids."""
        memory_history.MemoryHistoryRows(self.conn).record(
            r.previous,
            r.action,
            r.changed,
            memory_history.ChangedBy(r.request_id, r.principal, r.episode_id, r.reason),
            at=r.changed_at,
        )

    def insert_entity(self, e: Entity, tenant: str) -> int:
        """``e`` with its new project id; its own id is ignored."""
        row = self.conn.execute(
            "INSERT INTO entities (project_id, session_id, name, name_key, type, notes,"
            " mention_count, confidence, source, last_seen_at, created_at, tenant, resolution)"
            " VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                e.project_id,
                e.name,
                name_key(e.name, e.type),
                e.type,
                e.notes,
                e.mention_count,
                e.confidence,
                e.source,
                e.last_seen_at,
                e.created_at,
                tenant,
                e.resolution,
            ),
        ).fetchone()
        return int(row[0])

    def insert_relationship(self, r: Relationship) -> int:
        """``r`` with its new entity and episode ids."""
        row = self.conn.execute(
            "INSERT INTO relationships (from_id, to_id, label, notes, mention_count, created_at,"
            " valid_at, invalid_at, asserted_by, ended_by)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                r.from_id,
                r.to_id,
                r.label,
                r.notes,
                r.mention_count,
                r.created_at,
                r.valid_at if r.valid_at is not None else r.created_at,
                r.invalid_at,
                r.asserted_by,
                r.ended_by,
            ),
        ).fetchone()
        return int(row[0])

    def insert_alias(self, a: EntityAlias) -> None:
        """``a`` with its new entity and episode ids, and its words indexed."""
        graph_store.GraphRows(self.conn).add_alias(
            a.entity_id,
            a.name,
            method=a.method,
            score=a.score,
            episode_id=a.episode_id,
            refresh=False,
            at=a.created_at,
        )

    def insert_episode_link(self, entity_id: int, episode_id: int) -> None:
        graph_store.GraphRows(self.conn).link_episode(entity_id, episode_id)

    def insert_evidence(self, e: Evidence) -> int:
        row = self.conn.execute(
            "INSERT INTO relationship_evidence (from_id, to_id, label, kind, at, episode_id,"
            " mentions, notes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                e.from_id,
                e.to_id,
                e.label,
                e.kind,
                e.at,
                e.episode_id,
                e.mentions,
                e.notes,
                e.created_at,
            ),
        ).fetchone()
        return int(row[0])

    def insert_merge(self, m: EntityMerge) -> int:
        return merge_store.MergeRows(self.conn).insert_merge(m)

    def ensure_own_alias(self, entity_ids: Sequence[int]) -> None:
        """Entities restored without aliases (an older export) are known by their name."""
        for entity_id in entity_ids:
            if (
                self.conn.execute(
                    "SELECT 1 FROM entity_aliases WHERE entity_id = ? LIMIT 1", (entity_id,)
                ).fetchone()
                is None
            ):
                name = self.conn.execute(
                    "SELECT name FROM entities WHERE id = ?", (entity_id,)
                ).fetchone()
                graph_store.GraphRows(self.conn).add_alias(
                    entity_id, name[0], method=METHOD_NEW, refresh=False
                )

    def insert_summary(self, s: Summary) -> int:
        """``s`` with its new session (or, for an overview, project) and episode ids."""
        row = self.conn.execute(
            "INSERT INTO summaries (session_id, project_id, content, first_episode_id,"
            " last_episode_id, episode_count, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                s.session_id or None,
                None if s.session_id else s.project_id,
                s.content,
                s.first_episode_id,
                s.last_episode_id,
                s.episode_count,
                s.created_at,
                s.updated_at,
            ),
        ).fetchone()
        return int(row[0])
