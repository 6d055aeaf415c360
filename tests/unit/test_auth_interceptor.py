"""What the auth interceptor (rpc/auth.py) decides of a call, called directly:
the handler it gives back for a method and its metadata, and the prologue's
check of the user ids a request names. A context that records the abort
stands in for grpc's (tests/unit/grpc_contexts.py); no server, no channel.

The wiring (every RPC of the three services behind this check, the status
code and message over the wire, health and reflection open) stays in
tests/e2e/api/test_auth.py; the key file and the bearer key are in
tests/unit/test_auth_keys.py.
"""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from nexus_grpc.core import tenancy
from nexus_grpc.errors import ErrorInfo
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.rpc.auth import (
    ADMIN_METHODS,
    DOMAIN_CHECKS_USER,
    AuthInterceptor,
    KeyRing,
    Principal,
    current_principal,
)
from tests.unit.grpc_contexts import Aborted, AbortingContext

ALICE_KEY = "alice-orchestrator-key-0001"
ADMIN_KEY = "ops-admin-key-000000000001"
ANY_KEY = "any-user-service-key-00001"
RING = KeyRing.from_dict(
    {
        "keys": [
            {"key": ALICE_KEY, "name": "orchestrator", "users": ["alice", "bob"]},
            {"key": ADMIN_KEY, "name": "ops", "users": [], "admin": True},
            {"key": ANY_KEY, "name": "gateway", "users": "*", "tenant": "ops"},
        ]
    }
)
GET_MEMORY = "/nexus.memory.v1.MemoryService/GetMemory"
RECONCILE = "/nexus.memory.v1.MemoryService/ReconcileIndex"


class Details:
    def __init__(self, method: str, metadata: tuple = ()) -> None:
        self.method = method
        self.invocation_metadata = metadata


async def _served(request, context):
    return "served"


def unary() -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(_served)


def bearer(key: str) -> tuple:
    return (("authorization", f"Bearer {key}"),)


async def refusal(handler: grpc.RpcMethodHandler, request=None) -> AbortingContext:
    context = AbortingContext()
    with pytest.raises(Aborted):
        await handler.unary_unary(request, context)
    return context


# --- which calls get through -------------------------------------------------------------


@pytest.mark.parametrize("method", ["/grpc.health.v1.Health/Check",
                                    "/grpc.reflection.v1alpha.ServerReflection/Info"])  # fmt: skip
def test_health_and_reflection_are_passed_through_untouched_without_a_key(method):
    handler = unary()
    assert AuthInterceptor(RING).intercept(handler, Details(method)) is handler


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", ALICE_KEY),),  # no scheme
        (("authorization", f"Basic {ALICE_KEY}"),),
        (("authorization", "Bearer "),),
    ],
)
async def test_a_call_without_a_key_is_unauthenticated_as_missing(metadata):
    handler = AuthInterceptor(RING).intercept(unary(), Details(GET_MEMORY, metadata))
    context = await refusal(handler)
    assert (context.code, context.message) == (grpc.StatusCode.UNAUTHENTICATED, "missing API key")
    assert context.details() == (ErrorInfo("API_KEY_MISSING"),)


async def test_an_unknown_key_is_unauthenticated_as_invalid():
    handler = AuthInterceptor(RING).intercept(
        unary(), Details(GET_MEMORY, bearer("not-a-key-we-issued-000000"))
    )
    context = await refusal(handler)
    assert (context.code, context.message) == (grpc.StatusCode.UNAUTHENTICATED, "unknown API key")
    assert context.details() == (ErrorInfo("API_KEY_INVALID"),)


def test_the_admin_and_domain_checked_methods_are_methods_of_the_service():
    service = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"]
    paths = {f"/{service.full_name}/{m.name}": m.name for m in service.methods}
    assert {paths[p] for p in ADMIN_METHODS} == {"ReconcileIndex", "RestoreProject", "ListErasures"}
    assert {paths[p] for p in DOMAIN_CHECKS_USER} == {"ForgetUser", "ExportUser"}


@pytest.mark.parametrize(("key", "name"), [(ALICE_KEY, "orchestrator"), (ANY_KEY, "gateway")])
@pytest.mark.parametrize("method", sorted(ADMIN_METHODS))
async def test_every_admin_method_refuses_a_key_that_is_not_admin(method, key, name):
    handler = AuthInterceptor(RING).intercept(unary(), Details(method, bearer(key)))
    context = await refusal(handler)
    rpc = method.rsplit("/", 1)[-1]
    assert context.code == grpc.StatusCode.PERMISSION_DENIED
    assert context.message == f"{rpc} needs an admin key; {name!r} is not one"
    assert context.details() == (ErrorInfo("ADMIN_KEY_REQUIRED", {"method": rpc, "api_key": name}),)


