"""The schema is declared once (store/schema.py): a new database is built
from the declaration, an older one is upgraded through the history and the
declared changes, and both end holding the same thing, on both stores."""

from __future__ import annotations

import sqlite3

from nexus_grpc.store import schema
from nexus_grpc.store.postgres import migrations as postgres_migrations
from nexus_grpc.store.sqlite import migrations as sqlite_migrations
from tests.integration.store.schema_shape import postgres_shape, sqlite_shape


def _sqlite(path, **kwargs) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_migrations.migrate(conn, **kwargs)
    return conn


def test_a_new_sqlite_database_holds_what_an_upgraded_one_holds(tmp_path):
    new = _sqlite(tmp_path / "new.sqlite3")
    upgraded = _sqlite(tmp_path / "old.sqlite3", upto=sqlite_migrations.LATEST_VERSION)
    assert sqlite_shape(new) == sqlite_shape(upgraded)
    for table in ("episodes_fts", "memories_fts"):
        config = f"SELECT k, v FROM {table}_config ORDER BY k"
        assert new.execute(config).fetchall() == upgraded.execute(config).fetchall()
    version = "PRAGMA user_version"
    assert new.execute(version).fetchone() == upgraded.execute(version).fetchone()


def test_an_upgrade_from_any_sqlite_version_ends_in_the_declared_schema(tmp_path):
    latest = sqlite_shape(_sqlite(tmp_path / "new.sqlite3"))
    for version in range(1, sqlite_migrations.LATEST_VERSION):
        conn = _sqlite(tmp_path / f"v{version}.sqlite3", upto=version)
        assert sqlite_migrations.migrate(conn) == sqlite_migrations.LATEST_VERSION
        assert sqlite_shape(conn) == latest, f"from version {version}"


async def test_a_new_postgresql_database_holds_what_an_upgraded_one_holds():
    import psycopg

    from tests import pg

    new_url, old_url = pg.new_database(migrated=False), pg.new_database(migrated=False)
    try:
        with (
            psycopg.connect(new_url, autocommit=True) as new,
            psycopg.connect(old_url, autocommit=True) as old,
        ):
            assert postgres_migrations.migrate(new) == postgres_migrations.LATEST_VERSION
            pg.restore_version_1(old)
            assert postgres_migrations.migrate(old) == postgres_migrations.LATEST_VERSION
            assert postgres_shape(new) == postgres_shape(old)
    finally:
        pg.drop_database(new_url)
        pg.drop_database(old_url)


def _declared(backend: str) -> dict[str, set[str]]:
    return {t.name: {c.name for c in schema.columns_of(t.name, backend)} for t in schema.TABLES}


def test_both_stores_hold_the_declaration_and_differ_only_where_it_says(tmp_path, pg_url):
    import psycopg

    lite = sqlite_shape(_sqlite(tmp_path / "db.sqlite3"))["tables"]
    with psycopg.connect(pg_url) as conn:
        post = postgres_shape(conn)["tables"]
    assert {t: set(s["columns"]) for t, s in lite.items()} == _declared("sqlite")
    assert {t: set(s["columns"]) for t, s in post.items()} == _declared("postgres")
    for name, table in lite.items():
        other = post[name]
        # Each holds what is declared for it (above); what both hold is alike.
        shared = set(table["columns"]) & set(other["columns"])
        assert {c: v for c, v in table["columns"].items() if c in shared} == {
            c: v for c, v in other["columns"].items() if c in shared
        }, name
        assert (table["key"], table["foreign"]) == (other["key"], other["foreign"]), name
        # PostgreSQL's keyword index is a GIN index on its tsvector column.
        assert table["indexes"] == [i for i in other["indexes"] if i[0] != ("fts",)], name


def test_a_column_the_declaration_keeps_for_one_store_is_only_there():
    lease = schema.table("jobs").column("lease_until")
    assert lease.only == "postgres"
    assert "lease_until" not in _declared("sqlite")["jobs"]
    assert "lease_until" in _declared("postgres")["jobs"]


def _declared_indexes() -> set[str]:
    return {i.name for t in schema.TABLES for i in t.indexes}


def _retired_indexes() -> set[str]:
    return {i.name for _, i in schema.RETIRED_INDEXES}


def _sqlite_index_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_every_declared_index_is_in_a_new_and_an_upgraded_sqlite_database_by_name(tmp_path):
    """Compared with each other, a new and an upgraded database can lose the
    same index together (one renderer builds both); compared with the
    declaration by name, neither can."""
    declared = _declared_indexes()
    assert "idx_llm_calls_day" in declared and "idx_jobs_lanes" in declared
    new = _sqlite_index_names(_sqlite(tmp_path / "new.sqlite3"))
    upgraded = _sqlite_index_names(
        _sqlite(tmp_path / "old.sqlite3", upto=sqlite_migrations.LATEST_VERSION)
    )
    for found in (new, upgraded):
        assert declared - found == set()
        assert found & _retired_indexes() == set()


async def test_every_declared_index_is_in_a_new_and_an_upgraded_postgresql_database_by_name():
    import psycopg

    from tests import pg

    def names(conn) -> set[str]:
        return {
            r[0]
            for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
        }

    new_url, old_url = pg.new_database(migrated=False), pg.new_database(migrated=False)
    try:
        with (
            psycopg.connect(new_url, autocommit=True) as new,
            psycopg.connect(old_url, autocommit=True) as old,
        ):
            postgres_migrations.migrate(new)
            pg.restore_version_1(old)
            postgres_migrations.migrate(old)
            for found in (names(new), names(old)):
                assert _declared_indexes() - found == set()
                assert found & _retired_indexes() == set()
    finally:
        pg.drop_database(new_url)
        pg.drop_database(old_url)
