"""Guards found by a mutation audit of the unit tier: a rule of the import
(ops/against_server/transfer.py) that no unit test held.

The rest of the import's rules are tests/unit/test_ops_transfer_rules.py's."""

from __future__ import annotations

import time

from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.transfer import _Import


def test_an_expiry_already_past_is_not_sent_again_and_a_future_one_is():
    importer = _Import(client=None, project_id=5)  # type: ignore[arg-type]
    now = int(time.time())
    past = memory_pb2.Memory(title="t", content="c", expire_time=Timestamp(seconds=now - 3600))
    future = memory_pb2.Memory(title="t", content="c", expire_time=Timestamp(seconds=now + 3600))
    assert not importer._memory_values(past, with_expiry=True).HasField("expire_time")
    sent = importer._memory_values(future, with_expiry=True)
    assert sent.expire_time.seconds == now + 3600 and sent.project_id == 5
    assert not importer._memory_values(future, with_expiry=False).HasField("expire_time")
