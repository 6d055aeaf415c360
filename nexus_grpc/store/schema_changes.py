"""Schema changes, declared once for both stores.

A change is a list of operations that name what they add in the declaration
(store/schema.py): each backend renders them into its own DDL, inside the
migration's transaction, so one change is never written twice. Data that a
change moves is plain SQL that both databases read alike, or a function of
the backend that runs it.

A new database is created from the declaration, not by replaying history:
changes only upgrade databases that an earlier build created. The changes
before this module existed are in each backend's history
(store/sqlite/migrations.py, store/postgres/migrations.py), which lists
them with their own version numbers; a change appended here is appended to
both, at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nexus_grpc.core import jobs
from nexus_grpc.store import schema
from nexus_grpc.store.schema import Column, Index, Table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AddColumn:
    """Add a declared column (its type, default and reference as declared)."""

    table: str
    column: str


@dataclass(frozen=True)
class CreateTable:
    """Create a declared table with its unique keys and indexes."""

    table: str


@dataclass(frozen=True)
class CreateIndex:
    """Create a declared index, unless it is there (an older build may hold it)."""

    name: str


@dataclass(frozen=True)
class DropIndex:
    """Drop an index, if it is there (so that a declared one may take its name)."""

    name: str


@dataclass(frozen=True)
class Sql:
    """A statement that both databases read alike (data a change moves), or
    that only ``only``'s DDL spells (a trigger)."""

    statement: str
    only: str | None = None


@dataclass(frozen=True)
class Rewrite:
    """Rows rewritten by a rule that SQL cannot spell alike in both databases:
    ``select`` (SQL both read alike) reads them, ``rule`` answers the
    parameters of ``update`` (``?`` placeholders, as the store writes them,
    and no quoted text: every value is a parameter) for each row it changes.
    Each backend's migrations run it in the change's transaction, in its
    place among the other operations."""

    select: str
    rule: Callable[[Sequence[Sequence[Any]]], list[tuple[Any, ...]]]
    update: str


@dataclass(frozen=True)
class Requeue:
    """Queue ``kind`` for every row of ``table``, due now and behind live work:
    a derived index (the vector points) rebuilt in the background after an
    upgrade. Each job takes its row's tenant, as store/jobs.py queues one."""

    kind: str
    table: str


Operation = AddColumn | CreateTable | CreateIndex | DropIndex | Sql | Rewrite | Requeue

# The time now in seconds, as each backend writes it in a statement.
_NOW = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgres": "EXTRACT(EPOCH FROM now())::double precision",
}


@dataclass(frozen=True)
class Change:
    """One schema change: why (for the log and the reader) and what."""

    why: str
    operations: tuple[Operation, ...]


# The changes both stores made by hand before this module: each backend's
# history lists them at its own version number.

JOB_PRIORITY = Change(
    "job priority: a bulk import's jobs are claimed after every due live one",
    (AddColumn("jobs", "priority"), CreateIndex("idx_jobs_priority")),
)

RETENTION = Change(
    "a project's retention, which reads enforce by occur_at",
    (AddColumn("projects", "retention"), CreateIndex("idx_episodes_session_occur")),
)

MEMORY_FORMATION = Change(
    "memories that form themselves (docs/memory-formation.md)",
    (
        AddColumn("sessions", "user_id"),
        AddColumn("sessions", "agent_id"),
        AddColumn("projects", "memory_formation"),
        AddColumn("episodes", "memory_state"),
        AddColumn("episodes", "memory_error"),
        CreateIndex("idx_episodes_memory_pending"),
        AddColumn("memories", "source"),
        AddColumn("memories", "source_episode_id"),
        AddColumn("memory_history", "episode_id"),
        AddColumn("memory_history", "reason"),
        CreateTable("memory_candidates"),
    ),
)

SELECTION_ANSWERS = Change(
    "SelectMemories is safe to retry: a call with a request_id keeps its answer",
    (CreateTable("memory_selections"),),
)

EPISODE_ACTS_FOR = Change(
    "an episode records the user its writer acted for (docs/security.md); episodes"
    " already stored were accepted under the rules of their day and act for their"
    " session's user",
    (
        AddColumn("episodes", "acts_for"),
        Sql(
            "UPDATE episodes SET acts_for = (SELECT s.user_id FROM sessions s"
            " WHERE s.id = episodes.session_id) WHERE true"
        ),
    ),
)

USAGE_OWNER_INDEX = Change(
    "ListMemoryUsage pages one user's whole usage in a project by id",
    (CreateIndex("idx_memory_usage_owner"),),
)

