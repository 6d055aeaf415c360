"""What the rerank client (rerank/client.py) sends and decides about each
answer, on httpx's in-process transport (no socket, no service): the body it
sends (the query, every document, ``top_n`` for all of them, the model when
one is set, the key as a bearer token), TEI's refusal of ``documents`` turned
into ``texts`` once and for good, no request for no documents, and each way a
call fails (an error status with the service's words, an answer that is no
JSON or holds a score that is no number, a timeout, no connection).

The endpoint a URL names and each unusable JSON answer are
tests/unit/test_rerank_answers.py's; each real server's answer shape, TEI's
real refusal, a real timeout and a stopped service, over real HTTP against the
rerank stand-in, are tests/integration/rerank/test_rerank_client.py's. The
query and documents both score are tests/rerank_documents.py's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from nexus_grpc.rerank import (
    RerankBadAnswer,
    RerankClient,
    RerankRejected,
    RerankTimeout,
    RerankUnreachable,
)
from tests.rerank_documents import DOCUMENTS, QUERY
from tests.unit.in_process_http import in_process_clients

SCORES = [0.0, 0.5, 1.0, 0.25]
TEI_REFUSAL = (
    "Failed to deserialize the JSON body into the target type: missing field `texts`"
    " at line 1 column 120"
)

Handler = Callable[[httpx.Request], httpx.Response]


class Service:
    """A rerank service in the test's process: ``answer`` makes each response;
    every request's body and headers are kept."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.answer: Handler = lambda request: results(SCORES)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)


def results(scores: list[float]) -> httpx.Response:
    """llama-server's shape, sorted by score as the servers do."""
    items = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
    items.sort(key=lambda item: -item["relevance_score"])
    return httpx.Response(200, json={"results": items})


@pytest.fixture
def service() -> Service:
    return Service()


@pytest.fixture
async def connect(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., RerankClient]]:
    """A RerankClient made as the server makes it (its own headers: its key),
    its HTTP client over httpx's in-process transport to ``service``."""

    def rerank(url: str = "http://rerank.local:8080", **options: Any) -> RerankClient:
        return RerankClient(url, **options)

    async with in_process_clients(service, monkeypatch, rerank) as make:
        yield make


async def test_every_document_is_sent_and_scored_by_its_index(service: Service, connect) -> None:
    client = connect("http://rerank.local:8080/v1", model="bge-reranker-v2-m3", api_key="s3cret")
    # The service sorts by score: the answer is read by index, not by place.
    assert await client.scores(QUERY, DOCUMENTS, 5.0) == SCORES
    [sent] = service.requests
    assert sent.url.path == "/v1/rerank"
    assert json.loads(sent.content) == {
        "query": QUERY,
        "documents": DOCUMENTS,
        # llama-server cuts its answer to top_n: a score for every candidate.
        "top_n": len(DOCUMENTS),
        "model": "bge-reranker-v2-m3",
    }
    assert sent.headers["authorization"] == "Bearer s3cret"


async def test_no_model_and_no_key_send_neither(service: Service, connect) -> None:
    client = connect()
    await client.scores(QUERY, DOCUMENTS, 5.0)
    [sent] = service.requests
    assert "model" not in json.loads(sent.content)
    assert "authorization" not in sent.headers


async def test_no_documents_asks_nothing(service: Service, connect) -> None:
    client = connect()
    assert await client.scores(QUERY, [], 5.0) == []
    assert service.requests == []


async def test_tei_is_asked_with_texts_once_it_refused_documents(service: Service, connect) -> None:
    def tei(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "texts" not in body:
            return httpx.Response(422, text=TEI_REFUSAL)
        # TEI's shape: a bare list, ``score`` for each.
        return httpx.Response(200, json=[{"index": i, "score": s} for i, s in enumerate(SCORES)])

    service.answer = tei
    client = connect()
    assert await client.scores(QUERY, DOCUMENTS, 5.0) == SCORES
    assert await client.scores("bread", DOCUMENTS, 5.0) == SCORES
    first, retried, later = service.bodies()
    assert "documents" in first and "texts" not in first
    assert retried == {"query": QUERY, "texts": DOCUMENTS, "truncate": True}
    assert later == {"query": "bread", "texts": DOCUMENTS, "truncate": True}


async def test_a_refusal_that_does_not_name_texts_is_not_retried(service: Service, connect) -> None:
    service.answer = lambda request: httpx.Response(
        400, json={"message": "model must be specified"}
    )
    client = connect()
    with pytest.raises(RerankRejected, match="HTTP 400: model must be specified") as info:
        await client.scores(QUERY, DOCUMENTS, 5.0)
    assert info.value.status == 400
    assert len(service.requests) == 1 and client.field == "documents"


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            "HTTP 503: Loading model",
        ),
        (502, "Bad Gateway", "HTTP 502: Bad Gateway"),
        (401, {"error": "bad key"}, r"refused our credentials (--reranker-api-key): bad key"),
        (404, "Not Found", "HTTP 404; llama-server needs --reranking"),
    ],
)
async def test_an_error_status_is_rejected_with_the_services_words(
    service: Service, connect, status: int, body: object, words: str
) -> None:
    service.answer = lambda request: (
        httpx.Response(status, json=body)
        if not isinstance(body, str)
        else httpx.Response(status, text=body)
    )
    client = connect()
    with pytest.raises(RerankRejected) as info:
        await client.scores(QUERY, DOCUMENTS, 5.0)
    assert info.value.status == status
    assert words in info.value.message


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("not json", "not JSON"),
        ('{"results": [{"index": 0, "relevance_score": 0.5', "not JSON"),
        ('{"results": [{"index": 0, "relevance_score": NaN}]}', "score nan"),
    ],
)
async def test_an_answer_that_is_no_json_or_no_number_is_refused(
    service: Service, connect, answer: str, words: str
) -> None:
    service.answer = lambda request: httpx.Response(200, text=answer)
    client = connect()
    with pytest.raises(RerankBadAnswer, match=words):
        await client.scores(QUERY, DOCUMENTS, 5.0)


async def test_a_timeout_names_the_budget_and_no_connection_is_unreachable(
    service: Service, connect
) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    service.answer = slow
    client = connect(api_key="s3cret")
    with pytest.raises(RerankTimeout, match=r"did not answer within 0\.30 s"):
        await client.scores(QUERY, DOCUMENTS, 0.3)

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("All connection attempts failed", request=request)

    service.answer = gone
    with pytest.raises(RerankUnreachable, match="cannot reach http://rerank.local:8080/rerank"):
        await client.scores(QUERY, DOCUMENTS, 5.0)
