"""Every memory row and scope the visibility rule is checked over, once: the
unit test of the vector filter (tests/unit/test_rules_memory_visibility.py)
and the store's SQL fragment (tests/integration/store/test_memory_scope_sql.py)
each hold it against ``domain/memory_visibility.visible`` over the same grid,
so the three agree on the same rows. It imports no store."""

from __future__ import annotations

import itertools

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.domain.memory_visibility import MemoryScope

COLUMNS = ("kind", "tier", "project_id", "user_id", "session_id", "agent_id")
# Every owner, tier, session and agent a memory may have among two projects,
# two users, two sessions and two agents (PROJECT memories have no user, and
# USER memories may live outside any project).
ROWS = [
    dict(zip(COLUMNS, combo, strict=True))
    for combo in itertools.product(
        (int(MemoryKind.PROJECT), int(MemoryKind.USER)),
        [int(t) for t in Tier],
        (0, 1, 2),
        ("", "ann", "bob"),
        (0, 1, 2),
        ("", "agent-a"),
    )
    if (combo[0] == MemoryKind.PROJECT) == (combo[3] == "") and (combo[0], combo[2]) != (1, 0)
]
#: The scopes a caller may ask with (the empty scope, refused before any
#: query, is the SQL test's own case).
SCOPES = [
    MemoryScope(project_id=1),
    MemoryScope(project_id=1, session_id=1),
    MemoryScope(user_id="ann"),
    MemoryScope(project_id=2, user_id="ann", session_id=2),
    MemoryScope(project_id=1, user_id="bob", agent_id="agent-a"),
    MemoryScope(project_id=1, user_id="ann", include_archived=True),
]
