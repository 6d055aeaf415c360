"""What the adapters raise when a dependency fails shares one root,
``errors.DependencyError`` (docs/architecture.md, "Errors"): a new adapter
exception without it fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import nexus_grpc
from nexus_grpc.errors import DependencyError, NexusError

#: The adapters, and the seams in core/ whose failures they raise.
ADAPTERS = ("llm", "rerank", "embedding", "vectors", "store")
SEAMS = ("nexus_grpc.core.vectors", "nexus_grpc.core.storage")
#: Mistakes in the configuration, found at start: not a dependency failing.
CONFIGURATION = {"EmbeddingDimensionMismatch", "DimensionMismatch"}


def _modules():
    for package in ADAPTERS:
        root = importlib.import_module(f"nexus_grpc.{package}")
        yield root
        for info in pkgutil.walk_packages(root.__path__, f"nexus_grpc.{package}."):
            yield importlib.import_module(info.name)
    for name in SEAMS:
        yield importlib.import_module(name)


def test_every_adapter_failure_is_a_dependency_error():
    found = {}
    for module in _modules():
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Exception)
                and cls.__module__ == module.__name__
                and cls.__module__.startswith(nexus_grpc.__name__)
            ):
                found[name] = cls
    assert {"LLMError", "RerankError", "StoreUnavailable", "VectorIndexUnavailable"} <= set(found)
    rootless = sorted(
        name
        for name, cls in found.items()
        if name not in CONFIGURATION and not issubclass(cls, DependencyError | NexusError)
    )
    assert rootless == [], f"adapter exceptions outside DependencyError: {rootless}"


def test_each_dependency_failure_says_whether_to_retry_or_wait():
    """What a failure is worth is read off the exception, never from a list
    of its subclasses: callers catch ``DependencyError`` and ask it."""
    from nexus_grpc.core.storage import Conflict, StoreError, StoreUnavailable
    from nexus_grpc.core.vectors import (
        CollectionNotFound,
        VectorIndexLocked,
        VectorIndexUnavailable,
        VectorTableMissing,
    )
    from nexus_grpc.embedding import EmbedderUnavailable
    from nexus_grpc.llm import (
        LLMBadOutput,
        LLMCutOff,
        LLMInputTooLong,
        LLMTimedOut,
        LLMUnavailable,
        LLMUnreachable,
    )
    from nexus_grpc.rerank import RerankTimeout, RerankUnreachable

    waits = {
        LLMUnreachable,
        EmbedderUnavailable,
        VectorIndexUnavailable,
        CollectionNotFound,
        StoreUnavailable,
        RerankUnreachable,
    }
    never = {LLMCutOff, LLMInputTooLong, Conflict, VectorIndexLocked, VectorTableMissing}
    again = {LLMUnavailable, LLMTimedOut, LLMBadOutput, StoreError, RerankTimeout}
    for cls in waits:
        assert cls.unreachable and cls.retryable, cls
    for cls in never:
        assert not cls.retryable and not cls.unreachable, cls
    for cls in again:
        assert cls.retryable and not cls.unreachable, cls


def test_a_worker_reads_the_outcome_off_the_failure():
    from nexus_grpc.embedding import EmbedderUnavailable
    from nexus_grpc.llm import LLMBadOutput, LLMCutOff, LLMUnreachable
    from nexus_grpc.workers.dependency_failures import failure_for
    from nexus_grpc.workers.worker import GiveUp, Postpone, Retry

    def outcome(exc: DependencyError) -> type:
        return type(failure_for(exc, "work failed"))

    assert outcome(LLMUnreachable("refused")) is Postpone
    assert outcome(EmbedderUnavailable("ollama away")) is Postpone
    assert outcome(LLMCutOff("cut off twice")) is GiveUp
    assert outcome(LLMBadOutput("not JSON")) is Retry
    assert str(failure_for(LLMBadOutput("not JSON"), "work failed")) == "work failed: not JSON"
