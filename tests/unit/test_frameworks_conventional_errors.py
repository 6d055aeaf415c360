"""The adapters' refusals as Python's own exceptions (integrations/conventional_errors.py),
given a NexusClientError: no framework, no server.

(The adapters meeting a server's refusals: tests/e2e/frameworks/.)"""

from __future__ import annotations

import pickle

import grpc

from nexus_grpc.client import NexusClientError, NexusInvalidArgument
from nexus_grpc.errors import FieldViolation
from nexus_grpc.integrations.conventional_errors import BUILTIN_FOR, conventional


def test_a_refusal_is_both_its_nexus_class_and_pythons_conventional_one():
    original = NexusClientError(
        grpc.StatusCode.INVALID_ARGUMENT,
        "memory.title is required",
        "req-1",
        (FieldViolation("memory.title", "memory.title is required"),),
    )
    converted = conventional(original)
    assert isinstance(converted, ValueError) and isinstance(converted, NexusInvalidArgument)
    assert str(converted) == "INVALID_ARGUMENT: memory.title is required (request id req-1)"
    assert converted.field_violations == original.field_violations
    assert str(pickle.loads(pickle.dumps(converted))) == str(converted)
    for code, builtin in BUILTIN_FOR.items():
        assert isinstance(conventional(NexusClientError(code, "m")), builtin)
    internal = conventional(NexusClientError(grpc.StatusCode.INTERNAL, "boom"))
    assert isinstance(internal, RuntimeError) and internal.message == "boom"
