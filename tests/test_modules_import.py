"""Every module of the package imports: mypy runs with ignore_missing_imports, so a
stale import of one of our own modules (after a move) would otherwise pass CI's
type check and fail only when that code path runs."""

from __future__ import annotations

import importlib
import pkgutil

import nexus_grpc


def test_every_module_of_the_package_imports():
    failed = {}
    for module in pkgutil.walk_packages(nexus_grpc.__path__, "nexus_grpc."):
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            failed[module.name] = repr(exc)
    assert not failed, failed
