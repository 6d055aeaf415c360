"""The shared server launcher against the real ``nexus-grpc serve``."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nexus_grpc.loadtest.launcher import ServerProcess, StartError


def test_start_returns_a_serving_server_and_terminate_stops_it(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        assert server.port > 0 and server.startup_s > 0
        with grpc.insecure_channel(server.target) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        assert server.cpu_seconds() > 0 and server.rss_mb()["VmRSS"] > 0
    finally:
        code = server.terminate() if server.running() else None
    assert code == 0, server.log_tail()
    assert not server.running()


def test_a_server_that_cannot_start_is_a_start_error_with_its_log(tmp_path):
    with pytest.raises(StartError) as err:
        ServerProcess(tmp_path / "data", "--log-format", "xml").start()
    assert "--log-format" in str(err.value)


def test_a_server_that_keeps_no_log_holds_only_its_latest_lines(tmp_path):
    # A benchmark's access log is one line a call: the client must not keep them all.
    servers = {
        keep: ServerProcess(tmp_path / str(keep), keep_log=keep).start() for keep in (True, False)
    }
    try:
        for server in servers.values():
            with grpc.insecure_channel(server.target) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                for _ in range(500):
                    health.Check(health_pb2.HealthCheckRequest(), timeout=5)
        for server in servers.values():
            assert server.terminate() == 0  # and its last lines are read
    finally:
        for server in servers.values():
            server.kill()
    kept, trimmed = servers[True].log, servers[False].log
    assert sum("Check OK" in line for line in kept) >= 500  # every call's access line
    assert 0 < len(trimmed) <= 400
    assert "stopped" in trimmed[-1]  # the latest lines are the ones kept
