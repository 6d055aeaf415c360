"""The keys of the auth tests and the walk that sets a request's user ids,
shared by both tiers that test the key check: tests/unit/test_auth_keys.py
(the key ring, and that every user id the walk sets is one the check sees)
and tests/e2e/api/test_auth.py (every RPC behind the check over the wire).
One copy, so the walk the unit tier proves is the one the server is called
with. Not a test module; it imports no store.

The walk derives the user-scoped RPCs from the service descriptors, so a new
RPC is covered the day it is added: ``has_user`` says whether a message type
carries a ``user_id`` at any depth, ``set_users`` sets every one of them, and
``request_for`` builds a method's request (with a user, or none)."""

from __future__ import annotations

import hashlib
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

ALICE_KEY = "alice-orchestrator-key-0001"
ADMIN_KEY = "ops-admin-key-000000000001"
ANY_KEY = "any-user-service-key-00001"
OUTSIDER = "mallory"

#: The key file: a key for two users, an admin's (kept as a digest), and a key
#: for any user that shares the admin's tenant.
KEY_FILE: dict[str, Any] = {
    "keys": [
        {"key": ALICE_KEY, "name": "orchestrator", "users": ["alice", "bob"]},
        {
            "key_sha256": hashlib.sha256(ADMIN_KEY.encode()).hexdigest(),
            "name": "ops",
            "users": [],
            "admin": True,
        },
        # Shares the admin's tenant: several keys may hold one.
        {"key": ANY_KEY, "name": "gateway", "users": "*", "tenant": "ops"},
    ]
}


def has_user(desc: Descriptor, depth: int = 0) -> bool:
    """Whether a message of this type carries a string ``user_id`` at any depth."""
    if depth > 6 or desc.full_name.startswith("google.protobuf."):
        return False
    return any(
        (f.name == "user_id" and f.type == FieldDescriptor.TYPE_STRING)
        or (f.message_type is not None and has_user(f.message_type, depth + 1))
        for f in desc.fields
    )


def set_users(message: Message, user: str, depth: int = 0) -> None:
    """Sets every ``user_id`` of ``message`` to ``user`` (one of each repeated field)."""
    for f in message.DESCRIPTOR.fields:
        if f.name == "user_id" and f.type == FieldDescriptor.TYPE_STRING:
            setattr(message, f.name, user)
        elif f.message_type is not None and has_user(f.message_type, depth + 1):
            if f.message_type.GetOptions().map_entry:
                continue
            if f.is_repeated:
                set_users(getattr(message, f.name).add(), user, depth + 1)
            else:
                set_users(getattr(message, f.name), user, depth + 1)


def request_for(method, user: str | None = None) -> Message:
    """An empty request of ``method``, with every user id ``user`` if given."""
    request = GetMessageClass(method.input_type)()
    if user is not None:
        set_users(request, user)
    return request
