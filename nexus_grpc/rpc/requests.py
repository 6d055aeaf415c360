"""The RPC in progress, as the layers below the interceptors see it.

The service interceptor sets the request id; the log formatter and the
servicers read it. Metrics implement ``RequestObserver`` and the interceptors
call it. Neither needs anything from gRPC's server side, so they live here and
logs, auth and metrics need not import the api package.
"""

from __future__ import annotations

import contextvars

import grpc

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


class RequestObserver:
    """Hook for metrics: observe() once per finished RPC; stream_started() and
    stream_ended() around each server stream that got past the concurrency cap."""

    def observe(self, method: str, code: grpc.StatusCode, seconds: float) -> None:  # noqa: B027
        pass

    def stream_started(self, method: str) -> None:  # noqa: B027
        pass

    def stream_ended(self, method: str) -> None:  # noqa: B027
        pass
