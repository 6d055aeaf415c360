"""``nexus-grpc doctor``'s report of a GetServiceStatus answer
(ops/against_server/doctor.py), given the answer rather than a server: the state, the
embedding, each dependency's mark, the event loop, the queues with their oldest job's
age, and each tenant's LLM tokens today.

(doctor against the fake in-process server, healthy, degraded and unreachable:
tests/e2e/client/test_client.py.)"""

from __future__ import annotations

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server import doctor


def report(status: memory_pb2.ServiceStatus) -> list[str]:
    lines: list[str] = []
    doctor._report(status, lines.append)
    return lines


def test_the_state_schema_and_embedding_come_first():
    status = memory_pb2.ServiceStatus(
        state="SERVING", schema_version=3, embedding_model="minilm-int8", embedding_dimension=384
    )
    assert report(status) == [
        "  state             SERVING",
        "  schema version    3",
        "  embedding         minilm-int8 (dimension 384)",
    ]
    assert report(memory_pb2.ServiceStatus())[::2] == [
        "  state             ?",
        "  embedding         ? (dimension 0)",
    ]


def test_each_dependency_is_marked_failed_off_or_ok():
    status = memory_pb2.ServiceStatus(state="DEGRADED")
    status.dependencies.add(name="sqlite", ok=True)
    status.dependencies.add(name="ollama", ok=False, detail="connection refused")
    status.dependencies.add(name="otel", ok=True, off=True)
    assert report(status)[3:] == [
        "  dependencies",
        "    ok    sqlite",
        "    FAIL  ollama  connection refused",
        "    off   otel  ",  # names padded to the widest
    ]


def test_the_event_loop_and_the_queues_with_their_oldest_jobs_age():
    status = memory_pb2.ServiceStatus()
    status.event_loop.max_lag_ms = 12.6
    status.event_loop.over_100ms = 2
    status.event_loop.samples = 600
    for kind, age in (("embedding", 0.0), ("extraction", 90.0), ("summary", 600.0),
                      ("form:memories", 9000.0)):  # fmt: skip
        status.queues.add(kind=kind, pending=3, failed=1, oldest_pending_age_seconds=age)
    lines = report(status)[3:]
    assert lines[0] == "  event loop        worst delay 13 ms; 2 of 600 wake-ups over 100 ms late"
    assert lines[1] == "  queues"
    assert lines[2].split() == ["kind", "pending", "failed", "oldest"]
    assert [line.split()[-1] for line in lines[3:]] == ["-", "90.0s", "10.0m", "2.5h"]
    assert lines[3].split()[:3] == ["embedding", "3", "1"]


def test_tenants_tokens_today_with_their_budget_and_users():
    status = memory_pb2.ServiceStatus()
    status.budgets.add(tenant="idle")  # nothing spent, no budget: not shown
    acme = status.budgets.add(tenant="acme", llm_tokens_today=1200, llm_tokens_per_day=1000,
                              exhausted=True, llm_tokens_per_day_per_user=500)  # fmt: skip
    acme.users.add(user_id="ann", llm_tokens_today=600, exhausted=True)
    status.budgets.add(tenant="default", llm_tokens_today=42)
    assert report(status)[3:] == [
        "  LLM tokens today (docs/usage.md)",
        "    acme     1,200 of 1,000  SPENT: its LLM work waits for 00:00 UTC",
        "             user 'ann': 600 of 500 a user  SPENT: their LLM work waits for 00:00 UTC",
        "    default  42 (no budget)",
    ]
