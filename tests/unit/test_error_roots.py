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
