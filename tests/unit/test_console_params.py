"""A console page's query string (console/params.py and the checks of
console/reads.py), with no server: a bad value is the person's typo, refused
naming the parameter and what is wrong with it before any call to the server.

Each page's read is given a client that fails the test if it is asked
anything. The same inputs as the whole-console tests; the status each
refusal answers (400, as JSON and as a page) and the refusals the server
decides (an unknown project, episode or memory; entity search's one mode,
refused once the project is read) stay in tests/e2e/console/test_console_app.py
and test_console_usage.py."""

from __future__ import annotations

from typing import Any

import pytest

from nexus_grpc.console import reads
from nexus_grpc.console.params import BadRequest, path_id

PROJECT = 7


class Unreached:
    """A console's client that no call may reach."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the server was asked {name} before the query was checked")


async def refusal(read, *args: Any) -> BadRequest:
    with pytest.raises(BadRequest) as refused:
        await read(Unreached(), *args)
    return refused.value


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"as_of": "yesterday"}, "as_of", "as_of: must be an RFC 3339 time"),
        ({"as_of": "2026-01-01T00:00:00Z", "include_history": "1"}, "include_history",
         "include_history"),
        ({"depth": "9"}, "depth", "depth: must be 1, 2 or 3"),
    ],
)  # fmt: skip
async def test_the_graph_page_refuses_a_bad_date_history_with_a_date_and_a_depth(
    params, field, says
):
    refused = await refusal(reads.graph, PROJECT, params)
    assert refused.field == field and says in refused.message


async def test_the_search_page_refuses_a_mode_it_does_not_know():
    refused = await refusal(reads.search, PROJECT, {"q": "x", "mode": "fuzzy"})
    assert refused.field == "mode" and "mode: must be one of" in refused.message


async def test_the_memories_page_refuses_a_flag_that_is_neither_1_nor_0():
    refused = await refusal(reads.memories, PROJECT, {"include_archived": "maybe"})
    assert refused.field == "include_archived" and "include_archived" in refused.message


async def test_the_status_page_refuses_a_window_it_does_not_draw():
    refused = await refusal(reads.status, {"window": "month"})
    assert refused.message == "window: must be one of day, week, got 'month'"


def test_a_project_in_the_path_must_be_a_positive_id():
    with pytest.raises(BadRequest) as refused:
        path_id("abc", "project_id")
    assert refused.value.field == "project_id"
    assert "project_id: must be a positive id" in refused.value.message
