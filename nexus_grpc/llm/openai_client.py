"""The OpenAI-compatible backend: llama.cpp's ``llama-server``, vLLM, LM
Studio, and Ollama's own ``/v1`` endpoints.

``POST /v1/chat/completions`` (``response_format`` with a JSON schema for
structured calls, server-sent events when streaming) and ``GET /v1/models``.
The protocol has no ``num_ctx``: the server's context is fixed when it starts,
so the budget is read from what the server reports (vLLM's ``max_model_len``,
llama.cpp's ``/props``) or from ``--llm-context-length``.
``finish_reason == "length"`` is the same cut-off as Ollama's ``done_reason``.
Token counts come from ``usage`` (a stream asks for it with
``stream_options.include_usage``; a server that ignores that leaves the
account to estimate).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from nexus_grpc.errors import DependencyError
from nexus_grpc.llm.client import ChatAnswer, LLMClient, Message, StreamDelta, _count, _for
from nexus_grpc.llm.llm_errors import LLMBadOutput, LLMError, LLMUnavailable, LLMUnreachable


class OpenAIHTTPError(DependencyError):
    """A non-2xx answer, with the server's own message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class OpenAIClient(LLMClient):
    api = "openai"
    server_name = "the OpenAI-compatible server"

    def __init__(
        self, host: str, *, timeout: float, context_length: int = 0, api_key: str = ""
    ) -> None:
        base = host.rstrip("/")
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        super().__init__(base, timeout=timeout, context_length=context_length)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base, timeout=timeout, headers=headers)

    async def close(self) -> None:
        await self._http.aclose()

    async def _fetch_context_length(self, model: str) -> int | None:
        found: list[int] = []
        listed = await self._get_json("/v1/models")
        for entry in listed.get("data") or []:
            if isinstance(entry, Mapping) and entry.get("id") == model:
                raw_meta = entry.get("meta")
                meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
                # vLLM: max_model_len; llama.cpp: meta.n_ctx_train (the model's own).
                for value in (entry.get("max_model_len"), meta.get("n_ctx_train")):
                    if isinstance(value, int) and value > 0:
                        found.append(value)
        # llama.cpp serves /props with each slot's context, the real limit of a
        # request (the -c size split over -np slots).  Other servers 404 it.
        try:
            props = await self._get_json("/props")
        except OpenAIHTTPError:
            props = {}
        settings = props.get("default_generation_settings")
        for value in (
            settings.get("n_ctx") if isinstance(settings, Mapping) else None,
            props.get("n_ctx"),  # older builds put it at the top
        ):
            if isinstance(value, int) and value > 0:
                found.append(value)
                break
        return min(found) if found else None

    def _body(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "max_tokens": num_predict,
            "stream": stream,
        }
        if stream:
            # The last event then carries the token counts (OpenAI's, vLLM's,
            # llama.cpp's and Ollama's /v1 all do; others ignore it).
            body["stream_options"] = {"include_usage": True}
        return body

    async def _chat(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
        schema: Mapping[str, Any] | None,
    ) -> ChatAnswer:
        body = self._body(model, messages, temperature, num_predict, False)
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": dict(schema), "strict": True},
            }
        response = await self._http.post("/v1/chat/completions", json=body)
        data = self._json(response)
        try:
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            reason = choice.get("finish_reason") or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMBadOutput(
                f"{self.server_name}{_for(model)} at {self._host} answered without a choice:"
                f" {str(data)[:200]!r}"
            ) from exc
        prompt_tokens, completion_tokens = _usage(data)
        return ChatAnswer(str(content), str(reason), prompt_tokens, completion_tokens)

    async def _stream(
        self,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        num_predict: int,
        num_ctx: int,
    ) -> AsyncIterator[StreamDelta]:
        body = self._body(model, messages, temperature, num_predict, True)
        async with self._http.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code >= 400:
                await response.aread()
                self._json(response)  # raises with the server's message
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, comments, "event:" lines
                payload = line[len("data:") :].strip()
                if payload == "[DONE]":
                    return
                chunk = json.loads(payload)
                if isinstance(chunk, Mapping) and "error" in chunk:
                    raise OpenAIHTTPError(500, _message(chunk))
                if isinstance(chunk, Mapping) and isinstance(chunk.get("usage"), Mapping):
                    prompt_tokens, completion_tokens = _usage(chunk)
                    yield StreamDelta("", None, prompt_tokens, completion_tokens)
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    text = delta.get("content") or ""
                    reason = choice.get("finish_reason")
                    if text or reason:
                        yield StreamDelta(str(text), str(reason) if reason else None)

    async def _list_models(self) -> list[str]:
        listed = await self._get_json("/v1/models")
        return [
            str(m["id"]) for m in listed.get("data") or [] if isinstance(m, Mapping) and m.get("id")
        ]

    @staticmethod
    def _has_model(model: str, have: Sequence[str]) -> bool:
        # llama.cpp serves one model under its file name and answers any name.
        if model in have:
            return True
        full = model if ":" in model else f"{model}:latest"
        return full in have

    async def _get_json(self, path: str) -> dict[str, Any]:
        return self._json(await self._http.get(path))

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except json.JSONDecodeError:
            if response.status_code >= 400:
                raise OpenAIHTTPError(response.status_code, response.text[:200]) from None
            raise
        if response.status_code >= 400:
            raise OpenAIHTTPError(response.status_code, _message(data))
        if not isinstance(data, dict):
            raise LLMBadOutput(f"expected a JSON object, got {type(data).__name__}")
        return data

    def _map_error(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, OpenAIHTTPError):
            code, where = exc.status, f"{self.server_name}{_for(model)} at {self._host}"
            if code == 404:
                return LLMUnreachable(f"{where} has no such model or endpoint: {exc.message}")
            if code in (401, 403):
                return LLMUnreachable(
                    f"{where} refused our credentials (--llm-api-key): {exc.message}"
                )
            if code >= 500 or code in (408, 429):
                return LLMUnavailable(f"{where} failed (HTTP {code}): {exc.message}")
            return LLMBadOutput(f"{where} rejected the request (HTTP {code}): {exc.message}")
        return self._map_transport(exc, model, limit)


def _usage(data: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens of an answer's ``usage``; None where absent."""
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


def _message(data: object) -> str:
    """The error text of an OpenAI-style ``{"error": {"message": ...}}`` body."""
    if isinstance(data, Mapping):
        err = data.get("error")
        if isinstance(err, Mapping):
            return str(err.get("message") or err)
        if err:
            return str(err)
    return str(data)[:200]
