"""GetUsage on the wire: a key's report as the client reads it (the stages'
totals and the budget, its tenant or one of its projects), and a bad field
refused (the status, a message naming what is wrong, the field). Which
tenant a key may read (another tenant's project NOT_FOUND, only an admin
naming another tenant) and the work the calls were for are tested on the
use case, on the fakes, in tests/unit/test_activity_usage_reports.py; every
field's check in tests/unit/test_api_usage_request.py. The calls both seed are
tests/usage_calls.py's."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import Harness, bearer, start_harness
from tests.usage_calls import A_TOKENS_TODAY, a_reads_its_tenant_and_project, usage_calls

BOTH_STORES = True
A_KEY = "tenant-a-key-000000000001"
B_KEY = "tenant-b-key-000000000001"
ADMIN_KEY = "ops-admin-key-00000000001"
A, B, ADMIN = bearer(A_KEY), bearer(B_KEY), bearer(ADMIN_KEY)
NOW = time.time()


@pytest.fixture
async def h(tmp_path, store_settings):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "tenants": {"b": {"llm_tokens_per_day": 5000}},
                "keys": [
                    {"key": A_KEY, "name": "a", "users": "*"},
                    {"key": B_KEY, "name": "b", "users": "*"},
                    {"key": ADMIN_KEY, "name": "ops", "users": "*", "admin": True},
                ],
            }
        )
    )
    harness = await start_harness(tmp_path / "data", auth_keys_file=str(keys), **store_settings)
    yield harness
    await harness.close()


async def _project(h: Harness, key, name: str) -> int:
    made = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=name)), metadata=key
    )
    return made.id


async def _seed(h: Harness) -> tuple[int, int]:
    """A project of each tenant, and the calls they made (today, so they count
    against the budgets too)."""
    pa, pb = await _project(h, A, "pa"), await _project(h, B, "pb")
    calls = usage_calls(pa, pb)
    await h.app.db.write(lambda uow: uow.usage.insert(calls))
    return pa, pb


async def _usage(h: Harness, key, **kw) -> memory_pb2.GetUsageResponse:
    return await h.memory.GetUsage(memory_pb2.GetUsageRequest(**kw), metadata=key)


def _totals(report: memory_pb2.GetUsageResponse) -> dict[str, tuple]:
    return {
        s.stage: (s.calls, s.prompt_tokens, s.completion_tokens, dict(s.outcomes))
        for s in report.total.stages
    }


async def test_a_key_reads_its_tenant_or_one_of_its_projects(h):
    pa, _ = await _seed(h)
    tenant = await a_reads_its_tenant_and_project(lambda **kw: _usage(h, A, **kw), _totals, pa)
    # Its budget: none of its own, and no default.
    assert tenant.budget.tenant == "a" and tenant.budget.llm_tokens_per_day == 0
    assert tenant.budget.llm_tokens_today == A_TOKENS_TODAY and not tenant.budget.exhausted


def _violations(exc: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(exc)
    assert status is not None
    fields = []
    for packed in status.details:
        if packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            packed.Unpack(bad)
            fields += [v.field for v in bad.field_violations]
    return fields


async def test_a_bad_field_is_refused_naming_it(h):
    """One field over the wire (the wiring); every field's check is tested as
    the servicer makes it in tests/unit/test_api_usage_request.py."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _usage(h, A, tenant="two words")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a tenant's name" in err.value.details()
    assert "tenant" in _violations(err.value)
