"""Schema migrations: each runs once, in order, and an upgrade keeps the data."""

from __future__ import annotations

import sqlite3

import pytest

from nexus_grpc.store import migrations


def _migrate_to(conn: sqlite3.Connection, version: int, monkeypatch) -> None:
    monkeypatch.setattr(migrations, "LATEST_VERSION", version)
    migrations.migrate(conn)
    monkeypatch.undo()


def test_an_older_database_upgrades_in_place_and_keeps_its_graph(tmp_path, monkeypatch):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, 2, monkeypatch)
    conn.execute("INSERT INTO entities (id, project_id, name, type, created_at, last_seen_at)"
                 " VALUES (1, 0, 'a', 'concept', 0, 0), (2, 0, 'b', 'concept', 0, 0)")  # fmt: skip
    conn.execute("INSERT INTO relationships (from_id, to_id, label, created_at)"
                 " VALUES (1, 2, 'uses', 0)")  # fmt: skip
    assert migrations.migrate(conn) == migrations.LATEST_VERSION
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.LATEST_VERSION
    columns = [r[2] for r in conn.execute("PRAGMA index_info(idx_relationships_to)")]
    assert columns == ["to_id", "from_id"]
    assert conn.execute("SELECT from_id FROM relationships WHERE to_id = 2").fetchall() == [(1,)]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Running it again changes nothing.
    assert migrations.migrate(conn) == migrations.LATEST_VERSION


def test_a_newer_database_is_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    conn.execute(f"PRAGMA user_version = {migrations.LATEST_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer than this build knows"):
        migrations.migrate(conn)
