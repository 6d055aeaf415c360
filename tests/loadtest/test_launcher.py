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
