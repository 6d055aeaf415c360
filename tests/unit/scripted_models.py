"""The models the domain calls, scripted in-process, for the unit tier: no
HTTP, no model server. They live here, not in a test module, because several
test modules drive the same stand-ins (one test module importing another would
collect its tests twice and tie the files together).

``ScriptedModel`` is the model as the domain calls it (``input_budget`` and
``chat_json``): extraction, resolution and formation answer from it
(tests/unit/test_extraction_rules.py, test_resolution_use_case.py,
test_formation_job.py, through tests/unit/extraction_world.py).
``ScriptedClient`` is a real ``LLMClient`` whose backend is a script, so the
client's own rules run (tests/unit/test_llm_accounting_rules.py,
test_llm_requests_rules.py)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.llm import LLMClient, LLMError, tokens
from nexus_grpc.llm.client import ChatAnswer, Message, StreamDelta

MODEL = "qwen2.5:3b"
EMPTY: dict[str, Any] = {"entities": [], "relationships": []}

# An answer, or what gives one from the prompt's text (None: not this rule's).
Answer = dict[str, Any] | Exception | Callable[[str], dict[str, Any] | None]


@dataclass(frozen=True)
class Asked:
    """One call the domain made to the model."""

    model: str
    messages: Sequence[dict[str, str]]
    schema: dict[str, Any]
    temperature: float
    num_predict: int

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class ScriptedModel:
    """The model as the domain calls it (``LLMClient.input_budget`` and
    ``chat_json``), in-process: an answer is the first rule's whose text the
    prompt holds, else the next queued one, else ``default``; every call is
    kept in ``calls``. Its context is ``context`` tokens, measured with the
    client's own estimate."""

    queued: list[Answer] = field(default_factory=list)
    default: Answer = field(default_factory=lambda: EMPTY)
    context: int = 32768
    rules: list[tuple[str, Answer]] = field(default_factory=list)
    calls: list[Asked] = field(default_factory=list)

    def on(self, text: str, answer: Answer) -> None:
        self.rules.append((text, answer))

    async def input_budget(
        self,
        model: str,
        fixed: Sequence[Any],
        num_predict: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - LLMClient's signature
    ) -> int:
        return tokens.input_budget(self.context, num_predict, tokens.estimate_messages(fixed))

    async def chat_json(
        self,
        model: str,
        messages: Sequence[dict[str, str]],
        schema: dict[str, Any],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - LLMClient's signature
    ) -> dict[str, Any]:
        asked = Asked(model, list(messages), dict(schema), temperature, num_predict)
        self.calls.append(asked)
        answer = next((a for text, a in self.rules if text in asked.prompt), None)
        if answer is None:
            answer = self.queued.pop(0) if self.queued else self.default
        if callable(answer) and not isinstance(answer, Exception):
            answer = answer(asked.prompt) or EMPTY
        if isinstance(answer, Exception):
            raise answer
        return copy.deepcopy(answer)


class ScriptedClient(LLMClient):
    """An LLM client whose backend answers from a script, without HTTP.

    ``answers``: what each ``_chat`` request gets, in order (a ChatAnswer, or an
    exception it raises); ``streams``: what each ``_stream`` yields (a list of
    StreamDelta; an ``asyncio.Event`` in it waits for that event).
    ``contexts``: each model's context window as the server would say it (a
    model not named: ``context``; None: the server does not say)."""

    server_name = "Scripted"

    def __init__(
        self,
        *answers: ChatAnswer | BaseException,
        streams: Sequence[Sequence[StreamDelta | asyncio.Event]] = (),
        context: int | None = 32768,
        contexts: Mapping[str, int] | None = None,
        context_length: int = 0,
        models: Sequence[str] = (MODEL,),
        host: str = "http://llm.local:11434",
        timeout: float = 5,
    ) -> None:
        super().__init__(host, timeout=timeout, context_length=context_length)
        self.answers = list(answers)
        self.streams = [list(s) for s in streams]
        self.context = context
        self.contexts = dict(contexts or {})
        self.models = list(models)
        #: (model, num_predict, num_ctx, schema) of each request sent.
        self.sent: list[tuple[str, int, int, Mapping[str, Any] | None]] = []
        self.context_reads: list[str] = []

    async def close(self) -> None:
        pass

    async def _fetch_context_length(self, model: str) -> int | None:
        self.context_reads.append(model)
        return self.contexts.get(model, self.context)  # type: ignore[arg-type]

    async def _chat(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
        schema: Mapping[str, Any] | None,
    ) -> ChatAnswer:
        self.sent.append((model, num_predict, num_ctx, schema))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def _stream(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
    ) -> AsyncIterator[StreamDelta]:
        self.sent.append((model, num_predict, num_ctx, None))
        for item in self.streams.pop(0):
            if isinstance(item, asyncio.Event):
                await item.wait()
            else:
                yield item

    async def _list_models(self) -> list[str]:
        return list(self.models)

    def _map_error(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        if isinstance(exc, LLMError):
            return exc
        return self._map_transport(exc, model, limit)


def answer(text: str, prompt: int | None = 12, completion: int | None = 9, done: str = "stop"):
    return ChatAnswer(text, done, prompt, completion)
