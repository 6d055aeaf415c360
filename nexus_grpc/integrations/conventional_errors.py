"""A refused call as the exception Python code around a framework expects.

LangGraph, LangChain and LlamaIndex have no error types of their own for a
store, a history or a retriever that refuses: code built on them catches
Python's (``ValueError`` for bad input, ``LookupError``, ``PermissionError``,
``ConnectionError``, ``TimeoutError``). So a ``NexusClientError`` leaves an
adapter as a class that is both its own (``NexusInvalidArgument``...) and the
built-in one for its status: ``except ValueError`` and ``except
NexusInvalidArgument`` both catch it, and the server's message, request id
and error details are all still on it.
"""

from __future__ import annotations

from typing import Any

import grpc

from nexus_grpc.client import NexusClientError

__all__ = ["BUILTIN_FOR", "conventional"]

#: The built-in exception each status becomes (anything else: RuntimeError).
BUILTIN_FOR: dict[grpc.StatusCode, type[Exception]] = {
    grpc.StatusCode.INVALID_ARGUMENT: ValueError,
    grpc.StatusCode.OUT_OF_RANGE: ValueError,
    grpc.StatusCode.ALREADY_EXISTS: ValueError,
    grpc.StatusCode.NOT_FOUND: LookupError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionError,
    grpc.StatusCode.UNAUTHENTICATED: PermissionError,
    grpc.StatusCode.UNAVAILABLE: ConnectionError,
    grpc.StatusCode.DEADLINE_EXCEEDED: TimeoutError,
}

_classes: dict[tuple[type[NexusClientError], type[Exception]], type[NexusClientError]] = {}


def _text(self: NexusClientError) -> str:
    # OSError's own __str__ ("[Errno ...]") would hide the server's message.
    text = f"{self.code.name}: {self.message}"
    if self.request_id:
        text += f" (request id {self.request_id})"
    return text


def _reduce(self: NexusClientError) -> tuple[Any, ...]:
    return (
        conventional,
        (NexusClientError(self.code, self.message, self.request_id, self.details),),
    )


def _class_for(nexus: type[NexusClientError], builtin: type[Exception]) -> type[NexusClientError]:
    key = (nexus, builtin)
    cls = _classes.get(key)
    if cls is None:
        cls = _classes[key] = type(
            nexus.__name__,
            (nexus, builtin),
            {"__str__": _text, "__reduce__": _reduce, "__module__": __name__},
        )
    return cls


def conventional(exc: NexusClientError) -> NexusClientError:
    """``exc`` as an instance of its own class and of the built-in one for its status."""
    builtin = BUILTIN_FOR.get(exc.code, RuntimeError)
    if isinstance(exc, builtin):
        return exc
    cls = _class_for(type(exc), builtin)
    converted = cls(exc.code, exc.message, exc.request_id, exc.details, exc.status)
    converted.__cause__ = exc.__cause__
    return converted
