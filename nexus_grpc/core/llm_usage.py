"""What the LLM costs: one record per call, and the ledger that collects them.

Whoever starts LLM work opens a ledger with its stage (a job worker for its
kind, an RPC for its own); the domain names the project, tenant and user
('' for none) the work is for as soon as it has read them (``attribute``),
before any call; the LLM client appends one ``LLMCall`` per request it
sends (``record``). So the client never learns about jobs, projects or
tenants, and the ledger is where
the records wait until they are written: by the worker in the transaction
that records the job's outcome, or by the domain in the transaction that
keeps the call's result (``unwritten`` / ``written``), so a result that was
kept always has its calls beside it.

A call outside any ledger is still counted by the client's in-process totals
(``CallTotals``, under stage ``unattributed``) but written nowhere: every
path that calls the LLM opens one, and a test holds that.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

T = TypeVar("T")

# The stages: what the LLM was asked to do. New ones are added by name.
EXTRACTION = "extraction"
RESOLUTION = "resolution"
FORMATION = "formation"
SUMMARY = "summary"
OVERVIEW = "overview"
SELECTION = "selection"
#: A call made outside any ledger (a bug: counted in metrics, written nowhere).
UNATTRIBUTED = "unattributed"

# The outcomes of one request to the model server.
OK = "ok"
#: The answer stopped at its token limit (it was paid for all the same).
CUT_OFF = "cut_off"
#: The server answered with something unusable: not JSON, a malformed body,
#: a request it rejected.
BAD_ANSWER = "bad_answer"
#: No answer came: connection refused, the model missing, a server error.
UNREACHABLE = "unreachable"
#: No answer within the call's deadline.
TIMEOUT = "timeout"
#: The caller stopped reading a streamed answer (an RPC cancelled mid-overview).
CANCELLED = "cancelled"
OUTCOMES = (OK, CUT_OFF, BAD_ANSWER, UNREACHABLE, TIMEOUT, CANCELLED)

#: ``nexus_llm_tokens_total``'s directions.
PROMPT = "prompt"
COMPLETION = "completion"


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One request to the model server, as it is kept."""

    stage: str
    project_id: int
    tenant: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    outcome: str
    #: When the call ended (seconds since the epoch).
    at: float
    #: The server gave no counts, so the tokens are our estimate (llm/tokens.py).
    estimated: bool = False
    #: The user the work was done for (an episode's session's user, the
    #: selecting user); '' for work done for no user (a project overview, a
    #: name's resolution). A key that may act only for some users reads only
    #: their work's calls (domain/usage_report.py).
    user_id: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class WorkOwner(NamedTuple):
    """Whose LLM work a job's is: its target's tenant, and the user it is
    done for ('' for none)."""

    tenant: str
    user_id: str = ""


class Ledger:
    """The calls of one piece of work (a job's attempt, an RPC) not yet written."""

    __slots__ = ("_pending", "project_id", "stage", "tenant", "user_id")

    def __init__(self, stage: str, project_id: int = 0, tenant: str = "") -> None:
        self.stage = stage
        self.project_id = project_id
        self.tenant = tenant
        self.user_id = ""
        self._pending: list[LLMCall] = []

    def attribute(self, project_id: int, tenant: str, user_id: str = "") -> None:
        """Whose work the calls from here on are."""
        self.project_id = project_id
        self.tenant = tenant
        self.user_id = user_id

    def add(self, call: LLMCall) -> None:
        self._pending.append(call)

    def unwritten(self) -> list[LLMCall]:
        return list(self._pending)

    def written(self, calls: Sequence[LLMCall]) -> None:
        """``calls`` were committed: the ledger no longer holds them."""
        done = {id(c) for c in calls}
        self._pending = [c for c in self._pending if id(c) not in done]


_ledger: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar(
    "nexus_llm_ledger", default=None
)
_stage: contextvars.ContextVar[str | None] = contextvars.ContextVar("nexus_llm_stage", default=None)


@contextlib.contextmanager
def ledger(stage: str, project_id: int = 0, tenant: str = "") -> Iterator[Ledger]:
    """Collect the LLM calls made inside the block (and in tasks it starts)."""
    opened = Ledger(stage, project_id, tenant)
    token = _ledger.set(opened)
    try:
        yield opened
    finally:
        _restore(_ledger, token)


def current() -> Ledger | None:
    return _ledger.get()


def attribute(project_id: int, tenant: str, user_id: str = "") -> None:
    """The work under way is this project's and tenant's, done for ``user_id``
    ('' for no user) (no ledger: nothing)."""
    opened = _ledger.get()
    if opened is not None:
        opened.attribute(project_id, tenant, user_id)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Calls inside the block count under ``name`` (extraction's own question
    about names is ``resolution``), in the same ledger."""
    token = _stage.set(name)
    try:
        yield
    finally:
        _restore(_stage, token)


def _restore(var: contextvars.ContextVar[T], token: contextvars.Token[T]) -> None:
    """Undo a ``set``. A streaming RPC's async generator that its caller
    abandoned is closed by the event loop in a context of its own, where the
    token is not valid: that context is discarded anyway, so the value is put
    back by hand instead."""
    try:
        var.reset(token)
    except ValueError:
        var.set(token.old_value if token.old_value is not contextvars.Token.MISSING else None)  # type: ignore[arg-type]


def record(
    prompt_tokens: int,
    completion_tokens: int,
    seconds: float,
    outcome: str,
    *,
    estimated: bool = False,
) -> LLMCall:
    """One request made now, under the current stage and ledger (kept there)."""
    opened = _ledger.get()
    name = _stage.get() or (opened.stage if opened is not None else UNATTRIBUTED)
    call = LLMCall(
        stage=name,
        project_id=opened.project_id if opened is not None else 0,
        tenant=opened.tenant if opened is not None else "",
        prompt_tokens=max(0, int(prompt_tokens)),
        completion_tokens=max(0, int(completion_tokens)),
        seconds=max(0.0, seconds),
        outcome=outcome,
        at=time.time(),
        estimated=estimated,
        user_id=opened.user_id if opened is not None else "",
    )
    if opened is not None:
        opened.add(call)
    return call


@dataclass
class CallTotals:
    """Every call this process made, for ``/metrics`` (no project or tenant:
    the labels stay few). Written on the event loop, read by the scrape
    thread: the lock keeps a scrape from seeing a dict change size."""

    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, call: LLMCall) -> None:
        with self._lock:
            key = (call.stage, call.outcome)
            self.calls[key] = self.calls.get(key, 0) + 1
            both = ((PROMPT, call.prompt_tokens), (COMPLETION, call.completion_tokens))
            for direction, n in both:
                at = (call.stage, direction)
                self.tokens[at] = self.tokens.get(at, 0) + n
            self.seconds[call.stage] = self.seconds.get(call.stage, 0.0) + call.seconds

    def snapshot(
        self,
    ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int], dict[str, float]]:
        with self._lock:
            return dict(self.calls), dict(self.tokens), dict(self.seconds)


@dataclass(frozen=True, slots=True)
class StageBucket:
    """The calls of one stage that ended one way, in one time bucket
    (``bucket``: the bucket's start divided by its length)."""

    bucket: int
    stage: str
    outcome: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    #: Of ``calls``, those whose tokens were estimated (the server gave no counts).
    estimated_calls: int = 0


@dataclass(frozen=True, slots=True)
class ActivityBucket:
    """What the LLM work was for, in one time bucket: episodes stored,
    memories formation created, entities written (created)."""

    bucket: int
    episodes: int = 0
    memories_formed: int = 0
    entities: int = 0
