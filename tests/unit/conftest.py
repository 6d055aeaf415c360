"""The unit tier: the domain's rules called directly, on the in-memory fakes of
the repositories (tests/fakes.py) where they read or write rows. No SQLite, no
PostgreSQL, no server, no network, no subprocess (docs/testing.md);
tests/test_architecture.py checks that no module here imports the store."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/unit ``unit``, so ``-m unit`` (or ``-m "not
    unit"``) selects the tier whichever way the tests were collected."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.unit)
