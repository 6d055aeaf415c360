"""A protocol-faithful rerank service stand-in, for tests only.

A real HTTP server (stdlib ``ThreadingHTTPServer`` on a background thread),
driven by the server's real HTTP client. It answers as one of the servers
``--reranker-url`` may point at (``flavor``), each as its source defines it:

- ``llama.cpp`` (llama-server ``--reranking``; tools/server ``handle_rerank`` and
  ``format_response_rerank``): ``POST /v1/rerank``, ``/rerank``, ``/reranking``
  and ``/v1/reranking``. Reads ``query`` and ``documents`` (or TEI's ``texts``),
  ``top_n`` (default: all). With ``documents``: ``{"model", "object": "list",
  "usage", "results": [{"index", "relevance_score"}]}``; with ``texts``: TEI's
  bare list of ``{"index", "score"}``. Results sorted by score, cut to
  ``top_n``. Errors ``{"error": {"code", "message", "type"}}`` (400 for a
  missing query or empty documents).
- ``tei`` (Hugging Face text-embeddings-inference; router ``RerankRequest`` /
  ``Rank``): ``POST /rerank`` only. Reads ``query`` and ``texts``; a body
  without ``texts`` is axum's plain-text 422 ``Failed to deserialize the JSON
  body into the target type: missing field `texts` ...``; more texts than
  ``max_client_batch_size`` (32) is 422 ``{"error": "batch size N > maximum
  allowed batch size 32", "error_type": "Validation"}``. Answers a bare list
  of ``{"index", "score"}`` (``"text"`` with ``return_text``), sorted by score.
- ``infinity`` (michaelfeil/infinity ``RerankInput`` / ``ReRankResult``):
  ``POST /rerank``. Reads ``query``, ``documents``, ``return_documents``,
  ``top_n``. Answers ``{"object": "rerank", "results": [{"relevance_score",
  "index", "document"}], "model", "usage", "id", "created"}``; with
  ``legacy=True`` the list is under ``data`` (Infinity before 0.0.70).
  Validation errors are FastAPI's 422 ``{"detail": [{"msg", ...}]}``.
- ``cohere`` (Cohere's and Jina's ``/v1/rerank``): ``model`` is required
  (400 ``{"message": ...}``), ``documents``, ``top_n``. Answers ``{"id",
  "results": [{"index", "relevance_score"}], "meta"}``.

Scores come from ``scorer(query, document)`` (default: the share of the
query's words in the document), like a cross-encoder reading the pair.

Faults, each until cleared: ``delay(seconds)`` before answering;
``fail_with(status, body)``; ``answer_with(body)`` (any JSON, or raw text
with ``raw=True``) in place of the real answer, for malformed answers;
``require_key(key)`` refuses a request without ``Authorization: Bearer key``
(401); ``refuse_quoting_credentials()`` refuses every request (401) with a
message that quotes the Authorization header and the query it was sent.
``stop()`` closes the port (connection refused) and drops open connections.
Every request is recorded (``requests``: body, ``path``, ``headers``); tests
wait on them with ``wait_for_requests``, never a sleep.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FLAVORS = ("llama.cpp", "tei", "infinity", "cohere")
PATHS = {
    "llama.cpp": ("/v1/rerank", "/rerank", "/reranking", "/v1/reranking"),
    "tei": ("/rerank",),
    "infinity": ("/rerank",),
    "cohere": ("/v1/rerank",),
}
TEI_MAX_CLIENT_BATCH_SIZE = 32
Scorer = Callable[[str, str], float]


def word_overlap(query: str, document: str) -> float:
    """The share of the query's words the document holds."""
    asked = set(re.findall(r"\w+", query.lower()))
    held = set(re.findall(r"\w+", document.lower()))
    return len(asked & held) / len(asked) if asked else 0.0


