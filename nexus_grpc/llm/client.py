"""What every LLM backend shares, and the Ollama backend.

``LLMClient`` does the parts that do not depend on the wire protocol: the
caller's deadline, the context window (read from the server once per model),
``num_ctx`` sized to the prompt, the token budget callers split their input
by, cut-off answers (``done_reason == "length"``: retried once with more
room, then ``LLMCutOff``), and the account of every request it sends (one
``core.llm_usage.LLMCall`` each: the tokens the server says it read and wrote,
how long it took, how it ended) into the caller's ledger and the process's
totals.  A backend (``OllamaClient`` here, ``OpenAIClient`` in
``openai_client.py``) only sends one request, reports the server's token
counts, and maps its errors.

Why a wrapper around ``ollama.AsyncClient``: it leaks several unrelated
exception types (``httpx.ConnectError`` on streams but builtin
``ConnectionError`` otherwise, ``httpx.ReadTimeout``, ``ollama.ResponseError``,
``json.JSONDecodeError``, ``pydantic.ValidationError``) and has no per-request
timeout.  Everything here is mapped to the errors in ``errors.py``.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import ollama
import pydantic

from nexus_grpc.core import llm_usage
from nexus_grpc.core.redact import mask_url
from nexus_grpc.llm import tokens
from nexus_grpc.llm.llm_errors import (
    LLMBadOutput,
    LLMCutOff,
    LLMError,
    LLMInputTooLong,
    LLMTimedOut,
    LLMUnavailable,
    LLMUnreachable,
)
from nexus_grpc.llm.text import strip_model_tokens
from nexus_grpc.runtime import deadlines

log = logging.getLogger(__name__)
Message = Mapping[str, Any]

_FENCE = re.compile(r"\A\s*```[a-zA-Z]*\s*\n?(.*?)\n?```\s*\Z", re.S)
_END = object()  # end-of-stream marker between the producer task and the consumer
LENGTH = "length"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """One finished answer: its raw text, why the model stopped, and the
    tokens the server says it read and wrote (None: it did not say)."""

    text: str
    done_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A piece of a streamed answer; the last one carries ``done_reason``,
    and whichever carries the server's token counts, those."""

    text: str
    done_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class LLMClient(abc.ABC):
    """One shared client per process (it pools HTTP connections).

    ``timeout`` is the HTTP timeout (connect, and each read: for a stream that
    is the longest silence between chunks) and the default overall deadline of
    non-streaming calls.  A per-call ``timeout`` is the caller's remaining
    deadline for the whole call, stream included.

    ``context_length`` overrides what the server says about every model's
    context window (0: ask the server).
    """

    api = "llm"
    server_name = "the model server"

    def __init__(self, host: str, *, timeout: float, context_length: int = 0) -> None:
        # How messages name the server: its URL with any credential masked
        # (subclasses connect with the ``host`` they were given).
        self._host = mask_url(host)
        self._timeout = timeout
        self._context_override = context_length
        self._contexts: dict[str, int] = {}
        # Every request this client sent, for /metrics.
        self.usage = llm_usage.CallTotals()

    @property
    def host(self) -> str:
        return self._host

    @abc.abstractmethod
    async def close(self) -> None:
        raise NotImplementedError

    # -- context and budgets ---------------------------------------------------

    async def context_length(
        self,
        model: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> int:
        """The model's context window in tokens, read once per model name (a
        different model, or a restarted server that lost it, is read again)."""
        if self._context_override > 0:
            return self._context_override
        known = self._contexts.get(model)
        if known is not None:
            return known
        limit = self._deadline(timeout, model)
        try:
            found = await asyncio.wait_for(self._fetch_context_length(model), limit)
        except Exception as exc:
            raise self._map_error(exc, model, limit) from exc
        if found is None:
            found = tokens.DEFAULT_CONTEXT_LENGTH
            log.warning(
                "%s at %s does not say how long %s's context is; assuming %d tokens"
                " (set --llm-context-length)",
                self.server_name,
                self._host,
                model,
                found,
            )
        self._contexts[model] = found
        return found

    async def input_budget(
        self,
        model: str,
        fixed: Sequence[Message],
        num_predict: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> int:
        """Tokens the variable part of a prompt may take: the context window
        less the answer's room and the ``fixed`` messages (the prompt with its
        variable part empty)."""
        context = await self.context_length(model, timeout=timeout)
        return tokens.input_budget(context, num_predict, tokens.estimate_messages(fixed))

    # -- calls -------------------------------------------------------------------

    async def chat_json(
        self,
        model: str,
        messages: Sequence[Message],
        schema: Mapping[str, Any],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> dict[str, Any]:
        """Non-streaming chat constrained by a JSON schema; returns the parsed
        object.  The answer is parsed as sent: never through the think/ChatML
        stripper, which would cut an entity or note that mentions ``<think>``."""
        _, parsed = await self._complete(
            model,
            messages,
            temperature,
            num_predict,
            timeout,
            schema,
            lambda answer: parse_json_object(answer.text, model=model),
        )
        return parsed

    async def chat_text(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> str:
        """Non-streaming chat; returns the answer with think/ChatML tokens stripped.
        Never a cut answer: a cut-off one raises ``LLMCutOff``."""
        answer, _ = await self._complete(
            model, messages, temperature, num_predict, timeout, None, lambda a: None
        )
        return strip_model_tokens(answer.text)

    async def chat_stream(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> AsyncGenerator[str, None]:
        """Yield content deltas as the model produces them (raw: wrap with
        ``text.clean_stream`` to drop think/ChatML tokens).  If the model
        stopped at ``num_predict``, ``LLMCutOff`` is raised after the last
        delta: the text was shown as it came, but must not be stored.

        The HTTP stream is read by one producer task feeding a small queue, so
        the deadline can be enforced with ``wait_for`` on the queue without ever
        cancelling httpx mid-read from a different task than the one that opened
        the stream.  Closing the generator early cancels the producer.
        """
        # No overall cap by default: a long overview may legitimately stream for
        # minutes; httpx's read timeout still bounds each silence.
        if timeout is None:
            timeout = deadlines.remaining()  # the RPC's, when streaming to a caller
        limit = self._deadline(timeout, model, cap=False) if timeout is not None else None
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        num_ctx, num_predict = await self._fit(model, messages, num_predict, limit)
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=64)

        producer = asyncio.create_task(
            self._produce(queue, model, messages, temperature, num_predict, num_ctx, limit)
        )
        started = loop.time()
        done_reason: str | None = None
        counted: list[int | None] = [None, None]  # the server's (prompt, completion)
        shown: list[str] = []
        outcome = llm_usage.CANCELLED  # unless the stream ends or fails
        try:
            while True:
                item = await self._next_delta(queue, deadline, model, limit)
                if item is None:
                    break
                if item.done_reason:
                    done_reason = item.done_reason
                if item.prompt_tokens is not None:
                    counted[0] = item.prompt_tokens
                if item.completion_tokens is not None:
                    counted[1] = item.completion_tokens
                if item.text:
                    shown.append(item.text)
                    yield item.text
            outcome = llm_usage.CUT_OFF if done_reason == LENGTH else llm_usage.OK
        except LLMError as exc:
            outcome = _outcome_of(exc)
            raise
        finally:
            producer.cancel()
            # asyncio.wait never raises the task's outcome, and does not swallow
            # a cancellation of *this* task.
            await asyncio.wait({producer})
            answered = outcome in (llm_usage.OK, llm_usage.CUT_OFF, llm_usage.CANCELLED)
            self._account(
                messages,
                "".join(shown),
                counted[0],
                counted[1],
                loop.time() - started,
                outcome,
                answered=answered,
            )
        if done_reason == LENGTH:
            raise LLMCutOff(
                f"the answer of {model} was cut off at its limit of {num_predict} tokens"
                " (done_reason=length)"
            )

    async def _produce(
        self,
        queue: asyncio.Queue[object],
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
        limit: float | None,
    ) -> None:
        """``chat_stream``'s producer: the HTTP stream's deltas into ``queue``,
        then its end, or the error that stopped it."""
        try:
            parts = self._stream(model, messages, temperature, num_predict, num_ctx)
            async for part in parts:
                await queue.put(part)
            await queue.put(_END)
        except Exception as exc:
            await queue.put(self._map_error(exc, model, limit))

    async def _next_delta(
        self,
        queue: asyncio.Queue[object],
        deadline: float | None,
        model: str,
        limit: float | None,
    ) -> StreamDelta | None:
        """The producer's next delta, None at the stream's end; raises the
        producer's error, or the time-out once ``deadline`` (loop time) passes."""
        loop = asyncio.get_running_loop()
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            raise self._timed_out(model, limit)
        try:
            item = await asyncio.wait_for(queue.get(), remaining)
        except TimeoutError:
            raise self._timed_out(model, limit) from None
        if item is _END:
            return None
        if isinstance(item, LLMError):
            raise item
        assert isinstance(item, StreamDelta)
        return item

    async def list_models(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - remaining deadline
    ) -> list[str]:
        """Names of the models the server has (health checks, ``doctor``)."""
        limit = self._deadline(timeout, None)
        try:
            return await asyncio.wait_for(self._list_models(), limit)
        except Exception as exc:
            raise self._map_error(exc, None, limit) from exc

    async def missing_models(
        self,
        models: Sequence[str],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - remaining deadline
    ) -> list[str]:
        """Which of ``models`` the server does not have (health checks)."""
        have = await self.list_models(timeout=timeout)
        return [m for m in dict.fromkeys(models) if not self._has_model(m, have)]

    # -- the shared call path ----------------------------------------------------

    async def _complete(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        timeout: float | None,  # noqa: ASYNC109 - the caller's remaining deadline
        schema: Mapping[str, Any] | None,
        accept: Callable[[ChatAnswer], T],
    ) -> tuple[ChatAnswer, T]:
        """One answer, retried once with twice the room if it was cut off, and
        what ``accept`` made of it (an ``LLMBadOutput`` it raises is the
        request's outcome: a bad answer). Each request sent is accounted."""
        limit = self._deadline(timeout, model)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        num_ctx, room = await self._fit(model, messages, num_predict, limit)
        context = await self.context_length(model, timeout=limit)
        prompt = tokens.estimate_messages(messages)
        for attempt in (1, 2):
            remaining = deadline - loop.time()
            started = loop.time()
            sent = remaining > 0  # else nothing is sent, and nothing accounted
            try:
                if not sent:
                    raise TimeoutError
                call = self._chat(model, messages, temperature, room, num_ctx, schema)
                answer = await asyncio.wait_for(call, remaining)
            except asyncio.CancelledError:
                took = loop.time() - started
                self._account(messages, "", None, None, took, llm_usage.CANCELLED, answered=False)
                raise
            except Exception as exc:
                error = self._map_error(exc, model, limit)
                if sent:
                    # No usable answer came back (a malformed body, a rejected
                    # request, an error): nobody says what it cost in tokens.
                    took, ended = loop.time() - started, _outcome_of(error)
                    self._account(messages, "", None, None, took, ended, answered=False)
                if attempt == 2 and _is_timeout(exc):
                    # The cut-off is the cause: a slow model cannot write twice
                    # the answer in what is left of the deadline.  Retrying the
                    # job would repeat both calls.
                    raise LLMCutOff(
                        f"the answer of {model} was cut off at its limit of {num_predict} tokens,"
                        f" and the retry with {room} did not finish within the {limit:.0f}s"
                        " deadline (done_reason=length)"
                    ) from exc
                raise error from exc
            took = loop.time() - started
            if answer.done_reason != LENGTH:
                try:
                    accepted = accept(answer)
                except LLMBadOutput:
                    self._account_answer(messages, answer, took, llm_usage.BAD_ANSWER)
                    raise
                self._account_answer(messages, answer, took, llm_usage.OK)
                return answer, accepted
            self._account_answer(messages, answer, took, llm_usage.CUT_OFF)
            more = min(room * 2, context - prompt)
            if attempt == 2 or more <= room:
                break
            log.info(
                "%s's answer was cut off at %d tokens; retrying once with %d",
                model,
                room,
                more,
            )
            room = more
            num_ctx = tokens.num_ctx_for(prompt, room, context)
        raise LLMCutOff(
            f"the answer of {model} was cut off at its limit of {room} tokens"
            + (" after a retry with more room" if attempt == 2 else "")
            + " (done_reason=length)"
        )

    async def _fit(
        self, model: str, messages: Sequence[Message], num_predict: int, limit: float | None
    ) -> tuple[int, int]:
        """(num_ctx, num_predict) for a call: the prompt must fit whole."""
        context = await self.context_length(model, timeout=limit)
        prompt = tokens.estimate_messages(messages)
        if prompt + num_predict > context:
            raise LLMInputTooLong(
                f"the prompt (up to {prompt} tokens) and its answer ({num_predict} tokens)"
                f" do not fit {model}'s context of {context} tokens"
            )
        return tokens.num_ctx_for(prompt, num_predict, context), num_predict

    # -- the account ---------------------------------------------------------------

    def _account_answer(
        self, messages: Sequence[Message], answer: ChatAnswer, seconds: float, outcome: str
    ) -> None:
        self._account(
            messages,
            answer.text,
            answer.prompt_tokens,
            answer.completion_tokens,
            seconds,
            outcome,
        )

    def _account(
        self,
        messages: Sequence[Message],
        text: str,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        seconds: float,
        outcome: str,
        *,
        answered: bool = True,
    ) -> None:
        """One request, into the caller's ledger and this client's totals.

        Tokens are the server's counts where it gave them. Where it did not
        (an OpenAI-compatible stream without usage, a cached prompt Ollama
        leaves uncounted), an answer's are estimated (``estimated``); a
        request that got no answer counts none, since nobody says what the
        server spent on it (its seconds still count)."""
        estimated = False
        if answered:
            if prompt_tokens is None:
                prompt_tokens, estimated = tokens.approximate_messages(messages), True
            if completion_tokens is None:
                completion_tokens, estimated = tokens.approximate_tokens(text), True
        call = llm_usage.record(
            prompt_tokens or 0,
            completion_tokens or 0,
            seconds,
            outcome,
            estimated=estimated,
        )
        self.usage.count(call)

    # -- what a backend implements ------------------------------------------------

    @abc.abstractmethod
    async def _fetch_context_length(self, model: str) -> int | None:
        raise NotImplementedError

    @abc.abstractmethod
    async def _chat(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
        schema: Mapping[str, Any] | None,
    ) -> ChatAnswer:
        raise NotImplementedError

    @abc.abstractmethod
    def _stream(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
    ) -> AsyncIterator[StreamDelta]:
        raise NotImplementedError

    @abc.abstractmethod
    async def _list_models(self) -> list[str]:
        raise NotImplementedError

    @staticmethod
    def _has_model(model: str, have: Sequence[str]) -> bool:
        return model in have

    @abc.abstractmethod
    def _map_error(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------

    def _deadline(self, timeout: float | None, model: str | None, *, cap: bool = True) -> float:
        """Overall limit for a call: the caller's remaining deadline, capped by ours.

        Without an explicit ``timeout``, the deadline of the RPC being served
        (if any) is the caller's: an answer after it would reach nobody.
        """
        if timeout is None:
            timeout = deadlines.remaining()
        if timeout is None:
            limit = self._timeout
        else:
            limit = min(timeout, self._timeout) if cap else timeout
        if limit <= 0:
            raise LLMUnavailable(
                f"deadline already expired before calling {self.server_name}{_for(model)}"
                f" at {self._host}"
            )
        return limit

    def _timed_out(self, model: str | None, limit: float | None) -> LLMTimedOut:
        took = f" within {limit:.1f}s" if limit is not None else ""
        return LLMTimedOut(f"{self.server_name}{_for(model)} at {self._host} did not answer{took}")

    def _map_transport(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        """httpx and socket errors, the same for every backend."""
        name = self.server_name
        # Only a failed connection means nobody is there (worth waiting for
        # without spending attempts).  A connect timeout is a host that is off
        # or firewalled; a read error mid-answer is a failed attempt.
        if isinstance(exc, (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout)):
            reason = str(exc) or type(exc).__name__
            return LLMUnreachable(f"cannot reach {name} at {self._host}: {reason}")
        # TimeoutError covers asyncio.wait_for; httpx timeouts are checked before
        # the generic transport errors they subclass.
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return self._timed_out(model, limit)
        if isinstance(exc, httpx.TransportError):
            reason = str(exc) or type(exc).__name__
            return LLMUnavailable(f"connection to {name} at {self._host} failed: {reason}")
        if isinstance(exc, (json.JSONDecodeError, pydantic.ValidationError, httpx.DecodingError)):
            return LLMBadOutput(
                f"{name}{_for(model)} at {self._host} sent a malformed response body: "
                f"{type(exc).__name__}: {exc}"
            )
        if isinstance(exc, (httpx.HTTPError, OSError)):
            return LLMUnavailable(f"error talking to {name} at {self._host}: {exc!r}")
        return LLMBadOutput(f"unexpected error from {name}{_for(model)}: {exc!r}")


class OllamaClient(LLMClient):
    """Ollama's own API through the ``ollama`` package: ``/api/chat`` with
    ``format`` (a JSON schema) and ``options.num_ctx``, ``/api/show`` for the
    context window, ``/api/tags`` for the pulled models."""

    api = "ollama"
    server_name = "Ollama"

    def __init__(self, host: str, *, timeout: float, context_length: int = 0) -> None:
        super().__init__(host, timeout=timeout, context_length=context_length)
        self._client = ollama.AsyncClient(host=host, timeout=timeout)

    async def close(self) -> None:
        await self._client.close()

    async def _fetch_context_length(self, model: str) -> int | None:
        try:
            shown = await self._client.show(model)
        except pydantic.ValidationError:
            # The ollama package requires model_info, which Ollama before 0.3
            # and some Ollama-compatible servers leave out of /api/show: such a
            # server does not say, so the caller assumes the documented default.
            return None
        info = shown.modelinfo or {}
        arch = info.get("general.architecture")
        value = info.get(f"{arch}.context_length") if arch else None
        if value is None:  # an architecture we do not know the key of
            value = next((v for k, v in info.items() if k.endswith(".context_length")), None)
        return int(value) if isinstance(value, (int, float)) and value > 0 else None

    @staticmethod
    def _options(temperature: float, num_predict: int, num_ctx: int) -> dict[str, Any]:
        return {"temperature": temperature, "num_predict": num_predict, "num_ctx": num_ctx}

    async def _chat(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
        schema: Mapping[str, Any] | None,
    ) -> ChatAnswer:
        response = await self._client.chat(
            model=model,
            messages=list(messages),
            stream=False,
            format=dict(schema) if schema is not None else None,
            options=self._options(temperature, num_predict, num_ctx),
        )
        return ChatAnswer(
            response.message.content or "",
            response.done_reason or "",
            # Ollama leaves prompt_eval_count out when the whole prompt was
            # in its cache: the account then estimates it.
            _count(response.prompt_eval_count),
            _count(response.eval_count),
        )

    async def _stream(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
    ) -> AsyncIterator[StreamDelta]:
        parts = await self._client.chat(
            model=model,
            messages=list(messages),
            stream=True,
            options=self._options(temperature, num_predict, num_ctx),
        )
        async for part in parts:
            reason = part.done_reason if part.done else None
            if part.message.content or reason:
                yield StreamDelta(
                    part.message.content or "",
                    reason,
                    _count(part.prompt_eval_count) if part.done else None,
                    _count(part.eval_count) if part.done else None,
                )

    async def _list_models(self) -> list[str]:
        response = await self._client.list()
        return [m.model for m in response.models if m.model]

    @staticmethod
    def _has_model(model: str, have: Sequence[str]) -> bool:
        # Ollama reads "qwen2.5" as "qwen2.5:latest".
        full = model if ":" in model else f"{model}:latest"
        return full in have or model in have

    def _map_error(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        """Translate whatever the ollama/httpx stack raised into our errors."""
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, ollama.ResponseError):
            code = exc.status_code
            if code == 404:
                return LLMUnreachable(
                    f"model {model!r} is not available on Ollama at {self._host} "
                    f"({exc.error}); pull it with `ollama pull {model}`"
                )
            # -1: an {"error": ...} line in the middle of a 200 stream (the
            # runner crashed or ran out of memory): a server-side failure.
            if code >= 500 or code in (-1, 408, 429):
                return LLMUnavailable(
                    f"Ollama{_for(model)} at {self._host} failed (HTTP {code}): {exc.error}"
                )
            # Other 4xx: Ollama refused our request (bad schema, unsupported
            # option).  Not an outage, so it must not be retried forever.
            return LLMBadOutput(
                f"Ollama{_for(model)} at {self._host} rejected the request "
                f"(HTTP {code}): {exc.error}"
            )
        return self._map_transport(exc, model, limit)


def parse_json_object(text: str, *, model: str | None = None) -> dict[str, Any]:
    """Parse a model answer that must be one JSON object.

    Structured output makes fences unlikely, but a stray ```json fence costs
    nothing to tolerate.  Nothing else is removed: text inside the JSON (a
    note quoting ``<think>``) is the answer's.
    """
    cleaned = text.strip()
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    try:
        value = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        snippet = cleaned[:200] + ("..." if len(cleaned) > 200 else "")
        raise LLMBadOutput(
            f"model{_for(model)} did not answer JSON ({exc.msg}): {snippet!r}"
        ) from exc
    if not isinstance(value, dict):
        raise LLMBadOutput(
            f"model{_for(model)} answered JSON {type(value).__name__}, expected an object"
        )
    return value


def _outcome_of(error: LLMError) -> str:
    """How a request that raised ``error`` ended, for its account."""
    if isinstance(error, LLMTimedOut):
        return llm_usage.TIMEOUT
    if isinstance(error, LLMCutOff):
        return llm_usage.CUT_OFF
    if isinstance(error, LLMBadOutput):
        return llm_usage.BAD_ANSWER
    return llm_usage.UNREACHABLE


def _count(value: object) -> int | None:
    """A token count from a server's answer; None when it gave none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (TimeoutError, httpx.TimeoutException))


def _for(model: str | None) -> str:
    return f" ({model})" if model else ""
