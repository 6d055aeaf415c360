"""What can go wrong with a rerank service, each with a message fit for a hit's
``degraded_reason`` and for the health report."""

from __future__ import annotations

from nexus_grpc.errors import DependencyError


class RerankError(DependencyError):
    """The rerank service gave no usable answer; search keeps the fused order."""

    #: The label of nexus_rerank_requests_total this outcome counts under.
    outcome = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RerankTimeout(RerankError):
    outcome = "timeout"


class RerankUnreachable(RerankError):
    """No HTTP answer at all: refused, reset, no route, a name that does not resolve."""

    outcome = "unreachable"
    unreachable = True


class RerankRejected(RerankError):
    """An HTTP error status, with the service's own message."""

    outcome = "rejected"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RerankBadAnswer(RerankError):
    """An answer that is not a score for each document sent."""

    outcome = "bad_answer"


class RerankSkipped(RerankError):
    """Not asked at all: cooling down after a failure, or no time left in the call."""

    outcome = "skipped"
