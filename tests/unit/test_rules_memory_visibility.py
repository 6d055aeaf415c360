"""Who may see which memory, as the vector filter says it
(domain/memory_visibility.py): evaluated on each memory's payload (made by
core/documents.py, as every point's is) under the filter AST's documented
meaning (core/vectors.py), it passes exactly the memories the rule in Python
(``visible``) lets a scope see, over every owner, tier, session and agent;
it adds the caller's tenant; an empty scope is refused by ``check_scope``
and sees nothing.

The same rule as SQL is tests/integration/store/test_memory_scope_sql.py;
the filter run by a real index is the whole-server tier's
(tests/e2e/service/test_memory_isolation_property.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from nexus_grpc.core.documents import memory_payload
from nexus_grpc.core.vectors import Cond, MatchAny, Range
from nexus_grpc.domain.memory_visibility import MemoryScope, check_scope, vector_filter, visible
from nexus_grpc.errors import InvalidArgument
from tests.memory_visibility_grid import ROWS, SCOPES
from tests.unit.callers import acting_as


def holds(cond: Cond, payload: Mapping[str, Any]) -> bool:
    """A condition on one payload, as core/vectors.py defines the AST."""
    if isinstance(cond, MatchAny):
        return payload.get(cond.key) in cond.values
    if isinstance(cond, Range):
        value = payload[cond.key]
        return (cond.gte is None or value >= cond.gte) and (cond.lte is None or value <= cond.lte)
    return (
        all(holds(c, payload) for c in cond.must)
        and (not cond.should or any(holds(c, payload) for c in cond.should))
        and not any(holds(c, payload) for c in cond.must_not)
    )


def _payload(row: Mapping[str, Any], tenant: str = "t1") -> dict[str, Any]:
    return memory_payload(tenant=tenant, **row)


@pytest.mark.parametrize("scope", SCOPES, ids=repr)
def test_the_vector_filter_passes_exactly_what_the_rule_allows(scope):
    flt = vector_filter(scope)
    assert flt is not None
    passed = [r for r in ROWS if holds(flt, _payload(r))]
    assert passed == [r for r in ROWS if visible(scope, **r)]
    assert passed  # each scope sees something, so the comparison proves something


def test_the_filter_names_the_callers_tenant_and_none_for_one_who_sees_all():
    scope = MemoryScope(project_id=1, user_id="ann", session_id=1)
    mine = [r for r in ROWS if visible(scope, **r)]
    with acting_as("t1"):
        flt = vector_filter(scope)
    assert flt is not None
    assert [r for r in ROWS if holds(flt, _payload(r, "t1"))] == mine
    assert [r for r in ROWS if holds(flt, _payload(r, "t2"))] == []
    with acting_as("t1", all_tenants=True):
        every = vector_filter(scope)
    assert every is not None
    assert [r for r in ROWS if holds(every, _payload(r, "t2"))] == mine


def test_an_empty_scope_sees_nothing_and_is_refused():
    assert vector_filter(MemoryScope(session_id=1, agent_id="agent-a")) is None
    with pytest.raises(InvalidArgument, match="an empty scope sees nothing") as refused:
        check_scope(MemoryScope(session_id=1))
    assert [f.field for f in refused.value.details if hasattr(f, "field")] == [
        "scope.project_id",
        "scope.user_id",
    ]


@pytest.mark.parametrize(
    ("scope", "field"),
    [
        (MemoryScope(project_id=-1), "scope.project_id"),
        (MemoryScope(project_id=1, session_id=-2), "scope.session_id"),
        (MemoryScope(user_id=" ann"), "scope.user_id"),
        (MemoryScope(project_id=1, agent_id="a\x00"), "scope.agent_id"),
    ],
)
def test_a_bad_scope_field_is_refused_naming_it(scope, field):
    with pytest.raises(InvalidArgument) as refused:
        check_scope(scope)
    assert refused.value.field == field


def test_a_scope_that_names_a_project_or_a_user_is_kept_as_given():
    for scope in SCOPES:
        assert check_scope(scope) is scope