# Tenants take turns at the claim (docs/architecture.md): a job carries the
# tenant of its target, written by the statement that queues it. The jobs an
# upgrade finds take their targets' tenants here, read as store/jobs.TENANT_OF
# reads them for a new job; otherwise that backlog (an import under way) would
# stand as one tenant ('') beside every new job and take every other turn. A
# job whose target is gone keeps ''.
_JOB_TENANT_OF = (
    (
        "('index:episodes', 'extract:episode', 'form:memories')",
        "SELECT s.tenant FROM episodes e JOIN sessions s ON s.id = e.session_id"
        " WHERE e.id = jobs.target_id",
    ),
    ("('summarize:session')", "SELECT tenant FROM sessions WHERE id = jobs.target_id"),
    (
        "('index:summaries')",
        "SELECT COALESCE(s.tenant, p.tenant) FROM summaries m"
        " LEFT JOIN sessions s ON s.id = m.session_id"
        " LEFT JOIN projects p ON p.id = m.project_id WHERE m.id = jobs.target_id",
    ),
    (
        "('index:entities', 'resolve:entity')",
        "SELECT tenant FROM entities WHERE id = jobs.target_id",
    ),
    (
        "('index:memories', 'expire:memory', 'purge:memory_history')",
        "SELECT tenant FROM memories WHERE id = jobs.target_id",
    ),
    ("('retain:project')", "SELECT tenant FROM projects WHERE id = jobs.target_id"),
)

JOB_TENANTS = Change(
    "tenants take turns at the claim: a job carries its target's tenant, and the"
    " claim walks each priority's tenants in idx_jobs_lanes",
    (
        AddColumn("jobs", "tenant"),
        *(
            Sql(f"UPDATE jobs SET tenant = COALESCE(({lookup}), '') WHERE kind IN {kinds}")
            for kinds, lookup in _JOB_TENANT_OF
        ),
        CreateIndex("idx_jobs_lanes"),
        # Served by no claim now (schema.RETIRED_INDEXES).
        DropIndex("idx_jobs_claim"),
        DropIndex("idx_jobs_priority"),
    ),
)


