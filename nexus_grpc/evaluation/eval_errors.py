"""What stops an evaluation, for every one of them (recall, graph, memories).

Each evaluation's ``main`` answers either with a line on stderr and exit
status 2; a test asserts the class.
"""

from __future__ import annotations

__all__ = ["DataError", "EvalError"]


class DataError(ValueError):
    """A data set file that is not in the format its document describes
    (LoCoMo's, docs/graph-eval.md's, docs/memory-eval.md's); the message
    names the file or the bad place in it."""


class EvalError(Exception):
    """The evaluation could not run: the server unreachable, a write refused,
    work that did not settle in time."""
