"""The service interceptor's limits (api/interceptors.py) and the start's
check of them (server.check_limits), called directly: the concurrent-call
caps of the server, of one key and of one tenant, the response size limit,
and the x-request-id a client may set. A context that records what the
interceptor sets and aborts with (tests/unit/grpc_contexts.py's
InterceptedContext) stands in for grpc's; a call is held open
by a servicer waiting on an event, so no server, channel or sleep.

The wiring stays in tests/e2e/api/test_limits.py (the caps over real
streams, on both stores, and a start refused for its limits),
tests/e2e/api/test_small_holes.py (a response over the limit, logged and
counted) and tests/e2e/api/test_error_details.py (the details over the wire).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import grpc
import grpc.aio
import pytest

from nexus_grpc.api.interceptors import REQUEST_ID, KeySlots, ServiceInterceptor
from nexus_grpc.app import StartupError
from nexus_grpc.errors import ErrorInfo, QuotaViolation
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.rpc.auth import AuthInterceptor, KeyRing
from nexus_grpc.rpc.requests import RequestObserver
from nexus_grpc.runtime.config import Settings
from nexus_grpc.server import check_limits
from tests.unit.grpc_contexts import Aborted, InterceptedContext

METHOD = "/nexus.memory.v1.MemoryService/ListProjects"
KEY_A, KEY_B, KEY_C = "limits-key-a-000000000001", "limits-key-b-000000000001", "limits-key-c-0001"
RING = KeyRing.from_dict(
    {
        "keys": [
            {"key": KEY_A, "name": "a", "users": "*", "tenant": "ta"},
            {"key": KEY_B, "name": "b", "users": "*", "tenant": "tb"},
            {"key": KEY_C, "name": "c", "users": "*", "tenant": "ta"},
        ]
    }
)


# --- the start's check ------------------------------------------------------------------


def settings(**limits: int) -> Settings:
    return Settings(listen="127.0.0.1:0", data_dir=Path("unused"), **limits)


def test_a_per_key_limit_not_below_the_servers_stops_the_start():
    with pytest.raises(StartupError) as err:
        check_limits(settings(max_concurrent_rpcs=16, max_concurrent_rpcs_per_key=16), RING)
    assert "--max-concurrent-rpcs-per-key (16) must be below --max-concurrent-rpcs (16)" in str(
        err.value
    )


def test_a_per_tenant_limit_not_below_the_servers_stops_the_start():
    too_high = settings(
        max_concurrent_rpcs=16, max_concurrent_rpcs_per_key=4, max_concurrent_rpcs_per_tenant=16
    )
    with pytest.raises(StartupError) as err:
        check_limits(too_high, RING)
    assert "--max-concurrent-rpcs-per-tenant (16) must be below --max-concurrent-rpcs (16)" in (
        str(err.value)
    )


def test_limits_below_the_servers_or_without_keys_start():
    check_limits(settings(max_concurrent_rpcs=16, max_concurrent_rpcs_per_key=15), RING)
    check_limits(
        settings(
            max_concurrent_rpcs=16, max_concurrent_rpcs_per_key=4, max_concurrent_rpcs_per_tenant=-1
        ),
        RING,
    )
    # Without keys there is no caller to count by: the per-key limit is not used.
    check_limits(settings(max_concurrent_rpcs=16, max_concurrent_rpcs_per_key=16), None)


@pytest.mark.parametrize("name", ["max_concurrent_rpcs_per_tenant", "max_watch_streams_per_tenant"])
def test_a_per_tenant_limit_below_minus_one_stops_the_start(name):
    flag = "--" + name.replace("_", "-")
    with pytest.raises(StartupError, match=f"{flag} must be -1"):
        check_limits(settings(**{name: -2}), None)


def test_key_slots_count_each_owner_against_one_limit():
    slots = KeySlots(2)
    slots.take("a")
    assert not slots.full("a")
    slots.take("a")
    assert slots.full("a") and slots.held("a") == 2 and not slots.full("b")
    slots.give_back("a")
    assert slots.held("a") == 1 and not slots.full("a")
    slots.give_back("a")
    assert slots.held("a") == 0
    unlimited = KeySlots(0)
    for _ in range(100):
        unlimited.take("a")
    assert not unlimited.full("a")


# --- the interceptor on one call ---------------------------------------------------------


class Recorder(RequestObserver):
    def __init__(self) -> None:
        self.codes: list[grpc.StatusCode] = []

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        self.codes.append(code)


class Held:
    """A servicer that answers only once let go: a call it serves holds its
    slots until then."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.go = asyncio.Event()

    async def __call__(self, request, context):
        self.inside.set()
        await self.go.wait()
        return memory_pb2.ListProjectsResponse()


