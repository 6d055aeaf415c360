"""Who may see which memory (domain/memory_visibility.py): the SQL fragment every
query path uses selects exactly what the rule in Python says, over every
combination of owner, tier, session and agent, and a tenant, an expiry or an
empty scope narrows it as documented."""

from __future__ import annotations

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.domain.memory_visibility import MemoryScope, check_scope, visible
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.store.memory_visibility_sql import sql_where
from tests.memory_visibility_grid import COLUMNS, ROWS
from tests.memory_visibility_grid import SCOPES as ASKED

NOW = 1_000_000.0

SCOPES = [*ASKED, MemoryScope()]


@pytest.fixture
def stored(conn):
    """ROWS in the memories table, each under tenant "t1" and again under "t2"."""
    for tenant in ("t1", "t2"):
        conn.executemany(
            "INSERT INTO memories (kind, tier, project_id, user_id, session_id, agent_id,"
            " title, content, tenant, created_at, updated_at)"
            " VALUES (:kind, :tier, :project_id, :user_id, :session_id, :agent_id,"
            " 't', 'c', :tenant, 0, 0)",
            [{**r, "tenant": tenant} for r in ROWS],
        )
    return conn


def seen(conn, scope: MemoryScope) -> list[tuple]:
    where, params = sql_where(scope, now=NOW)
    sql = f"SELECT {', '.join(COLUMNS)}, tenant FROM memories m WHERE {where}"
    return sorted(tuple(r) for r in conn.execute(sql, params))


@pytest.mark.parametrize("scope", SCOPES, ids=repr)
def test_the_sql_selects_exactly_what_the_rule_allows(stored, scope):
    expected = sorted(
        (*(r[c] for c in COLUMNS), tenant)
        for r in ROWS
        if visible(scope, **r)
        for tenant in ("t1", "t2")
    )
    assert seen(stored, scope) == expected
    if scope.project_id or scope.user_id:
        assert expected  # the table holds something each real scope sees


def test_a_caller_sees_only_its_tenants_memories():
    scope = MemoryScope(project_id=1, user_id="ann", session_id=1)
    token = tenancy.bind(tenancy.Caller(tenant="t2"))
    try:
        where, params = sql_where(scope, now=NOW)
    finally:
        tenancy.reset(token)
    assert "tenant = ?" in where and "t2" in params
    admin = tenancy.bind(tenancy.Caller(tenant="t1", all_tenants=True))
    try:
        where, _ = sql_where(scope, now=NOW)
    finally:
        tenancy.reset(admin)
    assert "tenant" not in where


def test_tenant_and_expiry_narrow_the_rows(stored):
    scope = MemoryScope(project_id=1)
    both = seen(stored, scope)
    stored.execute("UPDATE memories SET expire_at = ? WHERE tenant = 't1'", (NOW,))
    left = seen(stored, scope)
    assert left and {r[-1] for r in left} == {"t2"}  # expired at NOW: gone from NOW on
    assert len(left) * 2 == len(both)
    token = tenancy.bind(tenancy.Caller(tenant="t1"))
    try:
        assert seen(stored, scope) == []
    finally:
        tenancy.reset(token)


def test_a_scope_must_name_a_project_or_a_user():
    assert sql_where(MemoryScope()) == ("1 = 0", ())
    with pytest.raises(InvalidArgument, match="needs a project_id or a user_id") as err:
        check_scope(MemoryScope(session_id=3))
    assert {d.field for d in err.value.details} == {"scope.project_id", "scope.user_id"}
    with pytest.raises(InvalidArgument) as err:
        check_scope(MemoryScope(project_id=1, user_id=" ann"))
    assert err.value.field == "scope.user_id"
    assert check_scope(MemoryScope(user_id="ann")) == MemoryScope(user_id="ann")
