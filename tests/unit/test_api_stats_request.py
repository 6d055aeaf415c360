"""GetProjectStats' request checks (domain/project_stats.py), which refuse
before anything is read: each refusal names its one field. On the fakes'
database; the inputs are those tests/e2e/api/test_project_stats.py sent over
the wire (it keeps one, for the wiring: the status and the BadRequest detail
as the client reads them).
"""

from __future__ import annotations

import pytest

from nexus_grpc.domain.project_stats import ProjectStatistics
from nexus_grpc.errors import FieldViolation, InvalidArgument
from tests.fakes import FakeDatabase


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [({"project_id": 0}, "project_id", "project_id"),
     ({"top_entities": 101}, "top_entities", "top_entities must be 0 to 100, got 101"),
     ({"top_entities": -1}, "top_entities", "top_entities must be 0 to 100, got -1"),
     ({"read_mask": ["episodes", "secrets"]}, "read_mask",
      "read_mask names fields ProjectStats does not have: 'secrets'")],
)  # fmt: skip
async def test_bad_input_is_refused_naming_the_field(fields, field, words):
    request = {"project_id": 1, **fields}
    with pytest.raises(InvalidArgument) as refused:
        await ProjectStatistics(FakeDatabase()).get(**request)
    assert [d.field for d in refused.value.details if isinstance(d, FieldViolation)] == [field]
    assert words in refused.value.message
