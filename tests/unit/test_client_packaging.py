"""What ``pip install nexus-grpc`` brings, read from pyproject.toml: the client's
dependencies alone, the server's in the ``[server]`` extra.

(The client importing and the server refusing to start where only the base is
installed, in a child interpreter: tests/e2e/client/test_light_install.py.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_base_dependencies_are_the_clients_and_the_extra_has_the_servers():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {d.split("=")[0].split(">")[0].split("<")[0] for d in project["dependencies"]}
    # grpcio-status and googleapis-common-protos: the client decodes the
    # google.rpc error details of a refusal.
    assert base == {
        "grpcio", "grpcio-health-checking", "grpcio-status", "googleapis-common-protos",
        "protobuf",
    }  # fmt: skip
    server = " ".join(project["optional-dependencies"]["server"])
    for dist in ("aiosqlite", "qdrant-client", "onnxruntime", "ollama", "grpcio-reflection"):
        assert dist in server