def suffix_repeated_names(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``rows``: every project's (id, tenant, name), oldest first. The oldest
    project of a name keeps it; each later one of its tenant takes the first
    of "name (2)", "name (3)", ... that no project of the tenant holds (nor
    held before this rename, so no later project's own name is taken from
    it). Answers (new name, id) for each project renamed."""
    held = {(tenant, name) for _, tenant, name in rows}
    kept: set[tuple[str, str]] = set()
    renamed: list[tuple[Any, ...]] = []
    for project_id, tenant, name in rows:
        if (tenant, name) in kept:
            n = 2
            while (tenant, f"{name} ({n})") in held:
                n += 1
            new = f"{name} ({n})"
            held.add((tenant, new))
            log.warning(
                "project %d of tenant %r is renamed %r: an older project of its tenant is"
                " called %r, and a project's name is now unique in its tenant",
                project_id,
                tenant,
                new,
                name,
            )
            renamed.append((new, project_id))
            name = new
        kept.add((tenant, name))
    return renamed


UNIQUE_PROJECT_NAMES = Change(
    "a project's name is unique in its tenant, so a name finds one project"
    " (usage --project, the framework adapters, MCP): a project whose name an older"
    " one of its tenant holds is renamed 'name (2)', 'name (3)', ... first",
    (
        Rewrite(
            "SELECT id, tenant, name FROM projects ORDER BY id",
            suffix_repeated_names,
            "UPDATE projects SET name = ? WHERE id = ?",
        ),
        CreateIndex("idx_projects_tenant_name"),
    ),
)

# Usage tells no user about another (docs/usage.md): each LLM call names the
# user its work was for. Calls an upgrade finds keep '' (for no one user):
# only keys that may act for every user read them, as they read them before.
LLM_CALL_USERS = Change(
    "the LLM's account names the user each call's work was for: a key that may act"
    " only for some users reads only their work's usage, and a tenant may limit each"
    " user's daily share",
    (AddColumn("llm_calls", "user_id"), CreateIndex("idx_llm_calls_user")),
)


# A memory's vector point carries its tenant (core/documents.memory_payload):
# a search's nearest points are then all its own tenant's, where another
# tenant's same-named user could take their places. Points written before
# lack it, and a tenant's search would not find them: each memory is indexed
# again, in the background, behind live work.
MEMORY_POINT_TENANTS = Change(
    "memory points carry their tenant; every memory is indexed again in the background",
    (Requeue(jobs.INDEX_MEMORY, "memories"),),
)

# A session's episode count, kept by triggers on SQLite: keyword search
# weighs words by the scope's size, and counting a large project's episodes on
# every search cost more than the search (3.3 ms for 100,000).
EPISODE_COUNT_TRIGGERS = (
    "CREATE TRIGGER episodes_count_insert AFTER INSERT ON episodes BEGIN"
    " UPDATE sessions SET episode_count = episode_count + 1 WHERE id = new.session_id; END",
    "CREATE TRIGGER episodes_count_delete AFTER DELETE ON episodes BEGIN"
    " UPDATE sessions SET episode_count = episode_count - 1 WHERE id = old.session_id; END",
    "CREATE TRIGGER episodes_count_move AFTER UPDATE OF session_id ON episodes"
    " WHEN new.session_id IS NOT old.session_id BEGIN"
    " UPDATE sessions SET episode_count = episode_count - 1 WHERE id = old.session_id;"
    " UPDATE sessions SET episode_count = episode_count + 1 WHERE id = new.session_id; END",
)

SESSION_EPISODE_COUNTS = Change(
    "a session's episode count, kept by triggers, which SQLite's keyword search reads",
    (
        AddColumn("sessions", "episode_count"),
        Sql(
            "UPDATE sessions SET episode_count ="
            " (SELECT count(*) FROM episodes e WHERE e.session_id = sessions.id)",
            only="sqlite",
        ),
        *(Sql(trigger, only="sqlite") for trigger in EPISODE_COUNT_TRIGGERS),
    ),
)

# The changes since: both backends apply these, in this order, after their
# history.
CHANGES: tuple[Change, ...] = (
    Change(
        "one schema: the stores' hand-kept schemas had drifted apart; each now holds"
        " what the declaration says (the claim index in run_after order, and the"
        " index that an episode's deletion uses to clear its aliases)",
        (
            DropIndex("idx_jobs_claim"),
            CreateIndex("idx_jobs_claim"),
            CreateIndex("idx_entity_aliases_episode"),
        ),
    ),
    Change(
        "the LLM's account: a row per request to the model server (docs/usage.md)",
        (CreateTable("llm_calls"),),
    ),
    JOB_TENANTS,
    UNIQUE_PROJECT_NAMES,
    LLM_CALL_USERS,
    Change(
        "forgetting (docs/privacy.md): erasures and their receipts, the request ids of"
        " erased writes, and a project's deletion as durable work",
        (
            CreateTable("erasures"),
            CreateTable("erased_requests"),
            AddColumn("projects", "deleting"),
            CreateIndex("idx_memories_source_episode"),
            CreateIndex("idx_relationships_asserted"),
            CreateIndex("idx_relationships_ended"),
            CreateIndex("idx_memory_history_episode"),
            CreateIndex("idx_entity_distinctions_episode"),
        ),
    ),
    MEMORY_POINT_TENANTS,
    SESSION_EPISODE_COUNTS,
)


def render(
    op: Operation,
    backend: str,
    add_column: Callable[[Table, Column], str],
    create_table: Callable[[Table], list[str]],
    create_index: Callable[[Table, Index], str],
) -> list[str]:
    """The statements that carry out ``op`` on ``backend``, in the DDL its
    functions write (``create_table`` and ``create_index`` write guarded
    statements: an older build may hold what a change adds)."""
    if isinstance(op, AddColumn):
        table = schema.table(op.table)
        column = table.column(op.column)
        if column.only not in (None, backend):
            return []
        return [add_column(table, column)]
    if isinstance(op, CreateTable):
        return create_table(schema.table(op.table))
    if isinstance(op, CreateIndex):
        return [create_index(*schema.index(op.name))]
    if isinstance(op, DropIndex):
        return [f"DROP INDEX IF EXISTS {op.name}"]
    if isinstance(op, Sql):
        return [op.statement] if op.only in (None, backend) else []
    if isinstance(op, Rewrite):
        raise TypeError("a Rewrite is run by the migrations, not rendered as DDL")
    if isinstance(op, Requeue):
        now = _NOW[backend]
        return [
            "INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at, priority,"
            f" tenant) SELECT '{op.kind}', id, {now}, {now}, {now}, {jobs.BULK}, tenant"
            f" FROM {op.table} WHERE true ON CONFLICT DO NOTHING"
        ]
    raise TypeError(f"unknown schema operation {op!r}")
