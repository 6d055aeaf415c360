"""The rerank client against each server's answer shape, over real HTTP (the
rerank stand-in of tests/rerank_stub.py): what it sends and reads back from
each, TEI's own refusal of ``documents``, and the failures only a socket
shows (a real timeout, a stopped service, a path the server does not serve).

What it makes of a URL and of an answer's body without a service (the
endpoint a URL names, each way a JSON answer can be unusable, the wording of
an error status for each service's error body) is tests/unit/test_rerank_answers.py's;
what it sends and decides on httpx's in-process transport (``top_n`` and the
key as a bearer token, ``texts`` once TEI refused ``documents``, no request for
no documents, an error status with the service's words, an answer that is no
JSON, a timeout, no connection) is tests/unit/test_rerank_client_rules_requests.py's.
The query and documents both score are tests/rerank_documents.py's."""

from __future__ import annotations

import time

import pytest

from nexus_grpc.rerank import (
    RerankClient,
    RerankRejected,
    RerankTimeout,
    RerankUnreachable,
)
from tests.rerank_documents import DOCUMENTS, QUERY
from tests.rerank_stub import FLAVORS, RerankStub, word_overlap


def expected(query: str = QUERY, documents: list[str] = DOCUMENTS) -> list[float]:
    return [word_overlap(query, d) for d in documents]


@pytest.fixture
async def served(request):
    flavor, legacy = request.param if isinstance(request.param, tuple) else (request.param, False)
    with RerankStub(flavor, legacy=legacy) as stub:
        client = RerankClient(stub.endpoint, model="bge-reranker-v2-m3")
        yield stub, client
        await client.close()


@pytest.mark.parametrize(
    "served", [*FLAVORS, ("infinity", True)], indirect=True, ids=[*FLAVORS, "infinity-data"]
)
async def test_each_servers_answer_gives_every_document_its_own_score(served):
    stub, client = served
    # The servers sort by score: the answer is read by index, not by place.
    assert await client.scores(QUERY, DOCUMENTS, 5.0) == expected()
    sent = stub.requests[-1]
    assert sent["query"] == QUERY
    assert sent.documents == DOCUMENTS
    assert sent["model"] == "bge-reranker-v2-m3"


async def test_tei_is_asked_with_texts_once_it_refused_documents():
    with RerankStub("tei") as stub:
        client = RerankClient(stub.url)  # a base URL: /rerank is added
        try:
            assert await client.scores(QUERY, DOCUMENTS, 5.0) == expected()
            assert await client.scores("bread", DOCUMENTS, 5.0) == expected("bread")
        finally:
            await client.close()
    first, retried, later = stub.requests
    assert "documents" in first and "texts" not in first
    assert retried["texts"] == DOCUMENTS and retried["truncate"] is True
    assert later["texts"] == DOCUMENTS  # no second refusal to learn from
    assert {r.path for r in stub.requests} == {"/rerank"}
    assert "model" not in first  # none configured, none sent


async def test_a_slow_service_times_out_within_the_budget_given():
    with RerankStub("llama.cpp") as stub:
        stub.delay(30)
        client = RerankClient(stub.endpoint)
        started = time.monotonic()
        try:
            with pytest.raises(RerankTimeout, match=r"did not answer within 0\.30 s"):
                await client.scores(QUERY, DOCUMENTS, 0.3)
        finally:
            await client.close()
        assert time.monotonic() - started < 3


async def test_a_stopped_service_is_unreachable():
    stub = RerankStub("llama.cpp").start()
    endpoint = stub.endpoint
    stub.stop()
    client = RerankClient(endpoint)
    try:
        with pytest.raises(RerankUnreachable, match="cannot reach"):
            await client.scores(QUERY, DOCUMENTS, 5.0)
    finally:
        await client.close()


async def test_a_missing_endpoint_says_llama_server_needs_reranking():
    with RerankStub("tei") as stub:
        client = RerankClient(stub.url + "/v1/rerank")
        try:
            with pytest.raises(RerankRejected, match="HTTP 404; llama-server needs --reranking"):
                await client.scores(QUERY, DOCUMENTS, 5.0)
        finally:
            await client.close()
