"""The external id a client gives a conversation it names itself
(nexus_grpc/session_names.py): a UUID is kept as the conversation's id, any
other name is a uuid5 of the project and the name. The hooks recording into
that session through a server is tests/e2e/agent_hooks/test_hook_run.py's."""

from __future__ import annotations

import uuid

from nexus_grpc.session_names import SESSION_NAMESPACE, session_external_id

CLAUDE_SESSION = "3f2b9c1e-8d4a-4e6f-9b7c-1a2b3c4d5e6f"


def test_a_uuid_session_name_is_its_own_external_id_in_every_project():
    assert session_external_id("webshop", CLAUDE_SESSION) == CLAUDE_SESSION
    assert session_external_id("billing", CLAUDE_SESSION) == CLAUDE_SESSION


def test_a_uuid_in_another_spelling_is_the_same_conversation():
    spelled = "{" + CLAUDE_SESSION.upper() + "}"
    assert session_external_id("webshop", spelled) == CLAUDE_SESSION


def test_any_other_name_is_a_uuid5_of_the_project_and_the_name():
    expected = str(uuid.uuid5(SESSION_NAMESPACE, "webshop\nauth-work"))
    assert session_external_id("webshop", "auth-work") == expected
    assert session_external_id("webshop", "auth-work") == expected  # the same every time
    assert uuid.UUID(expected).version == 5


def test_the_same_words_in_two_projects_are_two_sessions():
    assert session_external_id("webshop", "terminal-2") != session_external_id(
        "billing", "terminal-2"
    )


def test_the_namespace_is_fixed_so_names_survive_releases():
    assert session_external_id("p", "s") == str(
        uuid.uuid5(uuid.UUID("6b1f4a52-43a4-5d0c-9a55-3c1e3f7d2a10"), "p\ns")
    )
