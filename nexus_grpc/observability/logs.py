"""Logging setup: text or JSON lines, each record carrying the request id.

Records are formatted and written by a thread of their own. Every RPC writes
an access line, and a blocking write to stderr (a full pipe, a slow terminal,
a stalled log shipper) made on the event loop would stall every call in
flight; the loop only puts the record on a queue.

Both formats pass every line, traceback included, through
``core.redact.scrub``: a library that quotes a URL with its password (an
HTTP client's request log, a driver's error) does not put it in the log."""

from __future__ import annotations

import atexit
import copy
import json
import logging
import queue
import sys
import time
from logging.handlers import QueueHandler, QueueListener
from typing import TextIO

from nexus_grpc.control_chars import escape_controls
from nexus_grpc.core.redact import scrub
from nexus_grpc.rpc.requests import request_id_var


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class _TextFormatter(logging.Formatter):
    """One record, one line: control characters a caller put into a logged
    value (a name, an id) are escaped, so no request can forge a log entry or
    repaint an operator's terminal. A traceback, appended after the message,
    keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "msg": scrub(record.getMessage()),
        }
        if record.exc_info:
            entry["exc"] = scrub(self.formatException(record.exc_info))
        elif record.exc_text:  # formatted on the caller's side of the queue
            entry["exc"] = scrub(record.exc_text)
        return json.dumps(entry)


#: Records waiting for the writer thread. Past this, new records are dropped
#: and counted rather than let a stuck stderr grow the heap without bound.
QUEUE_LIMIT = 10_000


class _DroppingQueueHandler(QueueHandler):
    """Puts without blocking; when the queue is full, counts the record as lost and
    reports the count with the next record that gets through."""

    def __init__(self, q: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.bounded = q  # self.queue, typed as the bounded Queue it is
        self.dropped = 0

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # Like QueueHandler.prepare, but the traceback stays apart from the message
        # (JSON lines keep it in "exc"). Tracebacks and args are rendered here:
        # they may refer to objects that change once the caller moves on.
        record = copy.copy(record)
        record.msg = record.getMessage()
        record.args = None
        if record.exc_info:
            record.exc_text = _PLAIN.formatException(record.exc_info)
        record.exc_info = None
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        if self.dropped and not self.bounded.full():
            lost, self.dropped = self.dropped, 0
            notice = logging.LogRecord(
                "nexus_grpc.observability.logs",
                logging.WARNING,
                __file__,
                0,
                "%d log records were dropped: the log output could not keep up",
                (lost,),
                None,
            )
            notice.request_id = "-"
            self.bounded.put_nowait(notice)
        try:
            self.bounded.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class _AtDebug(logging.Filter):
    """A library's INFO record written as DEBUG: httpx logs a line for every
    request it sends (each LLM, embedding and rerank call), which is detail
    for whoever debugs, not news for whoever runs the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(record.levelno)


#: Loggers whose INFO records are our DEBUG ones.
_CHATTY = ("httpx",)
_AT_DEBUG = _AtDebug()
_PLAIN = logging.Formatter()
_listener: QueueListener | None = None


def configure(level: str = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Log at ``level`` as text or JSON lines to ``stream`` (stderr by default)."""
    global _listener
    stop()
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(
            _TextFormatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    # The request id lives in a context variable of the calling task: read it
    # on the caller's side of the queue.
    front = _DroppingQueueHandler(queue.Queue(QUEUE_LIMIT))
    front.addFilter(_RequestIdFilter())
    _listener = QueueListener(front.queue, handler)
    _listener.start()
    root = logging.getLogger()
    root.handlers[:] = [front]
    root.setLevel(level.upper())
    for name in _CHATTY:
        logging.getLogger(name).addFilter(_AT_DEBUG)  # once: addFilter keeps one of each


@atexit.register
def stop() -> None:
    """Write out what is queued and stop the writer thread (idempotent)."""
    global _listener
    listener, _listener = _listener, None
    if listener is not None:
        listener.stop()
