"""Guards found by a mutation audit of the unit tier: the keys file's
rules (rpc/auth.py) held at their boundary.

The rest of the keys file is tests/unit/test_auth_keys.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.rpc.auth import KeyFileError, KeyRing


def test_a_key_needs_sixteen_characters_and_sixteen_are_enough():
    with pytest.raises(KeyFileError, match="'key' must be a string of 16 characters or more"):
        KeyRing.from_dict({"keys": [{"key": "k" * 15, "name": "x"}]})
    ring = KeyRing.from_dict({"keys": [{"key": "k" * 16, "name": "x"}]})
    assert ring.lookup("k" * 16) is not None
