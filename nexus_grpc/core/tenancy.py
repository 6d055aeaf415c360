"""Who owns what: the tenant of the caller, resolved once per RPC.

Every project, and every session outside a project, belongs to the tenant
of the key that created it; everything under them (episodes, summaries,
entities, relationships, extraction events, memories, usage) belongs to the
same tenant.  A caller sees and touches only its own tenant's rows, and a
row of another tenant answers exactly as a missing id does (NOT_FOUND), so
no call can tell another tenant's data from nothing.

The auth interceptor binds the caller here for the length of one call.  No
binding (auth off, background workers, tools) means one tenant that sees
everything: the behaviour before tenants existed.  Admin keys see every
tenant but still create in their own.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from nexus_grpc.errors import PermissionDenied

#: The tenant of data written before tenants existed, and of everything
#: created with auth off, unless the operator names another (--default-tenant).
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Caller:
    tenant: str
    #: The user ids the key may act for; None: every user.
    users: frozenset[str] | None = None
    #: Sees (and touches) every tenant's data.
    all_tenants: bool = False

    def may_act_for(self, user_id: str) -> bool:
        return self.users is None or user_id in self.users


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "nexus_caller", default=None
)


def bind(caller: Caller | None) -> contextvars.Token[Caller | None]:
    return _caller.set(caller)


def reset(token: contextvars.Token[Caller | None]) -> None:
    _caller.reset(token)


def caller() -> Caller | None:
    return _caller.get()


def visible() -> str | None:
    """The one tenant this call may see, or None when it may see every tenant."""
    c = _caller.get()
    if c is None or c.all_tenants:
        return None
    return c.tenant


def creator(default: str) -> str:
    """The tenant a new top-level resource (project, session, memory) belongs to."""
    c = _caller.get()
    return c.tenant if c is not None else default


def own(default: str) -> str:
    """The caller's own tenant, an admin's included (``default`` without a
    caller). Where an admin's implicit acts stay: a lookup by a name that is
    unique only per tenant (a session's external_id), a bulk import."""
    return creator(default)


def named(tenant: str, default: str) -> str:
    """The tenant a call that may name one acts in: ``tenant`` when given,
    else the caller's own. Only a caller who sees every tenant (an admin key,
    or auth off) may name another than its own: PermissionDenied."""
    mine = own(default)
    if not tenant or tenant == mine:
        return mine
    c = _caller.get()
    if c is not None and not c.all_tenants:
        raise PermissionDenied(
            f"tenant {tenant!r}: only an admin key may name another tenant than its own"
        )
    return tenant


def may_act_for(user_id: str) -> bool:
    c = _caller.get()
    return c is None or c.all_tenants or c.may_act_for(user_id)


def may_act_for_all() -> bool:
    """The caller may act for every user: no caller, an admin or a ``*`` key."""
    c = _caller.get()
    return c is None or c.all_tenants or c.users is None


def acting_users() -> frozenset[str] | None:
    """The users the caller may act for, or None when it may act for every
    user (no caller, an admin or a ``*`` key): what a figure that would tell
    one user about another's work is limited to."""
    c = _caller.get()
    if c is None or c.all_tenants or c.users is None:
        return None
    return c.users
