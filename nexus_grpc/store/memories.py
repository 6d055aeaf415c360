"""The memories table, its FTS5 index and the usage log.

Every read a viewer makes goes through a scope clause from
``store.memory_visibility_sql.sql_where``; only the id-addressed reads (get, the
owner checks) take no scope, and their callers check ownership.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.core.models import MemoryKind, MemoryScope, Tier
from nexus_grpc.core.records import Memory as Memory
from nexus_grpc.core.records import MemoryUsage as MemoryUsage
from nexus_grpc.core.records import UsageOwner as UsageOwner
from nexus_grpc.core.records import UsageRecord as UsageRecord
from nexus_grpc.errors import NotFound
from nexus_grpc.store import dialect
from nexus_grpc.store.dialect import json_ints, pinned_join
from nexus_grpc.store.memory_visibility_sql import sql_where
from nexus_grpc.store.sql import OnConnection, now, placeholders


def _owner_clause(owner: UsageOwner) -> tuple[str, tuple[object, ...]]:
    """The WHERE fragment (no leading AND) that confines usage rows to this owner."""
    if owner.tenant is None:
        return "user_id = ? AND project_id = ?", (owner.user_id, owner.project_id)
    return (
        "user_id = ? AND project_id = ? AND tenant = ?",
        (owner.user_id, owner.project_id, owner.tenant),
    )


def _row(r: sqlite3.Row) -> Memory:
    return Memory(
        id=r["id"],
        kind=r["kind"],
        title=r["title"],
        content=r["content"],
        tier=r["tier"],
        project_id=r["project_id"],
        agent_id=r["agent_id"],
        user_id=r["user_id"],
        session_id=r["session_id"],
        confidence=r["confidence"],
        metadata=json.loads(r["metadata"]),
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        last_used_at=r["last_used_at"],
        use_count=r["use_count"],
        request_id=r["request_id"],
        tenant=r["tenant"],
        expire_at=r["expire_at"],
        source=r["source"],
        source_episode_id=r["source_episode_id"],
    )


def _usage_row(r: sqlite3.Row) -> MemoryUsage:
    return MemoryUsage(
        id=r["id"],
        memory_id=r["memory_id"],
        thread_id=r["thread_id"],
        context=r["context"],
        relevance=r["relevance"],
        category=r["category"],
        used_at=r["used_at"],
    )


class MemoryRows(OnConnection):
    """The part of ``MemoryRepository`` whose rows this module holds, on one
    connection (``SqlMemories`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def insert(
        self,
        values: Mapping[str, Any],
        request_id: str | None,
        tenant: str,
    ) -> Memory:
        """Insert a memory (its index job and expiry are the domain's,
        domain/memory_upkeep.py)."""
        ts = now()
        row = self.conn.execute(
            "INSERT INTO memories (kind, title, content, tier, project_id, agent_id, user_id,"
            " session_id, confidence, metadata, request_id, created_at, updated_at, tenant,"
            " expire_at, source, source_episode_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                values["kind"],
                values["title"],
                values["content"],
                values["tier"],
                values["project_id"],
                values["agent_id"],
                values["user_id"],
                values["session_id"],
                values["confidence"],
                json.dumps(values["metadata"]),
                request_id or None,
                ts,
                ts,
                tenant,
                values.get("expire_at"),
                values.get("source", "client"),
                values.get("source_episode_id"),
            ),
        ).fetchone()
        return self.get(int(row[0]))

    def find(self, memory_id: int) -> Memory | None:
        row = self.conn.execute("SELECT * FROM memories WHERE id = ?", (memory_id,)).fetchone()
        return _row(row) if row else None

    def get(self, memory_id: int) -> Memory:
        memory = self.find(memory_id)
        if memory is None:
            raise NotFound(
                f"memory {memory_id} does not exist",
                resource_type="memory",
                resource_name=str(memory_id),
            )
        return memory

    def find_by_request_id(self, tenant: str, user_id: str, request_id: str) -> Memory | None:
        """The memory this owner (tenant and user; '' for PROJECT memories) stored
        with this retry key."""
        row = self.conn.execute(
            "SELECT * FROM memories WHERE tenant = ? AND user_id = ? AND request_id = ?",
            (tenant, user_id, request_id),
        ).fetchone()
        return _row(row) if row else None

    def texts_of_owner(
        self,
        *,
        kind: int,
        project_id: int,
        agent_id: str,
        user_id: str,
        tier: int,
        session_id: int | None,
        tenant: str,
        containing: Sequence[str] = (),
    ) -> list[tuple[int, str, str]]:
        """(id, title, content) of one owner's live memories in one tier, oldest
        first; ``session_id`` narrows to an origin session (None: any), and
        ``containing`` to contents holding each of these lower-case ASCII words,
        in any case (the database compares, so the caller reads a few rows, not
        the owner's thousand). Walks the owner's index (idx_memories_project /
        idx_memories_user), as the cap does.

        On PostgreSQL the owner is first locked for the rest of the transaction,
        so two concurrent creates of the same words cannot both find none (on
        SQLite the one writer already runs them one after the other)."""
        owner = f"memory-owner:{tenant}:{kind}:{project_id}:{agent_id}:{user_id}:{tier}"
        dialect.of(self.conn).lock_for_transaction(self.conn, owner)
        # A PROJECT memory's owner is its project and agent: compared as an
        # expression, its '' user cannot lead the walk down idx_memories_tenant_user,
        # which holds every PROJECT memory of the tenant under that '' (without
        # statistics SQLite takes the index with the most equal columns).
        user = "user_id || ''" if kind == MemoryKind.PROJECT else "user_id"
        sql = (
            "SELECT id, title, content FROM memories WHERE tenant = ? AND kind = ?"
            f" AND project_id = ? AND agent_id = ? AND {user} = ? AND tier = ?"
            " AND (expire_at IS NULL OR expire_at > ?)"
        )
        params: list[Any] = [tenant, kind, project_id, agent_id, user_id, tier, now()]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        # lower() folds ASCII alike in both databases (SQLite's only ASCII).
        find = dialect.of(self.conn).find
        for word in containing:
            sql += f" AND {find}(lower(content), ?) > 0"
            params.append(word)
        rows = self.conn.execute(sql + " ORDER BY id", tuple(params)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def count_in_cap_scope(
        self, kind: int, project_id: int, agent_id: str, user_id: str, tenant: str
    ) -> int:
        """Memories counted against the cap of the owner a new memory would join.

        One selection reads a project's PROJECT memories plus one user's USER
        memories, so that is what the cap bounds: PROJECT memories per (project,
        agent), USER memories per (project, agent, user), project 0 included.
        ARCHIVE is never read by selection, so it does not count. A user id names
        a user within a tenant, so USER counts are per tenant too. Each count walks
        only its owner's index (idx_memories_project / idx_memories_user)."""
        if kind == MemoryKind.PROJECT:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM memories WHERE project_id = ? AND agent_id = ? AND kind = ?"
                " AND tier != ? AND (expire_at IS NULL OR expire_at > ?)",
                (project_id, agent_id, int(MemoryKind.PROJECT), int(Tier.ARCHIVE), now()),
            ).fetchone()
        else:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM memories WHERE user_id = ? AND kind = ? AND project_id = ?"
                " AND agent_id = ? AND tier != ? AND tenant = ?"
                " AND (expire_at IS NULL OR expire_at > ?)",
                (
                    user_id,
                    int(MemoryKind.USER),
                    project_id,
                    agent_id,
                    int(Tier.ARCHIVE),
                    tenant,
                    now(),
                ),
            ).fetchone()
        return int(row[0])

    def update(self, memory_id: int, changes: Mapping[str, Any]) -> Memory:
        self.get(memory_id)
        if changes:
            cols = []
            params: list[Any] = []
            for name, value in changes.items():
                cols.append(f"{name} = ?")
                params.append(json.dumps(value) if name == "metadata" else value)
            self.conn.execute(
                f"UPDATE memories SET {', '.join(cols)}, updated_at = ? WHERE id = ?",
                (*params, now(), memory_id),
            )
        return self.get(memory_id)

    def delete(self, memory_id: int) -> None:
        self.get(memory_id)
        self.conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))

    def list_visible(
        self,
        scope: MemoryScope,
        *,
        at: float | None = None,
        kind: int = 0,
        after_id: int | None = None,
        limit: int = 50,
        newest_first: bool = False,
    ) -> list[Memory]:
        where, params = sql_where(scope, now=at)
        extra = " AND m.kind = ?" if kind else ""
        if newest_first:
            order, bound, start = "DESC", "<", after_id if after_id is not None else 2**62
        else:
            order, bound, start = "", ">", after_id or 0
        rows = self.conn.execute(
            f"SELECT m.* FROM memories m WHERE {where}{extra} AND m.id {bound} ?"
            f" ORDER BY m.id {order} LIMIT ?",
            (*params, *((kind,) if kind else ()), start, limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def get_visible(
        self, ids: Sequence[int], scope: MemoryScope, *, at: float | None = None
    ) -> dict[int, Memory]:
        """The rows among ``ids`` that exist and that the scope may see (expiry
        judged at ``at``, now when None)."""
        if not ids:
            return {}
        where, params = sql_where(scope, now=at)
        # CROSS JOIN pins the id list as the outer loop: one primary-key lookup per
        # hit. Left to itself the planner ORed the scope's indexes instead, and a
        # project's index walks every memory in the project (4.5 ms at 100,000).
        rows = self.conn.execute(
            f"SELECT m.* FROM (SELECT DISTINCT value AS id FROM {json_ints(self.conn)}) j"
            f" {pinned_join(self.conn)} memories m ON m.id = j.id WHERE {where}",
            (json.dumps([int(i) for i in ids]), *params),
        ).fetchall()
        return {r["id"]: _row(r) for r in rows}

    def keyword_search(
        self,
        match: str,
        scope: MemoryScope,
        limit: int,
        *,
        at: float | None = None,
    ) -> list[tuple[Memory, float]]:
        """(memory, bm25 with higher better), best first, scoped in the same query.

        The scope's owners confine the words to their own postings; the scope's
        whole visibility rule then applies. Ranks ids first and reads whole rows
        only for the ``limit`` kept."""
        if not scope.project_id and not scope.user_id:
            return []
        where, params = sql_where(scope, now=at)
        ranked = dialect.of(self.conn).memory_keyword_search(
            self.conn, match, scope.project_id, scope.user_id, where, params, limit
        )
        rows = self.get_many([i for i, _ in ranked])
        return [(rows[i], score) for i, score in ranked if i in rows]

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` that ``match`` matches, however they would rank."""
        return dialect.of(self.conn).keyword_matching(self.conn, "memories", match, ids)

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        if not ids:
            return {}
        rows = self.conn.execute(
            f"SELECT * FROM memories WHERE id IN ({placeholders(len(ids))})", tuple(ids)
        ).fetchall()
        return {r["id"]: _row(r) for r in rows}

    def scope_sample(
        self,
        scope: MemoryScope,
        limit: int,
        *,
        at: float | None = None,
    ) -> list[str]:
        """Title and content of up to ``limit`` of the scope's most recent memories.

        Each owner's newest are read through its own index (the user's USER memories,
        the project's PROJECT memories), so the cost follows the scope: filtering the
        table newest-first would walk every other user's memories in between. Each
        owner's newest are those the scope may see (its tenant, its project, its
        tiers): another tenant's user of the same id, or the user's memories
        elsewhere, never take the sample's places."""
        project_id, user_id = scope.project_id, scope.user_id
        where, params = sql_where(scope, now=at)
        rows = self.conn.execute(
            "SELECT m.title, m.content FROM ("
            "  SELECT id FROM (SELECT m.id FROM memories m WHERE m.user_id = ? AND m.kind = ?"
            f"                  AND {where} ORDER BY m.id DESC LIMIT ?) AS mine"
            "  UNION"
            "  SELECT id FROM (SELECT m.id FROM memories m WHERE m.project_id = ? AND m.kind = ?"
            f"                  AND {where} ORDER BY m.id DESC LIMIT ?) AS shared"
            f") j {pinned_join(self.conn)} memories m ON m.id = j.id"
            " ORDER BY m.id DESC LIMIT ?",
            (
                user_id,
                int(MemoryKind.USER),
                *params,
                limit,
                project_id,
                int(MemoryKind.PROJECT),
                *params,
                limit,
                limit,
            ),
        ).fetchall()
        return [f"{t}\n{c}" for t, c in rows]

    def used_in_thread(self, thread_id: str, owner: UsageOwner, ids: Sequence[int]) -> set[int]:
        if not thread_id or not ids:
            return set()
        where, params = _owner_clause(owner)
        rows = self.conn.execute(
            f"SELECT DISTINCT memory_id FROM memory_usage WHERE thread_id = ? AND {where}"
            f" AND memory_id IN ({placeholders(len(ids))})",
            (thread_id, *params, *ids),
        )
        return {r[0] for r in rows}

    def record_usage(
        self,
        thread_id: str,
        owner: UsageOwner,
        context: str,
        used: Sequence[UsageRecord],
    ) -> dict[int, Memory]:
        """One bulk write: a usage row per memory, and its counters.  Memories
        deleted meanwhile are skipped.  Returns the updated rows."""
        ids = [u.memory_id for u in used]
        if not ids:
            return {}
        # Each usage row belongs to its memory's tenant; an expired memory is skipped.
        ts = now()
        present = {
            r[0]: r[1]
            for r in self.conn.execute(
                f"SELECT id, tenant FROM memories WHERE id IN ({placeholders(len(ids))})"
                " AND (expire_at IS NULL OR expire_at > ?)",
                (*ids, ts),
            )
        }
        live = [u for u in used if u.memory_id in present]
        self.conn.executemany(
            "INSERT INTO memory_usage (memory_id, thread_id, user_id, project_id, context,"
            " relevance, category, used_at, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    u.memory_id,
                    thread_id,
                    owner.user_id,
                    owner.project_id,
                    context,
                    u.relevance,
                    u.category,
                    ts,
                    present[u.memory_id],
                )
                for u in live
            ],
        )
        self.conn.executemany(
            "UPDATE memories SET use_count = use_count + 1, last_used_at = ? WHERE id = ?",
            [(ts, u.memory_id) for u in live],
        )
        rows = self.conn.execute(
            f"SELECT * FROM memories WHERE id IN ({placeholders(len(live))})",
            [u.memory_id for u in live],
        ).fetchall()
        return {r["id"]: _row(r) for r in rows}

    def usage_by_memory(
        self, memory_id: int, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        """The memory's usage recorded by this owner (their prompts only)."""
        where, params = _owner_clause(owner)
        rows = self.conn.execute(
            f"SELECT * FROM memory_usage WHERE memory_id = ? AND {where}"
            " AND id > ? ORDER BY id LIMIT ?",
            (memory_id, *params, after_id or 0, limit),
        ).fetchall()
        return [_usage_row(r) for r in rows]

    def usage_by_thread(
        self, thread_id: str, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        """A thread's usage, as recorded by its owner."""
        where, params = _owner_clause(owner)
        rows = self.conn.execute(
            f"SELECT * FROM memory_usage WHERE thread_id = ? AND {where}"
            " AND id > ? ORDER BY id LIMIT ?",
            (thread_id, *params, after_id or 0, limit),
        ).fetchall()
        return [_usage_row(r) for r in rows]

    def usage_by_owner(
        self, owner: UsageOwner, after_id: int | None, limit: int
    ) -> list[MemoryUsage]:
        """Everything this owner's selections recorded, oldest first (keyset on id)."""
        where, params = _owner_clause(owner)
        rows = self.conn.execute(
            f"SELECT * FROM memory_usage WHERE {where} AND id > ? ORDER BY id LIMIT ?",
            (*params, after_id or 0, limit),
        ).fetchall()
        return [_usage_row(r) for r in rows]

    def list_in_project(
        self,
        project_id: int,
        tenant: str | None,
        after_id: int | None,
        limit: int,
        at: float,
    ) -> list[Memory]:
        """Every memory stored in the project that has not expired by ``at``,
        oldest first (keyset on id), for an export; the caller filters owners."""
        where = "project_id = ? AND id > ? AND (expire_at IS NULL OR expire_at > ?)"
        params: tuple[Any, ...] = (project_id, after_id or 0, at)
        if tenant is not None:
            where += " AND tenant = ?"
            params += (tenant,)
        rows = self.conn.execute(
            f"SELECT * FROM memories WHERE {where} ORDER BY id LIMIT ?", (*params, limit)
        ).fetchall()
        return [_row(r) for r in rows]
