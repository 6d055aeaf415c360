"""Whether ``nexus-grpc console`` asks for a login, and with which token
(console/serve.py's guard_settings and read_token): none on loopback, a fresh
one printed beyond it, the file's first line wherever a file is given, and a
file that cannot serve refused saying what to do. Reading the token file is
the function's own job, so the files are written under tmp_path.

Binding the socket and serving stay whole-server (tests/e2e/console/)."""

from __future__ import annotations

import pytest

from nexus_grpc.console.options import parse_listen
from nexus_grpc.console.serve import (
    MIN_TOKEN_CHARS,
    ConsoleConfigError,
    guard_settings,
    read_token,
)


def test_on_loopback_no_login_is_asked_and_beyond_it_a_fresh_token_each_start():
    loopback = guard_settings(parse_listen("127.0.0.1:8090"), 8090, "")
    assert loopback.loopback and loopback.login_token is None
    anywhere = parse_listen("0.0.0.0:8090")
    first, second = guard_settings(anywhere, 8090, ""), guard_settings(anywhere, 8090, "")
    assert not first.loopback and first.host == "0.0.0.0" and first.port == 8090
    assert first.login_token and len(first.login_token) >= MIN_TOKEN_CHARS
    assert first.login_token != second.login_token


def test_a_token_file_is_its_first_line_and_asks_for_a_login_on_loopback_too(tmp_path):
    path = tmp_path / "token"
    path.write_text("  a-token-of-enough-characters  \nthe rest is not read\n")
    settings = guard_settings(parse_listen("127.0.0.1:0"), 41234, str(path))
    assert settings.login_token == "a-token-of-enough-characters"
    assert settings.loopback and settings.port == 41234  # the port bound, not 0


def test_a_token_file_too_short_or_missing_is_refused_saying_what_to_do(tmp_path):
    short = tmp_path / "short"
    short.write_text("x" * (MIN_TOKEN_CHARS - 1) + "\n" + "y" * 40)
    with pytest.raises(ConsoleConfigError) as refused:
        read_token(str(short))
    assert f"its first line must hold a token of at least {MIN_TOKEN_CHARS} characters" in str(
        refused.value
    )
    assert "openssl rand -hex 32" in str(refused.value)
    with pytest.raises(ConsoleConfigError, match="--console-token-file: .*missing"):
        read_token(str(tmp_path / "missing"))
