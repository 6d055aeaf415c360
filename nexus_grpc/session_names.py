"""The nexus ``external_id`` a client gives a conversation it names by its own id.

A module of its own, importing nothing, so that what runs once per prompt (the
agent hooks) and what runs for hours (the MCP server, the framework adapters,
through ``client/name_lookup.py``) name one conversation alike without the
hooks importing the typed client.
"""

from __future__ import annotations

import uuid

__all__ = ["SESSION_NAMESPACE", "session_external_id"]

#: The uuid5 namespace of session names that are not UUIDs themselves.
SESSION_NAMESPACE = uuid.UUID("6b1f4a52-43a4-5d0c-9a55-3c1e3f7d2a10")


def session_external_id(project: str, session: str) -> str:
    """The nexus ``external_id`` of the conversation named ``session`` in ``project``.

    A name that is a UUID (Claude Code's, Codex CLI's and Gemini CLI's session
    ids, LangChain's usual ``str(uuid4())``) is used as it is, so every tool
    recording the same conversation under that UUID writes into one nexus
    session; any other string ("auth-work", "terminal-2") becomes a name-based
    UUID (uuid5) of the project name and the string, so the same words in two
    projects are two sessions."""
    try:
        return str(uuid.UUID(session))
    except ValueError:
        return str(uuid.uuid5(SESSION_NAMESPACE, f"{project}\n{session}"))
