"""Who a call acts as (core/tenancy.py), with a caller bound as the auth
interceptor binds one: the tenant a call may see, the tenant it creates in,
a tenant named by a call (only a key that sees every tenant may name
another), and the users a key may act for.

That the interceptor binds each key's caller, and what another tenant's
rows answer over the wire, is the whole-server tier's (tests/e2e/api/).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.core.tenancy import Caller
from nexus_grpc.errors import PermissionDenied

ADMIN = Caller("ops", None, all_tenants=True)
STAR = Caller("acme")  # a "*" key: every user of its tenant
ALICE = Caller("acme", frozenset({"alice", "ally"}))


@contextlib.contextmanager
def acting_as(caller: Caller | None) -> Iterator[None]:
    token = tenancy.bind(caller)
    try:
        yield
    finally:
        tenancy.reset(token)


def test_no_caller_sees_every_tenant_and_creates_in_the_default():
    with acting_as(None):
        assert tenancy.caller() is None
        assert tenancy.visible() is None
        assert tenancy.creator("default") == tenancy.own("default") == "default"
        assert tenancy.may_act_for("anyone") and tenancy.may_act_for_all()
        assert tenancy.acting_users() is None


def test_a_tenants_key_sees_and_creates_in_its_own_tenant():
    for caller in (STAR, ALICE):
        with acting_as(caller):
            assert tenancy.visible() == "acme"
            assert tenancy.creator("default") == tenancy.own("default") == "acme"


def test_an_admin_key_sees_every_tenant_but_creates_in_its_own():
    with acting_as(ADMIN):
        assert tenancy.visible() is None
        assert tenancy.creator("default") == "ops"


def test_only_a_key_that_sees_every_tenant_may_name_another():
    with acting_as(STAR):
        assert tenancy.named("", "default") == "acme"
        assert tenancy.named("acme", "default") == "acme"
        with pytest.raises(PermissionDenied, match="tenant 'rival': only an admin key"):
            tenancy.named("rival", "default")
    with acting_as(ADMIN):
        assert tenancy.named("rival", "default") == "rival"
        assert tenancy.named("", "default") == "ops"
    with acting_as(None):  # auth off
        assert tenancy.named("rival", "default") == "rival"
        assert tenancy.named("", "default") == "default"


def test_a_user_key_acts_only_for_its_users():
    with acting_as(ALICE):
        assert tenancy.may_act_for("alice") and tenancy.may_act_for("ally")
        assert not tenancy.may_act_for("bob")
        assert not tenancy.may_act_for_all()
        assert tenancy.acting_users() == frozenset({"alice", "ally"})


def test_a_star_or_admin_key_acts_for_every_user():
    for caller in (STAR, ADMIN, Caller("acme", frozenset(), all_tenants=True)):
        with acting_as(caller):
            assert tenancy.may_act_for("bob") and tenancy.may_act_for_all()
            assert tenancy.acting_users() is None