class Details:
    def __init__(self, metadata: tuple = ()) -> None:
        self.method = METHOD
        self.invocation_metadata = metadata


def chain(service: ServiceInterceptor, servicer, metadata: tuple = (), keys: bool = True):
    """The handler the server's chain makes of ``servicer``: auth outside,
    the service interceptor inside (server.interceptor_chain's order)."""
    details = Details(metadata)
    handler = service.intercept(grpc.unary_unary_rpc_method_handler(servicer), details)
    return AuthInterceptor(RING).intercept(handler, details) if keys else handler


def key(k: str) -> tuple:
    return (("authorization", f"Bearer {k}"),)


async def served(request, context):
    return memory_pb2.ListProjectsResponse()


async def refused_with(handler) -> InterceptedContext:
    context = InterceptedContext()
    with pytest.raises(Aborted):
        await handler.unary_unary(memory_pb2.ListProjectsRequest(), context)
    return context


async def open_call(service, metadata=(), keys=True) -> tuple[asyncio.Task, Held]:
    held = Held()
    handler = chain(service, held, metadata, keys)
    task = asyncio.ensure_future(
        handler.unary_unary(memory_pb2.ListProjectsRequest(), InterceptedContext())
    )
    await held.inside.wait()
    return task, held


async def test_a_call_past_the_servers_cap_is_a_quota_failure_and_its_slot_comes_back():
    recorder = Recorder()
    service = ServiceInterceptor(max_concurrent=1, observer=recorder)
    task, held = await open_call(service, keys=False)
    context = await refused_with(chain(service, served, keys=False))
    assert context.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "--max-concurrent-rpcs" in context.message
    assert context.details() == (
        QuotaViolation("server", "concurrent calls on this server: at most 1",
                       quota_id="max-concurrent-rpcs", quota_value=1),
        ErrorInfo("CONCURRENT_RPC_LIMIT"),
    )  # fmt: skip
    # The refused call kept its x-request-id beside the details.
    assert any(k == "x-request-id" for k, _ in context.trailers)
    held.go.set()
    await task
    await chain(service, served, keys=False).unary_unary(
        memory_pb2.ListProjectsRequest(), InterceptedContext()
    )
    assert recorder.codes == [
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.OK,
        grpc.StatusCode.OK,
    ]


async def test_one_key_at_its_limit_leaves_the_server_to_the_others():
    service = ServiceInterceptor(max_concurrent=8, max_per_key=1)
    task, held = await open_call(service, key(KEY_A))
    context = await refused_with(chain(service, served, key(KEY_A)))
    assert context.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "API key 'a' already has 1 calls running" in context.message
    assert "(now 1)" in context.message
    assert context.details() == (
        QuotaViolation("api_key:a", "concurrent calls per API key: at most 1; this key has"
                       " 1 running", quota_id="max-concurrent-rpcs-per-key", quota_value=1),
        ErrorInfo("CONCURRENT_RPC_LIMIT_PER_KEY", {"api_key": "a"}),
    )  # fmt: skip
    # Another key is served meanwhile; the key's slot is its own again once freed.
    await chain(service, served, key(KEY_B)).unary_unary(
        memory_pb2.ListProjectsRequest(), InterceptedContext()
    )
    held.go.set()
    await task
    await chain(service, served, key(KEY_A)).unary_unary(
        memory_pb2.ListProjectsRequest(), InterceptedContext()
    )


