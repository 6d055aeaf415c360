"""Recording servicer contexts for the unit tier, so an interceptor, a
wrapped handler or ``errors.abort`` can be called directly, without a grpc
server. Not a test module: the interception, auth, error-detail, limits and
trailer unit tests all call through these (tests/unit/test_api_interception.py,
test_rpc_interception_rules.py, test_auth_interceptor.py,
test_errors_details.py, test_limits_rules.py,
test_servicer_trailers_and_outcomes.py).

``AbortingContext`` keeps the abort (its code, message and trailing metadata,
then raises ``Aborted`` as grpc's abort does), hands back the trailers already
set before it, and keeps what a streaming handler writes.
``InterceptedContext`` is the context the service interceptor itself reads:
the trailers set (by the interceptor's x-request-id or a servicer's
``x-nexus-*``), the time remaining, the status by ``code()`` (a method, as
grpc's, where ``AbortingContext.code`` is a value), and the abort, whose
trailers replace those set."""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
from google.rpc import status_pb2

from nexus_grpc.status_details import DETAILS_KEY, unpack


class Aborted(grpc.aio.AbortError):
    """What both contexts' ``abort`` raises, as grpc's abort does."""


class AbortingContext:
    """The part of a servicer context our code uses. ``trailers_before``: the
    trailers already set (a service interceptor's x-request-id). After an
    abort: ``code``, ``message`` and ``trailers`` (the abort's trailing
    metadata), together ``aborted``. ``written``: each message written."""

    def __init__(self, trailers_before: tuple = ()) -> None:
        self.trailers_before = trailers_before
        self.code: grpc.StatusCode | None = None
        self.message = ""
        self.trailers: tuple = ()
        self.written: list[Any] = []

    @property
    def aborted(self) -> tuple:
        """(code, message, trailing metadata) of the abort; () before one."""
        return () if self.code is None else (self.code, self.message, self.trailers)

    def trailing_metadata(self) -> tuple:
        return self.trailers_before

    async def abort(self, code, message="", trailing_metadata=()):
        self.code, self.message, self.trailers = code, message, tuple(trailing_metadata)
        raise Aborted()

    async def write(self, message: Any) -> None:
        self.written.append(message)

    def details(self) -> tuple:
        """The rich error details the abort's trailers carry."""
        [value] = [v for k, v in self.trailers if k == DETAILS_KEY]
        return unpack(status_pb2.Status.FromString(value))


class InterceptedContext:
    """What the service interceptor and a servicer's trailers use of a
    servicer context: ``trailers`` (set, or the abort's), ``code_set`` and
    ``message`` of the abort (``code()`` as grpc answers it), no deadline."""

    def __init__(self, trailers: tuple = ()) -> None:
        self.trailers = trailers
        self.code_set: grpc.StatusCode | None = None
        self.message = ""

    def time_remaining(self) -> float | None:
        return None

    def set_trailing_metadata(self, trailers) -> None:
        self.trailers = tuple(trailers)

    def trailing_metadata(self) -> tuple:
        return self.trailers

    def code(self) -> grpc.StatusCode | None:
        return self.code_set

    async def abort(self, code, message="", trailing_metadata=()):
        self.code_set, self.message = code, message
        if trailing_metadata:
            self.trailers = tuple(trailing_metadata)
        raise Aborted()

    def details(self) -> tuple:
        """The rich error details the trailers carry."""
        [value] = [v for k, v in self.trailers if k == DETAILS_KEY]
        return unpack(status_pb2.Status.FromString(value))
