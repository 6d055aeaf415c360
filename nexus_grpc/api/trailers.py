"""The ``x-nexus-*`` trailers: what an answer says beside its messages.

A stream that ends with no message, or a unary answer that is a list, has
nowhere else to say why it is what it is; trailing metadata reaches every
client (grpcurl prints it with ``-v``; the typed clients and the MCP tools
read it). Each is documented in the README:

- ``x-nexus-degraded``: the answer is less than the whole search (the
  semantic path down, the reranker slow or failing) or selection (ranked by
  semantic similarity: no model, a failing one, a spent budget); the hits
  say so too, and an empty answer only here.
- ``x-nexus-empty-reason``: why a list, search or selection came back empty
  when the server knows (``CODE: sentence``, the code one of
  ``domain/empty_answers.py``'s).
- ``x-nexus-selection-method``: how SelectMemories chose (``llm`` or
  ``semantic``), sent even when it selected nothing.
- ``x-nexus-existing``: CreateMemory answered with a memory already there
  (the same words in the same tier and owner) and stored nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from nexus_grpc.core.redact import scrub

DEGRADED = "x-nexus-degraded"
EMPTY_REASON = "x-nexus-empty-reason"
SELECTION_METHOD = "x-nexus-selection-method"
EXISTING = "x-nexus-existing"

#: Metadata values travel as HTTP/2 headers: printable ASCII, and kept short.
MAX_CHARS = 500


def add(context: grpc.aio.ServicerContext, key: str, text: str) -> None:
    """Sets the trailer ``key`` to ``text`` beside those already set (the
    interceptor's x-request-id, another x-nexus-* trailer): a call's trailing
    metadata is replaced as a whole, so the others are carried over."""
    shown = " ".join(scrub(text).encode("ascii", "replace").decode().split())[:MAX_CHARS]
    kept = [(k, v) for k, v in (context.trailing_metadata() or ()) if k != key]
    context.set_trailing_metadata((*kept, (key, shown)))


def reporter(context: grpc.aio.ServicerContext, key: str) -> Callable[[str], None]:
    """A callback for the domain that sets the trailer ``key``."""
    return lambda text: add(context, key, text)
