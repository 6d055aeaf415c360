"""The rules the server and its client-side tools share are written once
(issue 48): the characters no name or id may hold, and HOST:PORT as a
serving command's flag takes it."""

from __future__ import annotations

import argparse

import pytest

from nexus_grpc import control_chars, listen_address
from nexus_grpc.console import options as console_options
from nexus_grpc.control_chars import CONTROL_CHARS, escape_controls
from nexus_grpc.domain import validation
from nexus_grpc.integrations.adapter_client import check_label, one_line
from nexus_grpc.listen_address import ListenAddress, parse_listen
from nexus_grpc.mcp import arguments
from nexus_grpc.mcp import options as mcp_options


def test_every_side_checks_the_one_control_character_rule():
    assert validation.CONTROL_CHARS is control_chars.CONTROL_CHARS
    assert arguments.CONTROL_CHARS is control_chars.CONTROL_CHARS
    assert mcp_options.CONTROL_CHARS is control_chars.CONTROL_CHARS


@pytest.mark.parametrize("char", ["\x1b", "\x85", "\u202e", "\u2066", "\u061c", "\u2028"])
def test_a_control_character_is_refused_and_escaped_alike(char):
    assert CONTROL_CHARS.search(f"a{char}b")
    assert "\\" in escape_controls(char)
    with pytest.raises(ValueError, match="control characters"):
        check_label("project", f"a{char}b")
    assert one_line(f"a{char}b") == "a b"


def test_plain_text_passes():
    assert not CONTROL_CHARS.search("Grüße, 東京 — ok")
    assert check_label("project", "Grüße") == "Grüße"


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [("8090", "127.0.0.1", 8090), (":0", "127.0.0.1", 0), ("0.0.0.0:80", "0.0.0.0", 80),
     ("[::1]:5000", "::1", 5000)],
)  # fmt: skip
def test_an_address_reads_the_same_for_both_commands(value, host, port):
    assert parse_listen(value) == ListenAddress(host, port)
    assert console_options.parse_listen is listen_address.parse_listen
    parser = argparse.ArgumentParser()
    mcp_options.add_arguments(parser)
    assert parser.parse_args(["--project", "p", "--http", value]).http == ListenAddress(host, port)


@pytest.mark.parametrize(("value", "message"), [("x:y", "HOST:PORT"), ("1:70000", "0-65535")])
def test_a_bad_address_says_what_is_wrong(value, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_listen(value)


def test_loopback_is_this_machine_only():
    assert ListenAddress("localhost", 1).loopback
    assert ListenAddress("::1", 1).loopback
    assert not ListenAddress("0.0.0.0", 1).loopback
    assert not ListenAddress("example.org", 1).loopback
