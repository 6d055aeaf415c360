"""Whose data a call sees and writes (core/tenancy.py), for the caller the
auth interceptor binds: a key sees its own tenant, an admin every tenant but
looks up and imports in its own, and only an admin names another tenant.

The probes over the wire stay in tests/e2e/api/test_admin_tenancy.py (an
external id looked up in the key's own tenant, an admin's import and
restore), tests/e2e/api/test_get_usage.py and tests/e2e/api/test_tenants.py.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.errors import PermissionDenied

USER_KEY = tenancy.Caller("beta", frozenset({"ann"}))
WILDCARD = tenancy.Caller("beta", None)
ADMIN = tenancy.Caller("beta", None, all_tenants=True)


@pytest.fixture
def as_caller():
    tokens = []

    def bind(caller: tenancy.Caller | None) -> None:
        tokens.append(tenancy.bind(caller))

    yield bind
    for token in reversed(tokens):
        tenancy.reset(token)


@pytest.mark.parametrize(
    ("caller", "visible", "own"),
    [(USER_KEY, "beta", "beta"), (WILDCARD, "beta", "beta"), (ADMIN, None, "beta"),
     (None, None, "default")],
)  # fmt: skip
def test_a_key_sees_its_tenant_an_admin_every_one_but_acts_in_its_own(
    as_caller, caller, visible, own
):
    as_caller(caller)
    assert tenancy.visible() == visible
    # A new resource, an external id's lookup, an import: the caller's own tenant.
    assert tenancy.creator("default") == tenancy.own("default") == own


def test_a_key_naming_its_own_tenant_or_none_acts_in_its_own(as_caller):
    as_caller(USER_KEY)
    assert tenancy.named("", "default") == "beta"
    assert tenancy.named("beta", "default") == "beta"


def test_only_an_admin_key_may_name_another_tenant(as_caller):
    as_caller(USER_KEY)
    with pytest.raises(PermissionDenied, match="only an admin key may name another tenant"):
        tenancy.named("alpha", "default")
    as_caller(WILDCARD)  # every user of its tenant is not every tenant
    with pytest.raises(PermissionDenied):
        tenancy.named("alpha", "default")
    as_caller(ADMIN)
    assert tenancy.named("alpha", "default") == "alpha"
    as_caller(None)  # auth off: one operator, every tenant
    assert tenancy.named("alpha", "default") == "alpha"


@pytest.mark.parametrize(
    ("caller", "ann", "bob", "all_users", "acting"),
    [(USER_KEY, True, False, False, frozenset({"ann"})), (WILDCARD, True, True, True, None),
     (ADMIN, True, True, True, None), (None, True, True, True, None)],
)  # fmt: skip
def test_whom_a_caller_acts_for(as_caller, caller, ann, bob, all_users, acting):
    as_caller(caller)
    assert (tenancy.may_act_for("ann"), tenancy.may_act_for("bob")) == (ann, bob)
    assert tenancy.may_act_for_all() == all_users
    assert tenancy.acting_users() == acting
