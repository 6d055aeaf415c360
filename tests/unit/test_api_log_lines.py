"""A log line cannot be forged by what a client sends (observability/logs.py):
the text format escapes control characters, one record to a line, and the
JSON format keeps the value exact inside its escaping. Called directly on a
stream; moved as it was from tests/e2e/api/test_small_holes.py, which ran it
beside a server it never called."""

from __future__ import annotations

import io
import json
import logging

import pytest

from nexus_grpc.observability import logs


@pytest.fixture(autouse=True)
def root_logger_kept():
    """logs.configure replaces the root logger's handlers and level: the rest
    of the process gets them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_every_text_log_line_escapes_control_characters():
    out = io.StringIO()
    logs.configure("INFO", "text", stream=out)
    try:
        logging.getLogger("nexus_grpc.test").warning(
            "name %s", "ok\x1b[2J\nFAKE 2026 INFO forged line\u202egnp.exe"
        )
    finally:
        logs.stop()
    text = out.getvalue()
    assert text.count("\n") == 1, text  # one record, one line
    assert "\\x1b[2J\\nFAKE" in text and "\\u202e" in text and "\x1b" not in text
    out = io.StringIO()
    logs.configure("INFO", "json", stream=out)
    try:
        logging.getLogger("nexus_grpc.test").warning("name %s", "ok\x1b\n\u202e")
    finally:
        logs.stop()
    [line] = out.getvalue().splitlines()
    assert json.loads(line)["msg"] == "name ok\x1b\n\u202e"  # escaped in transit, exact inside
