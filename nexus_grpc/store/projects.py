"""Projects table."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from nexus_grpc.core.models import MemoryKind, Project
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.errors import AlreadyExists, NotFound, ResourceInfo
from nexus_grpc.store.dialect import INTEGRITY_ERRORS
from nexus_grpc.store.savepoints import savepoint
from nexus_grpc.store.sql import OnConnection, now

COLUMNS = (
    "name",
    "description",
    "colour",
    "icon",
    "notes",
    "system_prompt",
    "retention",
    "single_valued_labels",
    "memory_formation",
)


def _labels_column(labels: Any) -> str | None:
    return None if not labels else json.dumps(list(labels))


def _labels(value: str | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(json.loads(value))


def _row(row: sqlite3.Row) -> Project:
    return Project(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        colour=row["colour"],
        icon=row["icon"],
        notes=row["notes"],
        system_prompt=row["system_prompt"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        tenant=row["tenant"],
        retention=row["retention"],
        single_valued_labels=_labels(row["single_valued_labels"]),
        memory_formation=row["memory_formation"],
    )


def _tenant_clause(tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """`` AND tenant = ?`` for one tenant (nothing for a caller who sees all),
    and the project is not being deleted: from DeleteProject's commit on it
    is gone for every read."""
    live = " AND deleting IS NULL"
    return (live, ()) if tenant is None else (f" AND tenant = ?{live}", (tenant,))


#: What a create or rename refused for its name may do instead.
USE_OR_RENAME = (
    "a project's name is unique in its tenant, so use that project or choose another name"
)


def name_taken(name: str, held: int | None, what_to_do: str = USE_OR_RENAME) -> AlreadyExists:
    """ALREADY_EXISTS for ``name``, naming the project ``held`` that has it
    (its id, in the message and a ResourceInfo). The fakes raise it too."""
    where = f": project {held}" if held is not None else ""
    message = f"a project named {name!r} already exists in this tenant{where}; {what_to_do}"
    details = () if held is None else (ResourceInfo("project", str(held), description=message),)
    return AlreadyExists(message, details=details)


class ProjectRows(OnConnection):
    """The part of ``ProjectRepository`` whose rows this module holds, on one
    connection (``SqlProjects`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def named(self, name: str, tenant: str) -> int | None:
        """The id of ``tenant``'s project called ``name`` (names are unique in a
        tenant: idx_projects_tenant_name); None when it has none."""
        row = self.conn.execute(
            "SELECT id FROM projects WHERE tenant = ? AND name = ?", (tenant, name)
        ).fetchone()
        return None if row is None else int(row[0])

    def name_taken(self, name: str, tenant: str, what_to_do: str = USE_OR_RENAME) -> AlreadyExists:
        """ALREADY_EXISTS for a create or rename to ``name``, naming the project
        of ``tenant`` that holds it (its id, in the message and a ResourceInfo)."""
        return name_taken(name, self.named(name, tenant), what_to_do)

    def insert(self, values: Mapping[str, Any], tenant: str = DEFAULT_TENANT) -> Project:
        """A new project; ALREADY_EXISTS when ``tenant`` has one of its name (a
        create that commits first, on another connection, included: the unique
        index decides, and the loser reads the winner's id)."""
        ts = now()
        row = self.conn.execute(
            "INSERT INTO projects (name, description, colour, icon, notes, system_prompt,"
            " retention, single_valued_labels, memory_formation, isolated, created_at, updated_at,"
            " tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)"
            " ON CONFLICT (tenant, name) DO NOTHING RETURNING id",
            (
                *(values.get(c, "") for c in COLUMNS[:6]),
                values.get("retention"),
                _labels_column(values.get("single_valued_labels")),
                values.get("memory_formation"),
                ts,
                ts,
                tenant,
            ),
        ).fetchone()
        if row is None:
            raise self.name_taken(values.get("name", ""), tenant)
        return self.get(int(row[0]))

    def get(self, project_id: int, tenant: str | None = None) -> Project:
        """The project; NOT_FOUND when it does not exist or belongs to another tenant
        (``tenant`` None: any tenant), with one message for both."""
        clause, params = _tenant_clause(tenant)
        row = self.conn.execute(
            f"SELECT * FROM projects WHERE id = ?{clause}", (project_id, *params)
        ).fetchone()
        if row is None:
            raise NotFound(
                f"project {project_id} does not exist",
                resource_type="project",
                resource_name=str(project_id),
            )
        return _row(row)

    def exists(self, project_id: int, tenant: str | None = None) -> bool:
        clause, params = _tenant_clause(tenant)
        row = self.conn.execute(
            f"SELECT 1 FROM projects WHERE id = ?{clause}", (project_id, *params)
        )
        return row.fetchone() is not None

    def tenant_of(self, project_id: int) -> str | None:
        row = self.conn.execute(
            "SELECT tenant FROM projects WHERE id = ? AND deleting IS NULL", (project_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def list_page(
        self, after_id: int | None, limit: int, tenant: str | None = None
    ) -> list[Project]:
        clause, params = _tenant_clause(tenant)
        rows = self.conn.execute(
            f"SELECT * FROM projects WHERE id > ?{clause} ORDER BY id LIMIT ?",
            (after_id or 0, *params, limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def user_memory_owners(self, project_id: int) -> dict[str, int]:
        """USER memories stored in the project, counted by user."""
        rows = self.conn.execute(
            "SELECT user_id, COUNT(*) FROM memories WHERE project_id = ? AND kind = ? GROUP BY"
            " user_id",
            (project_id, int(MemoryKind.USER)),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def update(
        self,
        project_id: int,
        changes: Mapping[str, Any],
        tenant: str | None = None,
    ) -> Project:
        project = self.get(project_id, tenant)
        renamed = "name" in changes and changes["name"] != project.name
        if renamed and self.named(changes["name"], project.tenant) is not None:
            raise self.name_taken(changes["name"], project.tenant)
        if changes:
            # Column names come from COLUMNS (checked by the domain), never from the client.
            assignments = ", ".join(f"{c} = ?" for c in changes if c in COLUMNS)
            values = [
                _labels_column(v) if c == "single_valued_labels" else v
                for c, v in changes.items()
                if c in COLUMNS
            ]
            try:
                # A rename that another connection's commit beat to the name fails
                # alone, and the project holding it is read after.
                with savepoint(self.conn, "project_update"):
                    self.conn.execute(
                        f"UPDATE projects SET {assignments}, updated_at = ? WHERE id = ?",
                        (*values, now(), project_id),
                    )
            except INTEGRITY_ERRORS:
                if not renamed:
                    raise
                raise self.name_taken(changes["name"], project.tenant) from None
        return self.get(project_id)

    def session_users(self, project_id: int) -> dict[str, int]:
        """The users the project's sessions are with, each with their count."""
        rows = self.conn.execute(
            "SELECT user_id, COUNT(*) FROM sessions WHERE project_id = ? AND user_id <> ''"
            " GROUP BY user_id",
            (project_id,),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def single_valued_labels(self, project_id: int) -> tuple[str, ...] | None:
        """The project's own single-valued labels; None: the defaults (or no project)."""
        row = self.conn.execute(
            "SELECT single_valued_labels FROM projects WHERE id = ?", (project_id,)
        ).fetchone()
        return None if row is None else _labels(row[0])

    def memory_formation(self, project_id: int) -> int | None:
        """The project's own formation setting; None: the default (or no project)."""
        row = self.conn.execute(
            "SELECT memory_formation FROM projects WHERE id = ?", (project_id,)
        ).fetchone()
        return None if row is None else row[0]

    def retention_of(self, project_id: int) -> float | None:
        """The project's retention in seconds; None: kept for ever, or no project."""
        row = self.conn.execute(
            "SELECT retention FROM projects WHERE id = ?", (project_id,)
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])
