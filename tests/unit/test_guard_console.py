"""Guards found by a mutation audit of the unit tier: rules of the console
(console/params.py, console/people.py) that no unit test held.

The rest are tests/unit/test_console_params.py's and
tests/unit/test_console_people.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.console.params import BadRequest, path_id, positive_id
from nexus_grpc.console.people import erasure_view
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.test_console_people import _erasure


def test_zero_is_not_a_positive_id():
    with pytest.raises(BadRequest, match="project_id: must be a positive id, got 0"):
        path_id("0", "project_id")
    assert positive_id({"p": "1"}, "p") == 1
    assert positive_id({}, "p") == 0  # absent and optional: none


def test_a_finished_erasure_is_whole_whatever_its_counts_say():
    """Rows it planned that were gone before it reached them (deleted by
    another call meanwhile) leave its counts short: done is still 100%."""
    done = erasure_view(
        _erasure(memory_pb2.ERASURE_STATE_DONE, {"episodes": 3}, {"episodes": 6, "sessions": 2})
    )
    assert done["finished"] and done["percent"] == 100
