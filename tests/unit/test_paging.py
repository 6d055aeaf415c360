"""Page sizes and page tokens (domain/paging.py): a size is clamped, a token
says only which id the next page starts after, and a token this service did
not issue is refused naming ``page_token``."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexus_grpc.domain.paging import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    decode_token,
    encode_token,
    page,
    page_size,
)
from nexus_grpc.errors import InvalidArgument


@dataclass
class Row:
    id: int


def test_an_unset_size_is_the_default_and_a_large_one_the_maximum():
    assert page_size(0) == DEFAULT_PAGE_SIZE
    assert page_size(7) == 7
    assert page_size(MAX_PAGE_SIZE + 1) == MAX_PAGE_SIZE
    with pytest.raises(InvalidArgument, match="must not be negative, got -1") as err:
        page_size(-1)
    assert err.value.field == "page_size"


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_a_token_gives_back_the_id_it_was_made_from(last_id):
    token = encode_token(last_id)
    assert "=" not in token  # unpadded: safe in a URL or a shell
    assert decode_token(token) == last_id


def test_no_token_is_the_first_page():
    assert decode_token("") is None


@pytest.mark.parametrize(
    "token",
    [
        "garbage!",
        base64.urlsafe_b64encode(b"before:5").decode(),  # another prefix
        base64.urlsafe_b64encode(b"after:-1").decode(),  # a negative id
        base64.urlsafe_b64encode(f"after:{2**63}".encode()).decode(),  # past int64
        base64.urlsafe_b64encode(b"after:five").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),  # not UTF-8
    ],
)
def test_a_token_this_service_did_not_issue_is_refused_by_name(token):
    with pytest.raises(InvalidArgument, match="not a token this service issued") as err:
        decode_token(token)
    assert err.value.field == "page_token"


def test_a_page_fetched_with_one_extra_row_says_more_follow():
    rows = [Row(i) for i in (3, 5, 8)]
    full = page(rows, 2)
    assert [r.id for r in full.items] == [3, 5]
    assert decode_token(full.next_token) == 5  # the next page starts after the last shown
    last = page(rows, 3)
    assert [r.id for r in last.items] == [3, 5, 8] and last.next_token == ""
    assert page([], 3).next_token == ""
