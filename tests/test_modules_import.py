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


# The distributions only an extra brings, which the image does not install.
EXTRA_ONLY = {"langgraph", "langchain_core", "llama_index", "mcp"}


def _top_level_imports(path) -> set[str]:
    """The root names a module imports at its top level (not inside functions,
    where they run only when that code path does)."""
    import ast

    roots = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_image_build_leaves_out_every_module_that_needs_an_extra():
    """deploy/precompile.py imports every module of the image's package as the
    build's smoke check, less those NEEDS_EXTRA names: a new module importing
    an extra's library at its top level, not named there, fails the image
    build (as namespace_owners did), not a test."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "precompile", Path(__file__).parents[1] / "deploy" / "precompile.py"
    )
    assert spec is not None and spec.loader is not None
    precompile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(precompile)

    def skipped_for(name: str) -> set[str]:
        return {
            extra.split(".")[0]
            for package, extra in precompile.NEEDS_EXTRA.items()
            if name == package or name.startswith(package + ".")
        }

    uncovered = {}
    for module in pkgutil.walk_packages(nexus_grpc.__path__, "nexus_grpc."):
        found = importlib.util.find_spec(module.name)
        if found is None or found.origin is None or not found.origin.endswith(".py"):
            continue
        needs = _top_level_imports(Path(found.origin)) & EXTRA_ONLY
        if needs - skipped_for(module.name):
            uncovered[module.name] = sorted(needs)
    assert not uncovered, f"name these in deploy/precompile.py's NEEDS_EXTRA: {uncovered}"
