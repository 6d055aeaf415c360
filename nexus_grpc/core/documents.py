"""What the vector index holds of each row: its text (what is embedded) and its
payload (the fields scope filters match on). The store's loaders
(``store/documents.py``) and a write that stores a new row's vector in its
own transaction (``domain/inline_vectors.py``) build them the same way."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def episode_payload(session_id: int, created_at: float, occur_at: float) -> dict[str, Any]:
    # occurAt is whole seconds, rounded down: a window's range over it is
    # widened to whole seconds and SQLite re-checks the exact time.
    return {"sessionId": session_id, "createdAt": int(created_at), "occurAt": math.floor(occur_at)}


def entity_text(name: str, etype: str, notes: str | None, aliases: Sequence[str] = ()) -> str:
    """Name, type, the other names it goes by, and notes: a search for any of
    its names finds it by meaning too."""
    others = [a for a in dict.fromkeys(aliases) if a != name][:8]
    also = f"; also {', '.join(others)}" if others else ""
    return f"{name} ({etype}{also}): {notes or ''}".rstrip(": ")


def entity_payload(project_id: int, session_id: int) -> dict[str, Any]:
    return {"projectId": project_id, "sessionId": session_id}


def memory_text(title: str, content: str) -> str:
    return f"{title}\n{content}"


def memory_payload(
    kind: int,
    tier: int,
    project_id: int,
    user_id: str,
    session_id: int,
    agent_id: str,
    tenant: str,
) -> dict[str, Any]:
    # The tenant too: a user id names a user within a tenant, and a search's
    # nearest points must all be its own tenant's (another tenant's "alice"
    # would otherwise take her places, then be dropped by the re-check).
    return {
        "kind": kind,
        "tier": tier,
        "projectId": project_id,
        "userId": user_id,
        "sessionId": session_id,
        "agentId": agent_id,
        "tenant": tenant,
    }