async def test_one_tenants_keys_together_leave_the_server_to_other_tenants():
    service = ServiceInterceptor(max_concurrent=8, max_per_key=3, max_per_tenant=2)
    # Tenant ta's two keys hold its two slots between them.
    first, held_a = await open_call(service, key(KEY_A))
    second, held_c = await open_call(service, key(KEY_C))
    context = await refused_with(chain(service, served, key(KEY_A)))
    assert context.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the keys of tenant 'ta' already have 2 calls running together" in context.message
    assert context.details() == (
        QuotaViolation("tenant:ta", "concurrent calls per tenant: at most 2; this tenant has"
                       " 2 running", quota_id="max-concurrent-rpcs-per-tenant", quota_value=2),
        ErrorInfo("CONCURRENT_RPC_LIMIT_PER_TENANT", {"tenant": "ta"}),
    )  # fmt: skip
    # Tenant tb is served.
    await chain(service, served, key(KEY_B)).unary_unary(
        memory_pb2.ListProjectsRequest(), InterceptedContext()
    )
    held_a.go.set()
    held_c.go.set()
    await asyncio.gather(first, second)
    await chain(service, served, key(KEY_C)).unary_unary(
        memory_pb2.ListProjectsRequest(), InterceptedContext()
    )


async def test_a_response_over_the_message_limit_is_refused_and_counted_as_such(caplog):
    recorder = Recorder()
    service = ServiceInterceptor(max_concurrent=0, observer=recorder, max_message_bytes=100)

    async def big(request, context):
        return memory_pb2.ListProjectsResponse(
            projects=[memory_pb2.Project(name="p", description="x" * 200)]
        )

    with caplog.at_level(logging.ERROR, logger="nexus_grpc.access"):
        context = await refused_with(chain(service, big, keys=False))
    assert context.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "--max-message-bytes" in context.message
    [quota, info] = context.details()
    assert (quota.subject, quota.quota_id, quota.quota_value) == (
        "server",
        "max-message-bytes",
        100,
    )
    assert info.reason == "RESPONSE_TOO_LARGE"
    assert any("exceeds --max-message-bytes (100)" in r.getMessage() for r in caplog.records)
    assert recorder.codes == [grpc.StatusCode.RESOURCE_EXHAUSTED]


# --- the x-request-id -----------------------------------------------------------------------


def rid(context: InterceptedContext) -> str:
    return dict(context.trailers)["x-request-id"]


async def test_a_client_request_id_that_is_a_bounded_token_is_echoed():
    service = ServiceInterceptor(max_concurrent=0)
    context = InterceptedContext()
    await chain(service, served, (("x-request-id", "client-42.a:b"),), keys=False).unary_unary(
        memory_pb2.ListProjectsRequest(), context
    )
    assert rid(context) == "client-42.a:b"
    assert REQUEST_ID.fullmatch("x" * 128) and not REQUEST_ID.fullmatch("x" * 129)


@pytest.mark.parametrize("bad", ["a b c", "x" * 129])
async def test_any_other_request_id_is_replaced_and_the_swap_logged(bad, caplog):
    service = ServiceInterceptor(max_concurrent=0)
    context = InterceptedContext()
    with caplog.at_level(logging.WARNING, logger="nexus_grpc.access"):
        await chain(service, served, (("x-request-id", bad),), keys=False).unary_unary(
            memory_pb2.ListProjectsRequest(), context
        )
    echoed = rid(context)
    assert echoed != bad and len(echoed) == 16 and echoed.isalnum()
    assert any("x-request-id replaced by " + echoed in r.getMessage() for r in caplog.records)