async def test_an_admin_key_calls_an_admin_method():
    handler = AuthInterceptor(RING).intercept(unary(), Details(RECONCILE, bearer(ADMIN_KEY)))
    assert (
        await handler.unary_unary(memory_pb2.ReconcileIndexRequest(), AbortingContext()) == "served"
    )


async def test_a_bidi_stream_is_refused_rather_than_let_past_the_user_check():
    async def bidi(requests, context):
        yield "never"

    handler = AuthInterceptor(RING).intercept(
        grpc.stream_stream_rpc_method_handler(bidi), Details(GET_MEMORY, bearer(ALICE_KEY))
    )
    context = AbortingContext()

    async def nothing():
        return
        yield

    with pytest.raises(Aborted):
        async for _ in handler.stream_stream(nothing(), context):
            pass
    assert context.code == grpc.StatusCode.PERMISSION_DENIED
    assert context.details() == (ErrorInfo("STREAMING_REQUESTS_UNSUPPORTED"),)


# --- the user a request acts for ---------------------------------------------------------


def get_memory(user: str) -> memory_pb2.GetMemoryRequest:
    return memory_pb2.GetMemoryRequest(id=1, user_id=user)


async def test_a_user_the_key_does_not_hold_is_permission_denied_naming_both():
    handler = AuthInterceptor(RING).intercept(unary(), Details(GET_MEMORY, bearer(ALICE_KEY)))
    context = await refusal(handler, get_memory("mallory"))
    assert context.code == grpc.StatusCode.PERMISSION_DENIED
    assert context.message == "API key 'orchestrator' may not act for user 'mallory'"
    assert context.details() == (
        ErrorInfo("USER_NOT_PERMITTED", {"api_key": "orchestrator", "user_id": "mallory"}),
    )


@pytest.mark.parametrize(
    ("key", "user"), [(ALICE_KEY, "alice"), (ALICE_KEY, "bob"), (ANY_KEY, "mallory"),
                      (ADMIN_KEY, "carol")]
)  # fmt: skip
async def test_held_users_wildcard_keys_and_admins_pass_the_check(key, user):
    handler = AuthInterceptor(RING).intercept(unary(), Details(GET_MEMORY, bearer(key)))
    assert await handler.unary_unary(get_memory(user), AbortingContext()) == "served"


@pytest.mark.parametrize("method", sorted(DOMAIN_CHECKS_USER))
async def test_forget_and_export_leave_the_user_to_the_domain(method):
    """The domain answers as for a user who holds nothing (NOT_FOUND), so the
    interceptor lets the call through with the caller bound."""
    seen = []

    async def servicer(request, context):
        seen.append(tenancy.caller())
        return "served"

    request = memory_pb2.ForgetUserRequest(user_id="mallory")
    handler = AuthInterceptor(RING).intercept(
        grpc.unary_unary_rpc_method_handler(servicer), Details(method, bearer(ALICE_KEY))
    )
    assert await handler.unary_unary(request, AbortingContext()) == "served"
    assert seen == [tenancy.Caller("orchestrator", frozenset({"alice", "bob"}))]


async def test_the_servicer_sees_the_principal_and_the_tenant_of_the_key():
    seen = []

    async def servicer(request, context):
        seen.append((current_principal(), tenancy.caller()))
        return "served"

    for key in (ALICE_KEY, ADMIN_KEY):
        handler = AuthInterceptor(RING).intercept(
            grpc.unary_unary_rpc_method_handler(servicer), Details(GET_MEMORY, bearer(key))
        )
        await handler.unary_unary(memory_pb2.GetServiceStatusRequest(), AbortingContext())
    assert [p.name for p, _ in seen] == ["orchestrator", "ops"]
    assert seen[0][1] == tenancy.Caller("orchestrator", frozenset({"alice", "bob"}))
    assert seen[1][1] == tenancy.Caller("ops", None, all_tenants=True)


def test_a_principal_acts_for_its_users_all_users_or_as_admin():
    assert Principal("k", frozenset({"ann"})).may_act_for("ann")
    assert not Principal("k", frozenset({"ann"})).may_act_for("bob")
    assert Principal("k", None).may_act_for("bob")
    assert Principal("k", frozenset(), admin=True).may_act_for("bob")
