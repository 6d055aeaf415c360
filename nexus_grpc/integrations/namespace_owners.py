"""Whose memories a LangGraph namespace names: a user's, the project's, or, for a
prefix that names no user, every owner's (``NexusStore``'s ``user_position``).

``"auto"`` (the default) takes LangGraph's two common layouts as they are and
refuses the rest: a one-label namespace is the project's; in a two-label one
with ``"memories"`` on one side, the other label is the user; anything else is
``InvalidNamespaceError`` naming the setting, never a guess. An index names
the label that is the user (a namespace too short to reach it is the
project's); None makes every namespace the project's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from langgraph.store.base import InvalidNamespaceError

__all__ = ["AUTO", "COLLECTION", "EVERY", "Every", "NamespaceOwners", "Owner", "UserPosition"]

AUTO: Final = "auto"
#: The label beside the user in ``"auto"``'s two layouts.
COLLECTION = "memories"
#: A user's memories (their id), or the project's (None).
Owner = str | None
UserPosition = int | Literal["auto"] | None


class Every:
    """What a prefix naming no user reaches: the project's and every user's."""

    def __repr__(self) -> str:
        return "EVERY"


EVERY = Every()


class NamespaceOwners:
    def __init__(self, user_position: UserPosition) -> None:
        if (
            user_position is not None
            and user_position != AUTO
            and (
                isinstance(user_position, bool)
                or not isinstance(user_position, int)
                or user_position < 0
            )
        ):
            raise ValueError(
                f"user_position must be {AUTO!r}, a label index (0 or more) or None,"
                f" got {user_position!r}"
            )
        self.user_position = user_position

    def of(self, namespace: Sequence[str]) -> Owner:
        """The owner of a whole namespace's items; ``InvalidNamespaceError``
        where ``"auto"`` cannot tell."""
        at = self.user_position
        if at is None:
            return None
        if at == AUTO:
            return _auto(tuple(namespace))
        assert isinstance(at, int)
        return namespace[at] if len(namespace) > at else None

    def placed(self, namespace: Sequence[str]) -> Owner | Every:
        """``of`` without the refusal: EVERY (no one owner) where it refuses."""
        try:
            return self.of(namespace)
        except InvalidNamespaceError:
            return EVERY

    def reached_by(self, prefix: Sequence[str]) -> Owner | Every:
        """The one owner whose items a prefix (a search's, a listing's) can
        reach, or EVERY. ``"*"`` where the user goes names no user."""
        at = self.user_position
        if at is None:
            return None
        if at == AUTO:
            if len(prefix) >= 2 and (prefix[0] == COLLECTION) != (prefix[1] == COLLECTION):
                user = prefix[1] if prefix[0] == COLLECTION else prefix[0]
                return EVERY if user == "*" else user
            return EVERY
        assert isinstance(at, int)
        if len(prefix) <= at or prefix[at] == "*":
            return EVERY
        return prefix[at]


def _auto(namespace: tuple[str, ...]) -> Owner:
    if len(namespace) <= 1:
        return None
    if len(namespace) == 2 and (namespace[0] == COLLECTION) != (namespace[1] == COLLECTION):
        return namespace[1] if namespace[0] == COLLECTION else namespace[0]
    raise InvalidNamespaceError(
        f"NexusStore cannot tell which label of {namespace} names the user:"
        f' user_position="auto" reads only ("memories", user_id) and (user_id, "memories")'
        " (and one-label namespaces, the project's). Set user_position: the index of the"
        " user's label (0 for (user_id, ...), 1 for (..., user_id, ...)), or None to keep"
        " every item the project's"
    )
