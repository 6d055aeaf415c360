"""The README's power-loss claim rests on SQLite's synchronous=FULL: every
commit is fsynced before the RPC answers OK.  This checks that a server
started with the defaults a user gets really runs its connections that way."""

from __future__ import annotations

import pytest

from nexus_grpc.runtime.config import OPTIONS, env_default, settings_from
from tests.support import start_harness

FULL, NORMAL = 2, 1  # what PRAGMA synchronous reads back


async def _modes(h) -> tuple[int, int]:
    writer = await h.app.db.write_sql(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
    reader = await h.app.db.read_sql(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
    return writer, reader


async def test_the_default_server_commits_with_synchronous_full(tmp_path, monkeypatch):
    monkeypatch.delenv("NEXUS_SQLITE_SYNCHRONOUS", raising=False)
    # The settings `nexus-grpc serve` builds from its flags' defaults.
    defaults = settings_from({name: env_default(name) for name in OPTIONS})
    assert defaults.sqlite_synchronous == "FULL"
    h = await start_harness(tmp_path / "full", sqlite_synchronous=defaults.sqlite_synchronous)
    try:
        assert await _modes(h) == (FULL, FULL)
    finally:
        await h.close()


@pytest.mark.parametrize(("setting", "mode"), [("NORMAL", NORMAL), ("FULL", FULL)])
async def test_the_setting_reaches_the_connections(tmp_path, setting, mode):
    # The check can tell the modes apart: NORMAL reads back as NORMAL.
    h = await start_harness(tmp_path / setting, sqlite_synchronous=setting)
    try:
        assert await _modes(h) == (mode, mode)
    finally:
        await h.close()
