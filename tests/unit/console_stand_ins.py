"""The console's client as a page calls it, stood in for the unit tier: a
``StandIn`` answers each typed-client call from a table of canned answers
and records what it was asked; ``Stream`` is a server stream's stand-in and
``Answer`` a unary answer with the server's empty reason beside it. Not a
test module: the console's page, route and login unit tests all build their
pages on the same stand-in (tests/unit/test_console_pages_reads.py,
test_console_pages_people.py, test_console_pages_routes.py,
test_console_pages_login.py); one test module importing another would collect
its tests twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from nexus_grpc.client import NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

PROJECT = 7
#: The typed client's server-streaming calls: answered with a Stream, not awaited.
STREAMING = frozenset(
    {"watch_extractions", "watch_erasure", "search_episodes", "search_memories",
     "search_entities", "export_user"}
)  # fmt: skip


class Stream:
    """A server stream's stand-in: its messages, then (maybe) an error, and
    the trailers' reasons the client reads once it has ended."""

    def __init__(
        self,
        items: list[Any] = (),  # type: ignore[assignment]
        *,
        error: Exception | None = None,
        empty_reason: str | None = None,
        degraded_reason: str | None = None,
    ) -> None:
        self.items = list(items)
        self.error = error
        self.empty_reason = empty_reason
        self.degraded_reason = degraded_reason
        self.cancelled = False
        self.read = 0

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> Any:
        if self.read < len(self.items):
            self.read += 1
            return self.items[self.read - 1]
        if self.error is not None:
            raise self.error
        raise StopAsyncIteration

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class Answer:
    """A unary answer as the client gives it: the message, and the server's
    empty reason beside it."""

    def __init__(self, message: Any, empty_reason: str = "") -> None:
        self._message = message
        self.empty_reason = empty_reason

    def __getattr__(self, name: str) -> Any:
        return getattr(self._message, name)


class StandIn:
    """A console's client: each call answered by ``answers[name]`` (a value,
    or a function of the call's arguments; an exception is raised), every
    call recorded. A call with no answer fails the test."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def asked(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]

    def _answer(self, name: str, kwargs: dict[str, Any]) -> Any:
        self.calls.append((name, kwargs))
        if name not in self.answers:
            raise AssertionError(f"the page asked {name}({kwargs}), which this test did not expect")
        answer = self.answers[name]
        if callable(answer) and not isinstance(answer, type):
            answer = answer(**kwargs)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in STREAMING:
            return lambda **kwargs: self._answer(name, kwargs)

        async def call(**kwargs: Any) -> Any:
            return self._answer(name, kwargs)

        return call


def not_found(what: str) -> NexusClientError:
    return NexusClientError(grpc.StatusCode.NOT_FOUND, f"{what} does not exist", "req-1")


def by_id(table: dict[int, Any], what: str) -> Callable[..., Any]:
    """A Get call answered from ``table`` by its ``id``; any other id is not found."""

    def get(id: int, **_: Any) -> Any:  # noqa: A002 - the client's own keyword
        return table[id] if id in table else not_found(f"{what} {id}")

    return get


ATLAS = memory_pb2.Project(id=PROJECT, name="Atlas")
