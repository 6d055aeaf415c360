"""Input checks (domain/validation.py): each refusal names its field and says
what is wrong, and a value that passes comes back as the call will use it."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.core.models import TimeWindow
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import FieldViolation, InvalidArgument


def refusal(fn, *args, **kw) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as err:
        fn(*args, **kw)
    return err.value


def test_text_is_refused_blank_when_required_too_long_or_with_nul():
    assert v.text("memory.content", "", limit=5) == ""
    e = refusal(v.text, "memory.content", " \u200b\ufeff ", limit=50, required=True)
    assert e.field == "memory.content" and "required and must not be blank" in e.message
    e = refusal(v.text, "memory.content", "abcdef", limit=5)
    assert e.message == "memory.content is 6 characters; the limit is 5"
    assert refusal(v.text, "q", "a\x00b", limit=5).message == "q must not contain NUL characters"


@pytest.mark.parametrize("bad", ["line\nforged", "\x1b[2J", "right\u202eleft", "a\u2028b"])
def test_a_name_may_not_carry_what_rewrites_a_screen_or_a_log_line(bad):
    e = refusal(v.name, "memory.title", bad)
    assert e.field == "memory.title" and "must not contain control characters" in e.message
    assert "\\" in e.message  # the character is shown escaped, not acted on
    assert not v.CONTROL_CHARS.search(e.message)
    assert v.name("memory.title", "Zoë's notes — 2024") == "Zoë's notes — 2024"


def test_an_identifier_with_surrounding_spaces_is_refused_not_stripped():
    assert v.identifier("scope.user_id", "bob") == "bob"
    e = refusal(v.identifier, "scope.user_id", "bob ")
    assert e.field == "scope.user_id" and "start or end with whitespace" in e.message
    assert refusal(v.identifier, "x", "a" * (v.MAX_ID_CHARS + 1)).field == "x"


def test_ids_limits_and_queries():
    assert v.positive_id("session_id", 0, required=False) == 0
    assert refusal(v.positive_id, "session_id", 0).field == "session_id"
    assert refusal(v.positive_id, "session_id", -3, required=False).field == "session_id"
    assert v.search_limit(0) == v.DEFAULT_SEARCH_LIMIT
    assert v.search_limit(v.MAX_SEARCH_LIMIT) == v.MAX_SEARCH_LIMIT
    assert refusal(v.search_limit, v.MAX_SEARCH_LIMIT + 1).field == "limit"
    assert refusal(v.search_limit, -1).field == "limit"
    assert v.query("  falcon  ") == "falcon"
    assert refusal(v.query, "   ").field == "query"
    assert refusal(v.query, "q" * (v.MAX_QUERY_CHARS + 1)).field == "query"


def test_metadata_and_external_ids():
    assert v.metadata("memory.metadata", {"a": 1}) == {"a": 1}
    big = {"k": "x" * v.MAX_METADATA_BYTES}
    assert refusal(v.metadata, "memory.metadata", big).field == "memory.metadata"
    upper = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert v.external_id(upper) == upper.lower()  # one spelling per UUID
    assert len(v.external_id("")) == 36  # unset: one is made
    e = refusal(v.external_id, "x" * 500)
    assert e.field == "external_id" and "(500 characters)" in e.message  # quoted, not echoed


def test_an_update_mask_names_known_fields_once():
    assert v.update_mask(["title", "content", "title"], ("title", "content")) == [
        "title",
        "content",
    ]
    e = refusal(v.update_mask, [], ("title",))
    assert e.field == "update_mask" and "at least one of: title" in e.message
    e = refusal(v.update_mask, [f"f{i}" for i in range(7)], ("title",))
    assert "and 2 more" in e.message and "(allowed: title)" in e.message


def test_times_in_the_future_and_backwards_windows_are_refused():
    now = time.time()
    assert v.occur_time("occur_time", None) is None
    assert v.occur_time("occur_time", now - 86400) == now - 86400
    assert v.occur_time("occur_time", now + v.MAX_CLOCK_SKEW_SECONDS / 2) is not None
    e = refusal(v.occur_time, "episode.occur_time", now + 2 * v.MAX_CLOCK_SKEW_SECONDS)
    assert e.field == "episode.occur_time"
    assert v.time_window(TimeWindow()) is None
    window = TimeWindow(start=1.0, end=2.0)
    assert v.time_window(window) is window
    e = refusal(v.time_window, TimeWindow(start=2.0, end=2.0))
    assert {d.field for d in e.details if isinstance(d, FieldViolation)} == {
        "start_time",
        "end_time",
    }


@pytest.mark.parametrize("bad", ["a\x1b[31mred", "two\nlines", "evil\u202etxt.exe", "tab\tname"])
@pytest.mark.parametrize("field", ["project.name", "session.name", "memory.title", "name"])
def test_every_name_field_refuses_control_characters(field, bad):
    """The four values tests/e2e/api/test_small_holes.py sent to each RPC's
    name field (it keeps one, for the wiring): the refusal names the field."""
    e = refusal(v.name, field, bad)
    assert e.field == field
    assert e.message.startswith(f"{field} must not contain control characters")
