"""Who may write into a session that belongs to a user.

A session created with a ``user_id`` holds that user's conversation, and its
episodes form that user's USER memories. So every call that writes into it
(an episode, an import item, a new extraction, a move to another project, a
delete, a summary) needs a key that may act for that user: the user's own,
a ``*`` key, or an admin key (docs/security.md, "Sessions that belong to a
user"). Without this, any key of the tenant could rewrite another user's
memories through formation, which runs in a worker with no caller.

The user is named in the refusal: a key of the tenant can read the session
(GetSession shows its user_id), so the name tells it nothing new.
"""

from __future__ import annotations

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import Session
from nexus_grpc.errors import ErrorInfo, PermissionDenied


def require_may_write(session: Session, action: str = "write into") -> None:
    """PERMISSION_DENIED unless the caller may act for the session's user."""
    if session.user_id and not tenancy.may_act_for(session.user_id):
        raise PermissionDenied(
            f"session {session.id} belongs to user {session.user_id!r}, whom this API key"
            f" may not act for; only a key that may act for that user (or a '*' or admin"
            f" key) may {action} it",
            details=(
                ErrorInfo(
                    "SESSION_USER_NOT_PERMITTED",
                    {"session_id": str(session.id), "user_id": session.user_id},
                ),
            ),
        )
