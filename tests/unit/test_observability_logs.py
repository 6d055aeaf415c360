"""What the log setup writes (observability/logs.py), on an in-memory stream:
httpx's line per request is DEBUG (hidden at INFO, shown at DEBUG, its
warnings kept as they are), and a URL's password is masked in either format,
in the message and in the traceback alike.

The control characters a client sends are in tests/unit/test_api_log_lines.py;
the writer thread (a stuck stderr, the request id, a full queue) in
tests/unit/test_server_runtime.py."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from nexus_grpc.observability import logs

SECRET_URL = "postgresql://nexus:pg-s3cret-pass@db.lan:5432/nexus"


@pytest.fixture(autouse=True)
def root_logger_kept() -> Iterator[None]:
    """logs.configure replaces the root logger's handlers and level: the rest
    of the process gets them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    logs.stop()
    root.handlers[:] = handlers
    root.setLevel(level)


def written(level: str, fmt: str, emit) -> str:
    out = io.StringIO()
    logs.configure(level, fmt, stream=out)
    try:
        emit()
    finally:
        logs.stop()  # writes out what is queued
    return out.getvalue()


def test_httpx_request_lines_are_debug_hidden_at_info():
    text = written("INFO", "text", lambda: logging.getLogger("httpx").info("HTTP Request: POST"))
    assert text == ""


def test_httpx_request_lines_show_as_debug_at_debug():
    text = written("DEBUG", "text", lambda: logging.getLogger("httpx").info("HTTP Request: POST"))
    assert " DEBUG httpx " in text and "HTTP Request: POST" in text


def test_httpx_warnings_stay_warnings():
    def emit() -> None:
        logging.getLogger("httpx").warning("connection pool full")

    [entry] = [json.loads(line) for line in written("INFO", "json", emit).splitlines()]
    assert (entry["level"], entry["logger"], entry["msg"]) == (
        "WARNING",
        "httpx",
        "connection pool full",
    )


def test_other_loggers_info_lines_are_kept_at_info():
    text = written("INFO", "text", lambda: logging.getLogger("nexus_grpc.x").info("started"))
    assert " INFO nexus_grpc.x " in text


def _fails_quoting_a_url() -> None:
    try:
        raise ConnectionError(f"cannot reach {SECRET_URL}")
    except ConnectionError:
        logging.getLogger("nexus_grpc.x").exception("store down: %s", SECRET_URL)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_urls_password_is_masked_in_the_message_and_the_traceback(fmt):
    out = written("INFO", fmt, _fails_quoting_a_url)
    assert "pg-s3cret-pass" not in out
    assert "db.lan" in out  # the URL is still told apart, only its secret masked
    if fmt == "json":
        [entry] = [json.loads(line) for line in out.splitlines()]
        assert "db.lan" in entry["msg"] and "ConnectionError: cannot reach" in entry["exc"]
    else:
        assert out.count("db.lan") == 2  # the message and the traceback's line


def test_a_json_record_formatted_with_its_exception_keeps_it_masked():
    """The formatter alone, given a record whose traceback was not rendered on the
    caller's side."""
    try:
        raise ConnectionError(f"cannot reach {SECRET_URL}")
    except ConnectionError:
        record = logging.getLogger("nexus_grpc.x").makeRecord(
            "nexus_grpc.x", logging.ERROR, __file__, 1, "down", (), sys.exc_info()
        )
    entry = json.loads(logs._JsonFormatter().format(record))
    assert entry["request_id"] == "-"
    assert "ConnectionError" in entry["exc"] and "pg-s3cret-pass" not in entry["exc"]
