"""The caller's deadline, carried to every dependency an RPC waits on.

grpc.aio cancels a handler when its deadline passes, which stops our own
work. A dependency on the other end of a socket does not see that: Qdrant
would finish a search and Ollama a generation that nobody will read. So the
interceptor records each call's deadline here, and the clients for Qdrant and
Ollama pass what remains of it on (Qdrant's server-side ``timeout``, the HTTP
timeout to Ollama), or refuse to start a call whose budget is already spent.

Background workers run outside any RPC and see no deadline: their calls use
the configured timeouts alone.
"""

from __future__ import annotations

import contextvars
import time

from nexus_grpc.errors import DeadlineExceeded

# time.monotonic() at which the current RPC's deadline passes; None: no deadline.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "rpc_deadline", default=None
)


def start(time_remaining: float | None) -> contextvars.Token[float | None]:
    """Record the current call's deadline (``context.time_remaining()``)."""
    at = None if time_remaining is None else time.monotonic() + time_remaining
    return _deadline.set(at)


def remaining() -> float | None:
    """Seconds left in the current call, or None outside a call with a deadline."""
    at = _deadline.get()
    return None if at is None else at - time.monotonic()


def budget(limit: float | None, what: str) -> float | None:
    """The time ``what`` may take: our own limit, cut to what the caller has left.

    Raises DeadlineExceeded instead of starting work the caller cannot wait for.
    """
    left = remaining()
    if left is None:
        return limit
    if left <= 0:
        raise DeadlineExceeded(f"the call's deadline passed before {what}")
    return left if limit is None else min(limit, left)
