"""Schema migrations: each runs once, in order, and an upgrade keeps the data."""

from __future__ import annotations

import sqlite3
import time

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.store import schema_changes
from nexus_grpc.store.sqlite import migrations


def _migrate_to(conn: sqlite3.Connection, version: int) -> None:
    """The database as the build whose latest version was ``version`` left it."""
    migrations.migrate(conn, upto=version)


def test_an_older_database_upgrades_in_place_and_keeps_its_graph(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, 2)
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


def test_pool_entities_move_to_their_one_session_and_keep_their_edges(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    _migrate_to(conn, 3)
    conn.execute("INSERT INTO sessions (id, external_id, created_at)"
                 " VALUES (1, 'a', 0), (2, 'b', 0)")  # fmt: skip
    conn.execute("INSERT INTO episodes (id, session_id, user_message, ai_response, created_at)"
                 " VALUES (1, 1, 'x', '', 0), (2, 2, 'y', '', 0)")  # fmt: skip
    conn.execute("INSERT INTO entities (id, project_id, name, type, created_at)"
                 " VALUES (1, 0, 'only a', 'concept', 0), (2, 0, 'both', 'concept', 0),"
                 " (3, 0, 'also a', 'concept', 0), (9, 0, 'deleted', 'concept', 0)")  # fmt: skip
    conn.execute("DELETE FROM entities WHERE id = 9")
    conn.execute("INSERT INTO entity_episodes (entity_id, episode_id)"
                 " VALUES (1, 1), (2, 1), (2, 2), (3, 1)")  # fmt: skip
    conn.execute("INSERT INTO relationships (from_id, to_id, label, created_at)"
                 " VALUES (1, 3, 'near', 0)")  # fmt: skip

    migrations.migrate(conn)

    scopes = dict(conn.execute("SELECT id, session_id FROM entities").fetchall())
    assert scopes == {1: 1, 2: 0, 3: 1}
    assert conn.execute("SELECT from_id, to_id FROM relationships").fetchall() == [(1, 3)]
    assert conn.execute("SELECT COUNT(*) FROM entity_episodes").fetchone()[0] == 4
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # The id high-water mark survives the rebuild.
    new_id = conn.execute("INSERT INTO entities (name, name_key, type, created_at)"
                          " VALUES ('new', 'new', 'concept', 0)").lastrowid  # fmt: skip
    assert new_id == 10
    # The same name may now live in two sessions' graphs, but no edge joins them.
    conn.execute("INSERT INTO entities (id, session_id, name, name_key, type, created_at)"
                 " VALUES (20, 2, 'only a', 'only a', 'concept', 0)")  # fmt: skip
    with pytest.raises(sqlite3.IntegrityError, match="different graphs"):
        conn.execute("INSERT INTO relationships (from_id, to_id, label, created_at, valid_at)"
                     " VALUES (1, 20, 'leak', 0, 0)")  # fmt: skip
    # Deleting an entity still cascades to its edges and links.
    conn.execute("DELETE FROM entities WHERE id = 1")
    assert conn.execute("SELECT COUNT(*) FROM relationships").fetchone()[0] == 0


def test_the_graph_migration_reindexes_every_entity(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, 3)
    conn.execute("INSERT INTO entities (id, project_id, name, type, created_at)"
                 " VALUES (1, 7, 'a', 'concept', 0), (2, 0, 'b', 'concept', 0)")  # fmt: skip
    migrations.migrate(conn)
    queued = conn.execute("SELECT target_id FROM jobs WHERE kind = 'index:entities'"
                          " AND state = 'pending' ORDER BY target_id").fetchall()  # fmt: skip
    assert queued == [(1,), (2,)]


def test_existing_data_moves_into_the_default_tenant_the_operator_names(tmp_path):
    """Migration 8: every row written before tenants belongs to --default-tenant."""
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, 5)
    conn.executescript(
        """
        INSERT INTO projects (id, name, created_at, updated_at) VALUES (1, 'p', 0, 0);
        INSERT INTO sessions (id, external_id, project_id, created_at) VALUES (1, 'e1', 1, 0);
        INSERT INTO sessions (id, external_id, created_at) VALUES (7, 'e7', 0);
        DELETE FROM sessions WHERE id = 7;
        INSERT INTO episodes (session_id, user_message, ai_response, created_at)
            VALUES (1, 'hello', 'hi', 0);
        INSERT INTO memories (kind, title, content, tier, user_id, request_id, created_at,
            updated_at) VALUES (2, 't', 'c', 3, 'alice', 'r1', 0, 0);
        INSERT INTO entities (project_id, name, type, created_at) VALUES (1, 'a', 'concept', 0);
        INSERT INTO extraction_events (episode_id, session_id, project_id, status, created_at)
            VALUES (1, 1, 1, 1, 0);
        """
    )
    assert migrations.migrate(conn, default_tenant="acme") == migrations.LATEST_VERSION
    for table in ("projects", "sessions", "memories", "entities", "extraction_events"):
        assert conn.execute(f"SELECT DISTINCT tenant FROM {table}").fetchall() == [("acme",)]
    # The rebuilt sessions table keeps its rows, its links and its id high-water mark:
    # a deleted session's id is never handed out again.
    assert conn.execute("SELECT id, project_id FROM sessions").fetchall() == [(1, 1)]
    assert conn.execute("SELECT session_id FROM episodes").fetchall() == [(1,)]
    conn.execute("INSERT INTO sessions (tenant, external_id, created_at) VALUES ('b', 'e1', 0)")
    assert conn.execute("SELECT MAX(id) FROM sessions").fetchone()[0] == 8
    # External ids and memory request ids are unique per tenant (and user), not globally.
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO sessions (tenant, external_id, created_at) VALUES ('b', 'e1', 0)")
    conn.execute(
        "INSERT INTO memories (kind, title, content, tier, user_id, request_id, created_at,"
        " updated_at, tenant) VALUES (2, 't', 'c', 3, 'bob', 'r1', 0, 0, 'acme')"
    )
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_episode_time_migration_keeps_each_time_and_reindexes_every_episode(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, 8)
    conn.execute(
        "INSERT INTO sessions (id, tenant, external_id, created_at) VALUES (1, 't', 'x', 0)"
    )
    conn.execute("INSERT INTO episodes (id, session_id, user_message, ai_response, created_at)"
                 " VALUES (1, 1, 'a', 'b', 100.5), (2, 1, 'c', 'd', 200.25)")  # fmt: skip
    migrations.migrate(conn)
    # An existing episode happened when it was stored.
    times = conn.execute("SELECT id, occur_at FROM episodes ORDER BY id").fetchall()
    assert times == [(1, 100.5), (2, 200.25)]
    queued = conn.execute("SELECT target_id FROM jobs WHERE kind = 'index:episodes'"
                          " AND state = 'pending' ORDER BY target_id").fetchall()  # fmt: skip
    assert queued == [(1,), (2,)]


def _legacy_graph(conn) -> None:
    """A graph as version 13 held it: exact names, edges with episode links."""
    conn.execute("INSERT INTO sessions (id, external_id, created_at) VALUES (1, 'a', 0)")
    conn.execute(
        "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at, occur_at)"
        " VALUES (1, 1, 'x', '', 0, 100), (2, 1, 'y', '', 0, 200)"
    )
    conn.execute(
        "INSERT INTO entities (id, session_id, name, type, created_at)"
        " VALUES (1, 1, 'Priya', 'person', 0), (2, 1, 'Priya''s', 'person', 0),"
        " (3, 1, 'Lisbon', 'place', 0)"
    )
    conn.execute(
        "INSERT INTO relationships (id, from_id, to_id, label, mention_count, created_at)"
        " VALUES (5, 1, 3, 'lives_in', 3, 50)"
    )
    conn.execute("INSERT INTO relationship_episodes VALUES (5, 1), (5, 2)")


def test_the_graph_keeps_its_entities_and_edges_through_resolution_and_time(tmp_path):
    """Migration 14: keys, aliases and words for every entity; each edge an
    interval from its first evidence, its mentions kept as evidence."""
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    _migrate_to(conn, 13)
    _legacy_graph(conn)
    migrations.migrate(conn)
    keys = conn.execute("SELECT id, name, name_key FROM entities ORDER BY id").fetchall()
    # Two names of one key stay two entities: merging is an operator's call.
    assert keys == [(1, "Priya", "priya"), (2, "Priya's", "priya#2"), (3, "Lisbon", "lisbon")]
    aliases = conn.execute("SELECT entity_id, norm FROM entity_aliases ORDER BY id").fetchall()
    assert aliases == [(1, "priya"), (2, "priya"), (3, "lisbon")]
    assert conn.execute("SELECT COUNT(*) FROM entity_tokens").fetchone()[0] == 3
    evidence = conn.execute(
        "SELECT at, episode_id, mentions FROM relationship_evidence ORDER BY at"
    ).fetchall()
    assert evidence == [(50.0, None, 1), (100.0, 1, 1), (200.0, 2, 1)]
    edge = conn.execute(
        "SELECT id, mention_count, valid_at, invalid_at, asserted_by FROM relationships"
    ).fetchall()
    assert edge == [(5, 3, 50.0, None, None)]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    queued = conn.execute(
        "SELECT COUNT(*) FROM jobs WHERE kind = 'index:entities' AND state = 'pending'"
    ).fetchone()[0]
    assert queued == 3  # entity vectors now carry their aliases


async def test_postgresql_migrates_a_legacy_graph_the_same_way(pg_empty_url):
    import psycopg

    from nexus_grpc.store.postgres import migrations as pg_schema
    from tests import pg

    with psycopg.connect(pg_empty_url, autocommit=True) as raw:
        pg.restore_version_1(raw)
        pg_schema.migrate(raw, upto=3)
        for statement in (
            "INSERT INTO sessions (id, external_id, created_at, tenant) VALUES (1, 'a', 0, 't')",
            "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at,"
            " occur_at) VALUES (1, 1, 'x', '', 0, 100), (2, 1, 'y', '', 0, 200)",
            "INSERT INTO entities (id, session_id, name, type, created_at)"
            " VALUES (1, 1, 'Priya', 'person', 0), (2, 1, 'Priya''s', 'person', 0),"
            " (3, 1, 'Lisbon', 'place', 0)",
            "INSERT INTO relationships (id, from_id, to_id, label, mention_count, created_at)"
            " VALUES (5, 1, 3, 'lives_in', 3, 50)",
            "INSERT INTO relationship_episodes VALUES (5, 1), (5, 2)",
        ):
            raw.execute(statement)
        assert pg_schema.migrate(raw) == pg_schema.LATEST_VERSION
        keys = raw.execute("SELECT id, name_key FROM entities ORDER BY id").fetchall()
        assert keys == [(1, "priya"), (2, "priya#2"), (3, "lisbon")]
        norms = raw.execute("SELECT entity_id, norm FROM entity_aliases ORDER BY id").fetchall()
        assert norms == [(1, "priya"), (2, "priya"), (3, "lisbon")]
        evidence = raw.execute(
            "SELECT at, episode_id, mentions FROM relationship_evidence ORDER BY at"
        ).fetchall()
        assert evidence == [(50.0, None, 1), (100.0, 1, 1), (200.0, 2, 1)]
        edge = raw.execute(
            "SELECT id, mention_count, valid_at, invalid_at FROM relationships"
        ).fetchall()
        assert edge == [(5, 3, 50.0, None)]
        # Running it again changes nothing.
        assert pg_schema.migrate(raw) == pg_schema.LATEST_VERSION


# Rows of every kind of job target, each of its own tenant, and a job of every
# kind queued before jobs carried a tenant (schema_changes.JOB_TENANTS).
_QUEUED_BEFORE_TENANTS = [
    "INSERT INTO projects (id, name, created_at, updated_at, tenant)"
    " VALUES (1, 'p', 0, 0, 'of-project')",
    "INSERT INTO sessions (id, external_id, created_at, tenant) VALUES (1, 'a', 0, 'of-session')",
    "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at)"
    " VALUES (1, 1, 'x', '', 0)",
    "INSERT INTO summaries (id, project_id, content, created_at, updated_at)"
    " VALUES (1, 1, 'overview', 0, 0)",
    "INSERT INTO memories (id, kind, title, content, tier, created_at, updated_at, tenant)"
    " VALUES (1, 1, 't', 'c', 3, 0, 0, 'of-memory')",
    "INSERT INTO entities (id, name, name_key, type, created_at, tenant)"
    " VALUES (1, 'Atlas', 'atlas', 'project', 0, 'of-entity')",
    "INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at) VALUES"
    " ('index:episodes', 1, 0, 0, 0), ('extract:episode', 1, 0, 0, 0),"
    " ('form:memories', 1, 0, 0, 0), ('summarize:session', 1, 0, 0, 0),"
    " ('index:summaries', 1, 0, 0, 0), ('index:memories', 1, 0, 0, 0),"
    " ('expire:memory', 1, 0, 0, 0), ('purge:memory_history', 1, 0, 0, 0),"
    " ('index:entities', 1, 0, 0, 0), ('resolve:entity', 1, 0, 0, 0),"
    " ('retain:project', 1, 0, 0, 0), ('index:episodes', 99, 0, 0, 0)",
]
_TENANTS_TAKEN = [
    ("expire:memory", 1, "of-memory"),
    ("extract:episode", 1, "of-session"),
    ("form:memories", 1, "of-session"),
    ("index:entities", 1, "of-entity"),
    ("index:episodes", 1, "of-session"),
    ("index:episodes", 99, ""),  # its episode is gone
    ("index:memories", 1, "of-memory"),
    ("index:summaries", 1, "of-project"),
    ("purge:memory_history", 1, "of-memory"),
    ("resolve:entity", 1, "of-entity"),
    ("retain:project", 1, "of-project"),
    ("summarize:session", 1, "of-session"),
]


def test_jobs_queued_before_tenants_take_their_targets_tenant(tmp_path):
    """A backlog an upgrade finds takes turns by its targets' tenants, as new
    jobs do."""
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, migrations.MIGRATIONS.index(schema_changes.JOB_TENANTS))
    for statement in _QUEUED_BEFORE_TENANTS:
        conn.execute(statement)
    migrations.migrate(conn)
    rows = conn.execute("SELECT kind, target_id, tenant FROM jobs ORDER BY kind, target_id")
    assert rows.fetchall() == _TENANTS_TAKEN
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_postgresql_jobs_queued_before_tenants_take_their_targets_tenant(pg_empty_url):
    import psycopg

    from nexus_grpc.store.postgres import migrations as pg_schema
    from tests import pg

    with psycopg.connect(pg_empty_url, autocommit=True) as raw:
        pg.restore_version_1(raw)
        pg_schema.migrate(raw, upto=pg_schema.MIGRATIONS.index((schema_changes.JOB_TENANTS,)))
        for statement in _QUEUED_BEFORE_TENANTS:
            raw.execute(statement)
        assert pg_schema.migrate(raw) == pg_schema.LATEST_VERSION
        rows = raw.execute("SELECT kind, target_id, tenant FROM jobs ORDER BY kind, target_id")
        assert rows.fetchall() == _TENANTS_TAKEN


# Projects as an older build let them be named: "quickstart" three times in one
# tenant (one of its later projects already called "quickstart (2)"), once in
# another tenant, and "demo" twice.
_REPEATED_NAMES = [
    "INSERT INTO projects (id, name, created_at, updated_at, tenant) VALUES"
    " (1, 'quickstart', 0, 0, 'a'), (2, 'quickstart', 0, 0, 'a'), (3, 'demo', 0, 0, 'a'),"
    " (4, 'quickstart', 0, 0, 'b'), (5, 'quickstart', 0, 0, 'a'),"
    " (6, 'quickstart (2)', 0, 0, 'a'), (7, 'demo', 0, 0, 'a')",
]
_RENAMED = [
    (1, "a", "quickstart"),
    (2, "a", "quickstart (3)"),  # "quickstart (2)" is project 6's own name
    (3, "a", "demo"),
    (4, "b", "quickstart"),  # another tenant's: not a repeat
    (5, "a", "quickstart (4)"),
    (6, "a", "quickstart (2)"),
    (7, "a", "demo (2)"),
]


def test_repeated_project_names_take_a_suffix_and_a_name_is_then_unique(tmp_path):
    """The oldest project of a name keeps it; each later one of its tenant
    takes the first free "name (n)", and the unique index then holds."""
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, migrations.MIGRATIONS.index(schema_changes.UNIQUE_PROJECT_NAMES))
    for statement in _REPEATED_NAMES:
        conn.execute(statement)
    assert migrations.migrate(conn) == migrations.LATEST_VERSION
    rows = conn.execute("SELECT id, tenant, name FROM projects ORDER BY id").fetchall()
    assert rows == _RENAMED
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO projects (name, created_at, updated_at, tenant)"
            " VALUES ('demo', 0, 0, 'a')"
        )
    conn.execute(
        "INSERT INTO projects (name, created_at, updated_at, tenant) VALUES ('demo', 0, 0, 'b')"
    )


async def test_postgresql_repeated_project_names_take_the_same_suffixes(pg_empty_url):
    import psycopg

    from nexus_grpc.store.postgres import migrations as pg_schema
    from tests import pg

    with psycopg.connect(pg_empty_url, autocommit=True) as raw:
        pg.restore_version_1(raw)
        before = pg_schema.MIGRATIONS.index((schema_changes.UNIQUE_PROJECT_NAMES,))
        pg_schema.migrate(raw, upto=before)
        for statement in _REPEATED_NAMES:
            raw.execute(statement)
        assert pg_schema.migrate(raw) == pg_schema.LATEST_VERSION
        rows = raw.execute("SELECT id, tenant, name FROM projects ORDER BY id").fetchall()
        assert rows == _RENAMED
        with pytest.raises(psycopg.errors.UniqueViolation):
            raw.execute(
                "INSERT INTO projects (name, created_at, updated_at, tenant)"
                " VALUES ('demo', 0, 0, 'a')"
            )


# Memories stored before their points carried a tenant (schema_changes.MEMORY_POINT_TENANTS).
_MEMORIES_BEFORE_POINT_TENANTS = [
    "INSERT INTO memories (id, kind, title, content, tier, created_at, updated_at, tenant)"
    f" VALUES ({i}, 2, 't', 'c', 3, 0, 0, '{tenant}')"
    for i, tenant in ((1, "a"), (2, "b"), (3, "a"))
]
_MEMORIES_REINDEXED = [
    ("index:memories", 1, "a", jobs.BULK, "pending"),
    ("index:memories", 2, "b", jobs.BULK, "pending"),
    ("index:memories", 3, "a", jobs.BULK, "pending"),
]


def test_every_memory_is_indexed_again_so_its_point_carries_its_tenant(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, migrations.MIGRATIONS.index(schema_changes.MEMORY_POINT_TENANTS))
    for statement in _MEMORIES_BEFORE_POINT_TENANTS:
        conn.execute(statement)
    migrations.migrate(conn)
    rows = conn.execute(
        "SELECT kind, target_id, tenant, priority, state FROM jobs ORDER BY target_id"
    )
    assert rows.fetchall() == _MEMORIES_REINDEXED
    # Due now, as a job queued at the upgrade would be.
    due = conn.execute("SELECT MIN(run_after) FROM jobs").fetchone()[0]
    assert abs(due - time.time()) < 60


async def test_postgresql_indexes_every_memory_again_for_its_tenant(pg_empty_url):
    import psycopg

    from nexus_grpc.store.postgres import migrations as pg_schema
    from tests import pg

    with psycopg.connect(pg_empty_url, autocommit=True) as raw:
        pg.restore_version_1(raw)
        pg_schema.migrate(
            raw, upto=pg_schema.MIGRATIONS.index((schema_changes.MEMORY_POINT_TENANTS,))
        )
        for statement in _MEMORIES_BEFORE_POINT_TENANTS:
            raw.execute(statement)
        assert pg_schema.migrate(raw) == pg_schema.LATEST_VERSION
        rows = raw.execute(
            "SELECT kind, target_id, tenant, priority, state FROM jobs ORDER BY target_id"
        )
        assert rows.fetchall() == _MEMORIES_REINDEXED
        due = raw.execute("SELECT MIN(run_after) FROM jobs").fetchone()[0]
        assert abs(due - time.time()) < 60


def test_sessions_count_the_episodes_they_held_before_the_upgrade(tmp_path):
    conn = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    _migrate_to(conn, migrations.MIGRATIONS.index(schema_changes.SESSION_EPISODE_COUNTS))
    conn.execute(
        "INSERT INTO sessions (id, external_id, created_at) VALUES (1, 'a', 0), (2, 'b', 0)"
    )
    conn.executemany(
        "INSERT INTO episodes (session_id, user_message, ai_response, created_at)"
        " VALUES (?, 'x', '', 0)",
        [(1,), (1,), (1,)],
    )
    migrations.migrate(conn)
    counted = "SELECT id, episode_count FROM sessions ORDER BY id"
    assert conn.execute(counted).fetchall() == [(1, 3), (2, 0)]
    # And the triggers keep them so from then on.
    conn.execute("INSERT INTO episodes (session_id, user_message, ai_response, created_at)"
                 " VALUES (2, 'y', '', 0)")  # fmt: skip
    conn.execute("DELETE FROM episodes WHERE id = 1")
    assert conn.execute(counted).fetchall() == [(1, 2), (2, 1)]
