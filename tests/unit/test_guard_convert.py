"""Guards found by a mutation audit of the unit tier: wire rules of
api/convert.py and api/graph_convert.py that no unit test held at their
boundary.

The rest of the conversions are tests/unit/test_convert_wire_values.py's and
tests/unit/test_convert_graph.py's."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.api import convert
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.test_convert_wire_values import BASE, refusal


def test_a_timestamp_of_a_whole_seconds_worth_of_nanos_is_refused():
    """Timestamp's nanos run 0 to 999,999,999: a full second there is malformed."""
    request = memory_pb2.SearchEpisodesRequest(
        end_time=Timestamp(seconds=BASE, nanos=1_000_000_000)
    )
    e = refusal(convert.time_field, request, "end_time")
    assert e.field == "end_time"
