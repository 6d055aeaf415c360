"""`pip install nexus-grpc` is the client alone; the server is the [server] extra.

Here, in a child interpreter that cannot import the server's dependencies; the
dependency lists of pyproject.toml: tests/unit/test_client_packaging.py."""

from __future__ import annotations

from tests.light_install import run_light


def test_the_client_doctor_and_bench_import_without_the_server_dependencies():
    # Positive control first: the blocker really blocks.
    blocked = run_light("import aiosqlite")
    assert blocked.returncode != 0 and "aiosqlite" in blocked.stderr
    result = run_light(
        "import nexus_grpc.client, nexus_grpc.ops.against_server.doctor\n"
        "import nexus_grpc.ops.against_server.bench\n"
        "c = nexus_grpc.client.NexusClient('127.0.0.1:1')\n"
        "assert c.channel is not None\n"
        "print('client ok')\n"
    )
    assert result.returncode == 0, result.stderr
    assert "client ok" in result.stdout


def test_serve_without_the_server_extra_says_what_to_install(tmp_path):
    result = run_light(
        "import sys\nfrom nexus_grpc.cli import main\nsys.exit(main())",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        str(tmp_path / "data"),
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'nexus-grpc[server]'" in result.stderr
    assert not (tmp_path / "data").exists()
