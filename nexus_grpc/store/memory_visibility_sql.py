"""The memory visibility rule of ``domain.memory_visibility``, as SQL.

The rule is stated once in the domain's docstring; this is its WHERE
fragment, kept here with all other SQL. ``domain.memory_visibility.visible`` and
``vector_filter`` mirror it, and tests check the three agree.
"""

from __future__ import annotations

import time

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import SESSION_TIERS, MemoryKind, MemoryScope


def sql_where(
    scope: MemoryScope, alias: str = "m", *, now: float | None = None
) -> tuple[str, tuple[object, ...]]:
    """A WHERE fragment (no leading AND) and its parameters; expiry is judged
    at ``now`` (default: the current time)."""
    a = f"{alias}." if alias else ""
    owners: list[str] = []
    params: list[object] = []
    if scope.project_id:
        owners.append(f"({a}kind = ? AND {a}project_id = ?)")
        params += [int(MemoryKind.PROJECT), scope.project_id]
    if scope.user_id:
        owners.append(f"({a}kind = ? AND {a}user_id = ? AND {a}project_id IN (0, ?))")
        params += [int(MemoryKind.USER), scope.user_id, scope.project_id]
    if not owners:
        # A boolean on both: PostgreSQL refuses an integer where AND wants one.
        return "1 = 0", ()
    tenant = tenancy.visible()
    shared = scope.shared_tiers()
    clause = (
        f"({' OR '.join(owners)})"
        f" AND ({a}tier IN ({','.join('?' * len(shared))})"
        f" OR ({a}tier IN (?, ?) AND {a}session_id IN (0, ?)))"
    )
    params += [*shared, *SESSION_TIERS, scope.session_id]
    if scope.agent_id:
        clause += f" AND {a}agent_id = ?"
        params.append(scope.agent_id)
    if tenant is not None:
        clause += f" AND {a}tenant = ?"
        params.append(tenant)
    clause += f" AND ({a}expire_at IS NULL OR {a}expire_at > ?)"
    params.append(time.time() if now is None else now)
    return clause, tuple(params)
