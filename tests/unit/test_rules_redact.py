"""What core/redact.py takes for a credential and how it keeps one out of a
message: the secrets a configured URL carries (``url_secrets``), which of
them ``remember`` keeps, how ``scrub`` replaces them and masks the URLs in a
text, and the URLs ``mask_url`` cannot read.

How each configured URL reads masked is tests/unit/test_errors_masked_urls.py's;
that no credential of a running server's configuration reaches an answer or
the log is the whole-server tier's: tests/e2e/api/test_credentials.py.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from nexus_grpc.core import redact
from nexus_grpc.core.redact import MASK, mask_url, remember, scrub, url_secrets


@pytest.fixture(autouse=True)
def _no_secret_kept() -> Iterator[None]:
    """Every test starts and ends with nothing remembered (the list is the process's)."""
    redact.forget()
    yield
    redact.forget()


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_a_password_is_a_secret_as_written_and_percent_decoded():
    found = url_secrets("postgresql://nexus:p%40ss@db.lan/nexus")
    assert set(found) == {"p%40ss", "p@ss"}


def test_a_user_beside_a_password_or_a_databases_user_is_not_a_secret():
    # "nexus" is an identity: hunting for it would garble every message naming it.
    assert url_secrets("postgresql://nexus:pw12@db.lan/nexus") == ["pw12"]
    assert url_secrets("postgresql://tok3n@db.lan/nexus") == []
    assert "u" not in url_secrets("http://u:pw12@h/v1")


def test_an_http_user_with_no_password_is_a_token_and_so_is_its_basic_value():
    found = url_secrets("http://TOKEN777@rerank.lan/v1")
    # httpx sends "TOKEN777:" as Basic auth: the colon even without a password.
    assert set(found) == {"TOKEN777", _basic("TOKEN777", "")}


def test_an_http_user_and_password_send_a_basic_value_that_is_a_secret_too():
    found = url_secrets("https://us%40r:p%40ss@llm.lan/v1")
    assert set(found) == {"p%40ss", "p@ss", _basic("us%40r", "p%40ss"), _basic("us@r", "p@ss")}


def test_every_query_value_is_a_secret_but_those_of_the_plain_parameters():
    found = url_secrets(
        "postgresql://db.lan/n?password=pw12&SSLMode=require&connect_timeout=10&code=c0de&sig="
    )
    # The names of PLAIN_PARAMETERS are matched whatever their case; an empty value is no secret.
    assert found == ["pw12", "c0de"]


def test_an_unparseable_url_is_a_secret_whole_and_masked_whole():
    assert url_secrets("http://[::1") == ["http://[::1"]
    assert mask_url("http://[::1") == "<unparseable URL>"
    # A port out of range is found only when the port is read: masked whole too.
    assert mask_url("http://h:99999/v1") == "<unparseable URL>"


def test_no_url_carries_no_secret():
    assert url_secrets("") == []
    assert url_secrets("http://127.0.0.1:11434/api") == []


def test_a_blank_query_value_stays_blank_in_a_masked_url():
    assert mask_url("http://h/p?a=&b=x") == "http://h/p?a=&b=***"


def test_a_remembered_secret_is_replaced_wherever_a_text_quotes_it():
    remember(["hunter22"])
    assert scrub("auth failed for 'hunter22' (hunter22)") == f"auth failed for '{MASK}' ({MASK})"


def test_a_secret_shorter_than_four_characters_is_not_hunted_as_text():
    remember(["abc", "", "abcd"])
    assert scrub("abc and abcd") == f"abc and {MASK}"


def test_a_secret_that_contains_another_is_replaced_whole():
    # Longest first: "key-1234" would otherwise leave "key-" behind.
    remember(["1234", "key-1234"])
    remember(["other"])  # a later call keeps the earlier secrets
    assert scrub("sent key-1234 then 1234 then other") == f"sent {MASK} then {MASK} then {MASK}"


def test_a_url_in_a_text_is_masked_and_the_sentence_keeps_its_punctuation():
    text = "cannot reach (http://u:pw12@h:1/v1?k=s3cret), nor https://h2/x."
    assert scrub(text) == "cannot reach (http://***@h:1/v1?k=***), nor https://h2/x."


def test_an_empty_text_is_left_as_it_is():
    remember(["hunter22"])
    assert scrub("") == ""
    assert mask_url("") == ""


def test_forget_drops_every_remembered_secret():
    remember(["hunter22"])
    redact.forget()
    assert scrub("hunter22") == "hunter22"
