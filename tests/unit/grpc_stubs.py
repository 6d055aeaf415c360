"""A gRPC stub's stand-in for the unit tier: ``Stub(Name=answer)`` answers
``await stub.Name(request, timeout=, metadata=)`` from a value, a function
of the request or an exception to raise, and records each request, so a
client of ours that holds stubs (the evaluations' runs) is driven without a
channel or a server. Not a test module: the graph and memory evaluations'
run tests (tests/unit/test_eval_rules_graph_run.py,
test_eval_rules_memory_run.py) both drive their runs on it."""

from __future__ import annotations

from typing import Any


class Stub:
    """A gRPC stub's stand-in: ``Name(request, timeout=, metadata=)`` answered
    by ``answers[Name](request)``, each request recorded."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.requests: dict[str, list[Any]] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        answer = self.answers[name]

        async def call(request: Any, timeout: Any = None, metadata: Any = None) -> Any:  # noqa: ASYNC109
            self.requests.setdefault(name, []).append(request)
            found = answer(request) if callable(answer) else answer
            if isinstance(found, BaseException):
                raise found
            return found

        return call
