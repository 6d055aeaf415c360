"""Acting as a caller in the unit tier: ``acting_as`` binds a key's caller
(its tenant, the users it may act for, whether it sees every tenant) for the
length of a ``with`` block, as the auth interceptor binds it for a call, and
unbinds it after. Not a test module: the tenancy and scope rules of many
domain use cases are tested on the fakes as one caller or another, and this
is the one way they all bind it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from nexus_grpc.core import tenancy


@contextmanager
def acting_as(
    who: tenancy.Caller | str, users: frozenset[str] | None = None, all_tenants: bool = False
) -> Iterator[None]:
    """Binds ``who`` (a Caller, or a tenant's name with ``users`` and
    ``all_tenants``) as the caller until the block ends."""
    caller = who if isinstance(who, tenancy.Caller) else tenancy.Caller(who, users, all_tenants)
    token = tenancy.bind(caller)
    try:
        yield
    finally:
        tenancy.reset(token)
