"""The HTTP rerank API that LAN model servers share: a query and documents in,
an index and a relevance score for each document out.

Spoken by llama.cpp's ``llama-server --reranking``, Hugging Face
text-embeddings-inference (TEI), Infinity, and Jina/Cohere-compatible
services. Where they differ, and what this client does about it:

- The endpoint. llama-server answers ``/v1/rerank``, ``/rerank`` and
  ``/reranking``; TEI ``/rerank``; Infinity ``/rerank`` (``/v1/rerank`` with
  ``--url-prefix /v1``); Jina and Cohere ``/v1/rerank``. ``--reranker-url``
  names the endpoint; a URL without a path, or one ending in ``/v1`` or
  ``/v2``, gets ``/rerank`` added (the path every self-hosted server serves).
- The documents' field. Everyone but TEI reads ``documents``; TEI reads
  ``texts`` and refuses a body without it (422, ``missing field `texts```).
  The first request sends ``documents``; on that refusal the same call is
  sent again with ``texts``, and every later call starts with ``texts``.
- The answer. An object with ``results`` (llama-server, Jina, Cohere, Infinity
  0.0.70 and later), one with ``data`` (older Infinity), or a bare list (TEI,
  and llama-server when it was sent ``texts``). An item's score is
  ``relevance_score``, or ``score`` in TEI's shape. Servers sort the items by
  score, so they are matched to the documents by ``index``, never by place.
- Errors. ``{"error": {"message": ...}}`` (llama-server), ``{"error": "..."}``
  (TEI), ``{"message": ...}`` (Cohere), ``{"detail": ...}`` (FastAPI:
  Infinity, Jina); the message is kept for the hits' ``degraded_reason``.

``top_n`` is sent as the number of documents: llama-server cuts its answer to
``top_n`` and we want a score for every candidate.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from nexus_grpc.core.redact import mask_url, scrub
from nexus_grpc.rerank.rerank_errors import (
    RerankBadAnswer,
    RerankError,
    RerankRejected,
    RerankTimeout,
    RerankUnreachable,
)

DOCUMENTS = "documents"  # Cohere, Jina, llama-server, Infinity
TEXTS = "texts"  # TEI
#: The longest error text kept from a service's answer.
MAX_MESSAGE_CHARS = 200


def endpoint_of(url: str) -> str:
    """The rerank endpoint ``url`` names; ValueError when it is no http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{mask_url(url)!r} is not an http:// or https:// URL")
    path = parts.path.rstrip("/")
    if path in ("", "/v1", "/v2"):
        path += "/rerank"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class RerankClient:
    """One rerank service, over one pooled HTTP client."""

    def __init__(self, url: str, *, model: str = "", api_key: str = "") -> None:
        self._url = endpoint_of(url)
        # What messages and the status show: a password in the URL stays here.
        self.endpoint = mask_url(self._url)
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers)
        self.field = DOCUMENTS

    async def close(self) -> None:
        await self._http.aclose()

    async def scores(
        self,
        query: str,
        documents: Sequence[str],
        timeout: float,  # noqa: ASYNC109 - the whole call's budget, sockets included
    ) -> list[float]:
        """Each document's relevance to ``query``, in the documents' order.

        Raises a RerankError subclass: RerankTimeout past ``timeout`` seconds
        (connecting, sending and reading together), RerankUnreachable,
        RerankRejected (an HTTP error status) or RerankBadAnswer."""
        if not documents:
            return []
        try:
            async with asyncio.timeout(timeout):
                status, data, text = await self._post(query, documents, timeout)
                if self.field == DOCUMENTS and _wants_texts(status, text):
                    self.field = TEXTS
                    status, data, text = await self._post(query, documents, timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise RerankTimeout(f"{self.endpoint} did not answer within {timeout:.2f} s") from None
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {scrub(str(exc))}".rstrip(": ")
            raise RerankUnreachable(f"cannot reach {self.endpoint}: {reason}") from None
        if status >= 400:
            raise _rejected(self.endpoint, status, data, text)
        if data is None:
            raise RerankBadAnswer(
                f"{self.endpoint} answered something that is not JSON: {text[:80]!r}"
            )
        return scores_from(data, len(documents), self.endpoint)

    async def _post(
        self,
        query: str,
        documents: Sequence[str],
        timeout: float,  # noqa: ASYNC109 - httpx's socket timeouts, inside scores()' bound
    ) -> tuple[int, Any, str]:
        body: dict[str, Any] = {"query": query, self.field: list(documents)}
        if self.field == TEXTS:
            body["truncate"] = True  # TEI refuses a text past the model's window otherwise
        else:
            body["top_n"] = len(documents)
        if self.model:
            body["model"] = self.model
        response = await self._http.post(self._url, json=body, timeout=timeout)
        text = response.text
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return response.status_code, data, text


def _wants_texts(status: int, text: str) -> bool:
    """TEI's refusal of a body that says ``documents``: 422 (axum's JSON
    rejection) naming the missing ``texts`` field."""
    return status in (400, 422) and "texts" in text


def scores_from(data: object, n: int, endpoint: str = "the reranker") -> list[float]:
    """A score for each of ``n`` documents from any of the answer shapes, or
    RerankBadAnswer naming what is wrong."""
    items: object = data
    if isinstance(data, Mapping):
        items = data.get("results", data.get("data"))
    if not isinstance(items, list):
        raise RerankBadAnswer(
            f"{endpoint} answered without results: {json.dumps(data)[:MAX_MESSAGE_CHARS]}"
        )
    scores: list[float | None] = [None] * n
    for item in items:
        if not isinstance(item, Mapping):
            raise RerankBadAnswer(f"{endpoint} answered a result that is not an object: {item!r}")
        index = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise RerankBadAnswer(
                f"{endpoint} answered index {index!r} for {n} documents (0 to {n - 1})"
            )
        if (
            not isinstance(score, int | float)
            or isinstance(score, bool)
            or not math.isfinite(score)
        ):
            raise RerankBadAnswer(f"{endpoint} answered score {score!r} for document {index}")
        if scores[index] is not None:
            raise RerankBadAnswer(f"{endpoint} answered document {index} twice")
        scores[index] = float(score)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise RerankBadAnswer(
            f"{endpoint} scored {n - len(missing)} of the {n} documents sent"
            f" (none for {', '.join(map(str, missing[:5]))}{'...' if len(missing) > 5 else ''})"
        )
    return [s for s in scores if s is not None]


def _rejected(endpoint: str, status: int, data: object, text: str) -> RerankError:
    # The service's own words may quote what we sent it (the Bearer key, the
    # Basic value of the URL's user info): scrubbed before anyone reads them.
    message = scrub(_message(data) or text.strip()[:MAX_MESSAGE_CHARS] or "(no message)")
    if status in (401, 403):
        return RerankRejected(
            status, f"{endpoint} refused our credentials (--reranker-api-key): {message}"
        )
    if status == 404:
        return RerankRejected(
            status,
            f"{endpoint} has no rerank endpoint there (HTTP 404; llama-server needs"
            f" --reranking): {message}",
        )
    return RerankRejected(status, f"{endpoint} answered HTTP {status}: {message}")


def _message(data: object) -> str:
    """The error text of any of the services' error bodies."""
    if not isinstance(data, Mapping):
        return ""
    for key in ("error", "message", "detail"):
        value = data.get(key)
        if isinstance(value, Mapping):
            value = value.get("message") or value.get("msg")
        if isinstance(value, list) and value:  # FastAPI's validation detail
            first = value[0]
            value = first.get("msg") if isinstance(first, Mapping) else first
        if value:
            return str(value)[:MAX_MESSAGE_CHARS]
    return ""
