"""A memory's values as the domain hands them to ``memories.insert``, for the
repository contract tests: a user's long-term memory of "ann", with any field
given replacing its default. Not a test module: the erasure, erasure-deletes
and stats contracts (tests/integration/store/test_repository_contract_erasure.py,
test_repository_contract_erasure_deletes.py, test_repository_contract_stats.py)
each wrote it out alike; here it is one copy."""

from __future__ import annotations

from typing import Any

from nexus_grpc.core.models import MemoryKind, Tier


def memory_values(**given: Any) -> dict[str, Any]:
    """A USER, LONGTERM memory of "ann" in no project or session, with ``given`` over it."""
    values: dict[str, Any] = {
        "kind": int(MemoryKind.USER), "title": "t", "content": "c", "tier": int(Tier.LONGTERM),
        "project_id": 0, "agent_id": "", "user_id": "ann", "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    values.update(given)
    return values
