"""GetUsage's request checks, as the servicer makes them (api/convert.py's
timestamps, api/usage_convert.py's bucket, then domain/usage_report.py's
UsageReports.get, which refuses before it reads anything): each refusal
names its field and says what is wrong. On the fakes' database; the inputs
and words are those tests/e2e/api/test_get_usage.py sent over the wire (it
keeps one, for the wiring: the status and the BadRequest detail).
"""

from __future__ import annotations

import time

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.api import convert, usage_convert
from nexus_grpc.domain.budgets import Budgets
from nexus_grpc.domain.usage_report import UsageReports
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.fakes import FakeDatabase

HOUR_AGO = int(time.time()) - 3600


async def get_usage(request: memory_pb2.GetUsageRequest) -> None:
    """GetUsage's servicer, less the call and the answer's conversion."""
    db = FakeDatabase()
    await UsageReports(db, Budgets(db), "default").get(
        request.project_id,
        request.tenant,
        convert.time_field(request, "start_time"),
        convert.time_field(request, "end_time"),
        usage_convert.bucket_seconds(request.bucket),
    )


@pytest.mark.parametrize(
    ("request_fields", "fields", "words"),
    [
        ({"project_id": -1}, ["project_id"], "must be a positive id"),
        ({"tenant": "two words"}, ["tenant"], "is not a tenant's name"),
        ({"tenant": "x" * 129}, ["tenant"], "is not a tenant's name"),
        ({"project_id": 1, "tenant": "a"}, ["project_id", "tenant"],
         "give project_id or tenant, not both"),
        (
            {"start_time": Timestamp(seconds=HOUR_AGO), "end_time": Timestamp(seconds=HOUR_AGO)},
            ["start_time", "end_time"],
            "start_time must be earlier than end_time",
        ),
        ({"start_time": Timestamp(seconds=-5)}, ["start_time"], "must not be before 1970"),
        (
            {"start_time": Timestamp(seconds=HOUR_AGO - 2000 * 3600),
             "bucket": memory_pb2.USAGE_BUCKET_HOUR},
            ["start_time"],
            "hour buckets, more than the 1000 one answer holds",
        ),
        ({"bucket": 7}, ["bucket"], "bucket 7 is not a UsageBucket"),
        ({"end_time": Timestamp(seconds=1, nanos=-1)}, ["end_time"], "is not a valid timestamp"),
    ],
)  # fmt: skip
async def test_each_field_is_checked(request_fields, fields, words):
    with pytest.raises(InvalidArgument) as refused:
        await get_usage(memory_pb2.GetUsageRequest(**request_fields))
    assert words in refused.value.message
    violated = [d.field for d in refused.value.details if hasattr(d, "field")]
    assert fields[0] in violated and set(violated) <= set(fields)