class RecordedRequest(dict[str, Any]):
    """A request body plus ``.path`` and ``.headers``."""

    def __init__(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        super().__init__(body)
        self.path = path
        self.headers = headers

    @property
    def documents(self) -> list[str]:
        return list(self.get("documents") or self.get("texts") or [])


@dataclass
class _Faults:
    delay: float = 0.0
    status: int | None = None
    body: Any = None
    answer: Any = None
    raw: bool = False
    key: str | None = None
    quote_credentials: bool = False


class RerankStub:
    """``with RerankStub("tei") as stub: ... --reranker-url stub.url``."""

    def __init__(
        self,
        flavor: str = "llama.cpp",
        *,
        scorer: Scorer = word_overlap,
        legacy: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "bge-reranker-v2-m3",
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {FLAVORS}")
        self.flavor = flavor
        self.scorer = scorer
        self.legacy = legacy
        self.host = host
        self.port = port
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._faults = _Faults()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._abort = threading.Event()

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL (no path)."""
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """The flavor's usual endpoint URL."""
        return self.url + PATHS[self.flavor][0]

    def start(self) -> RerankStub:
        if self._server is not None:
            return self
        self._abort = threading.Event()
        self._server = _Server((self.host, self.port), _Handler, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"rerank-stub:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Go away like a killed server: the port refuses, open connections drop."""
        server, self._server = self._server, None
        if server is None:
            return
        self._abort.set()
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> RerankStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------

    def delay(self, seconds: float) -> None:
        with self._lock:
            self._faults.delay = seconds

    def fail_with(self, status: int, body: Any = None) -> None:
        with self._lock:
            self._faults.status, self._faults.body = status, body

    def answer_with(self, answer: Any, *, raw: bool = False) -> None:
        with self._lock:
            self._faults.answer, self._faults.raw = answer, raw

    def require_key(self, key: str | None) -> None:
        with self._lock:
            self._faults.key = key

    def refuse_quoting_credentials(self) -> None:
        """Refuse every request with 401, quoting back the Authorization header
        it was sent and the query of the URL, as some services' error texts do."""
        with self._lock:
            self._faults.quote_credentials = True

    def clear_faults(self) -> None:
        with self._lock:
            key = self._faults.key
            self._faults = _Faults(key=key)

    # -- inspection ------------------------------------------------------------

    def wait_for_requests_sync(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise TimeoutError(f"rerank stub got {len(self.requests)}/{n} requests")
            return list(self.requests)

    async def wait_for_requests(
        self,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - mirrors the sync version
    ) -> list[RecordedRequest]:
        return await asyncio.to_thread(self.wait_for_requests_sync, n, timeout)

    # -- answering (server threads) --------------------------------------------

    def _record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> RecordedRequest:
        request = RecordedRequest(path, headers, body)
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()
        return request

    def faults(self) -> _Faults:
        with self._lock:
            return replace(self._faults)

    def answer(self, request: RecordedRequest) -> tuple[int, Any]:
        """(status, JSON body or plain text) as the flavor's server answers."""
        body = dict(request)
        flavor = self.flavor
        if flavor == "tei":
            return self._tei(body)
        query = body.get("query")
        if not isinstance(query, str):
            return self._error(400, '"query" must be provided')
        documents = body.get("documents")
        if flavor == "llama.cpp" and documents is None:
            documents = body.get("texts")
        if flavor == "cohere" and not body.get("model"):
            return 400, {"message": "invalid request: model must be specified"}
        if not isinstance(documents, list) or not documents:
            return self._error(400, '"documents" must be a non-empty string array')
        ranks = self._ranks(query, documents)
        top_n = body.get("top_n")
        if isinstance(top_n, int):
            ranks = ranks[:top_n]
        if flavor == "llama.cpp":
            if "texts" in body:
                return 200, [{"index": i, "score": s} for i, s in ranks]
            return 200, {
                "model": body.get("model") or self.model,
                "object": "list",
                "usage": {
                    "prompt_tokens": 10 * len(documents),
                    "total_tokens": 10 * len(documents),
                },
                "results": [{"index": i, "relevance_score": s} for i, s in ranks],
            }
        if flavor == "infinity":
            results = [
                {
                    "relevance_score": s,
                    "index": i,
                    "document": documents[i] if body.get("return_documents") else None,
                }
                for i, s in ranks
            ]
            return 200, {
                "object": "rerank",
                "data" if self.legacy else "results": results,
                "model": body.get("model") or self.model,
                "usage": {
                    "prompt_tokens": 10 * len(documents),
                    "total_tokens": 10 * len(documents),
                },
                "id": f"infinity-{uuid.uuid4()}",
                "created": int(time.time()),
            }
        return 200, {
            "id": str(uuid.uuid4()),
            "results": [{"index": i, "relevance_score": s} for i, s in ranks],
            "meta": {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}},
        }

    def _tei(self, body: dict[str, Any]) -> tuple[int, Any]:
        if "texts" not in body:
            column = len(json.dumps(body))
            return 422, (
                "Failed to deserialize the JSON body into the target type: missing field"
                f" `texts` at line 1 column {column}"
            )
        texts = body["texts"]
        if len(texts) > TEI_MAX_CLIENT_BATCH_SIZE:
            return 422, {
                "error": f"batch size {len(texts)} > maximum allowed batch size"
                f" {TEI_MAX_CLIENT_BATCH_SIZE}",
                "error_type": "Validation",
            }
        if not texts:
            return 422, {"error": "`texts` cannot be empty", "error_type": "Validation"}
        ranks = self._ranks(str(body.get("query", "")), texts)
        out = []
        for i, s in ranks:
            item: dict[str, Any] = {"index": i, "score": s}
            if body.get("return_text"):
                item["text"] = texts[i]
            out.append(item)
        return 200, out

    def _ranks(self, query: str, documents: list[Any]) -> list[tuple[int, float]]:
        scored = [(i, float(self.scorer(query, str(d)))) for i, d in enumerate(documents)]
        return sorted(scored, key=lambda pair: pair[1], reverse=True)

    def _error(self, status: int, message: str) -> tuple[int, Any]:
        if self.flavor == "llama.cpp":
            return status, {
                "error": {"code": status, "message": message, "type": "invalid_request_error"}
            }
        if self.flavor == "infinity":
            return 422, {"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}]}
        return status, {"message": message}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type, stub: RerankStub) -> None:
        self.stub = stub
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client that gave up reset the socket: normal traffic
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path, _, query = self.path.partition("?")
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            stub._record(path, headers, {})
            self._send(400, {"error": f"invalid JSON: {exc.msg}"})
            return
        request = stub._record(path, headers, body if isinstance(body, dict) else {})
        faults = stub.faults()
        if faults.delay and stub._abort.wait(faults.delay):
            return  # stopped while waiting: the connection is dropped
        if path not in PATHS[stub.flavor]:
            self._send(404, {"error": "Not Found"} if stub.flavor != "tei" else "")
            return
        if faults.quote_credentials:
            sent = headers.get("authorization", "(none)")
            self._send(401, {"error": {"message": f"invalid credentials {sent} for ?{query}"}})
            return
        if faults.key is not None and headers.get("authorization") != f"Bearer {faults.key}":
            self._send(401, {"error": {"code": 401, "message": "Invalid API Key"}})
            return
        if faults.status is not None:
            self._send(faults.status, faults.body if faults.body is not None else {})
            return
        if faults.answer is not None:
            self._send(200, faults.answer, raw=faults.raw)
            return
        status, answer = stub.answer(request)
        self._send(status, answer)

    def _send(self, status: int, body: Any, *, raw: bool = False) -> None:
        if raw or isinstance(body, str):
            data = str(body).encode()
            kind = "text/plain; charset=utf-8"
        else:
            data = json.dumps(body).encode()
            kind = "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass
