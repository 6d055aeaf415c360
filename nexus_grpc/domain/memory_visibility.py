"""Who may see which memory: the one visibility rule, as SQL and as a vector filter.

A viewer is a ``MemoryScope``.  A memory is visible to it when all hold:

- kind: a PROJECT memory belongs to ``scope.project_id`` (a scope without a
  project sees no PROJECT memory); a USER memory has ``user_id ==
  scope.user_id`` (a scope without a user sees no USER memory) and was stored
  either outside any project (project_id 0: the user's own, everywhere) or in
  ``scope.project_id``;
- tier: TASK and SESSION memories only in their origin session
  (``session_id == scope.session_id``), except one stored outside a session
  (session_id 0), which stays visible within its scope; LONGTERM is shared
  within the scope; ARCHIVE is shared too but only with ``include_archived``;
- agent: when ``scope.agent_id`` is set, only that agent's memories;
- tenant: only memories of the caller's tenant (``core.tenancy``), unless
  the caller sees every tenant (an admin key, or auth off).  A user id names
  a user within a tenant: "alice" of one tenant is not "alice" of another;
- time: a memory whose ``expire_at`` has passed is visible to no one, from
  that moment (SQL only: the vector filter leaves it to the SQLite re-check,
  which every vector hit goes through).

``store.memory_visibility_sql.sql_where`` (the rule as SQL, in the store with all SQL)
and ``vector_filter`` express exactly this rule; every query path (list,
keyword, semantic, selection, usage) uses one of them, and vector hits are
re-checked against the database with ``sql_where``.  Vector payloads carry
the tenant too: the re-check alone would drop another tenant's points, but
only after they had taken the nearest places (another tenant's "alice" with
more memories than a search asks for would leave alice none), so one
tenant's writes would change another's answers.
"""

from __future__ import annotations

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import SESSION_TIERS, MemoryKind, MemoryScope
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.vectors import Filter, MatchAny


def check_scope(scope: MemoryScope) -> MemoryScope:
    """Validate a scope; it must name a project or a user (or it sees nothing)."""
    v.positive_id("scope.project_id", scope.project_id, required=False)
    v.positive_id("scope.session_id", scope.session_id, required=False)
    v.identifier("scope.user_id", scope.user_id)
    v.identifier("scope.agent_id", scope.agent_id)
    if not scope.project_id and not scope.user_id:
        raise InvalidArgument(
            "scope needs a project_id or a user_id: an empty scope sees nothing",
            fields=("scope.project_id", "scope.user_id"),
        )
    return scope


def vector_filter(scope: MemoryScope) -> Filter | None:
    """The same rule over the memories collection's payload; None sees nothing."""
    owners: list[Filter] = []
    if scope.project_id:
        owners.append(
            Filter(
                must=(
                    MatchAny("kind", (int(MemoryKind.PROJECT),)),
                    MatchAny("projectId", (scope.project_id,)),
                )
            )
        )
    if scope.user_id:
        owners.append(
            Filter(
                must=(
                    MatchAny("kind", (int(MemoryKind.USER),)),
                    MatchAny("userId", (scope.user_id,)),
                    MatchAny("projectId", tuple(dict.fromkeys((0, scope.project_id)))),
                )
            )
        )
    if not owners:
        return None
    tiers = Filter(
        should=(
            MatchAny("tier", scope.shared_tiers()),
            Filter(
                must=(
                    MatchAny("tier", SESSION_TIERS),
                    MatchAny("sessionId", tuple(dict.fromkeys((0, scope.session_id)))),
                )
            ),
        )
    )
    must: list[MatchAny | Filter] = [Filter(should=tuple(owners)), tiers]
    if scope.agent_id:
        must.append(MatchAny("agentId", (scope.agent_id,)))
    tenant = tenancy.visible()
    if tenant is not None:
        must.append(MatchAny("tenant", (tenant,)))
    return Filter(must=tuple(must))


def visible(
    scope: MemoryScope,
    *,
    kind: int,
    tier: int,
    project_id: int,
    user_id: str,
    session_id: int,
    agent_id: str,
) -> bool:
    """The rule in Python (for tests and in-memory checks); mirrors
    ``store.memory_visibility_sql.sql_where``."""
    if kind == MemoryKind.PROJECT:
        owner = bool(scope.project_id) and project_id == scope.project_id
    elif kind == MemoryKind.USER:
        owner = (
            bool(scope.user_id) and user_id == scope.user_id and project_id in (0, scope.project_id)
        )
    else:
        owner = False
    if not owner:
        return False
    if tier in SESSION_TIERS:
        tier_ok = session_id in (0, scope.session_id)
    else:
        tier_ok = tier in scope.shared_tiers()
    if not tier_ok:
        return False
    return not scope.agent_id or agent_id == scope.agent_id


__all__ = ["SESSION_TIERS", "MemoryScope", "check_scope", "vector_filter", "visible"]
