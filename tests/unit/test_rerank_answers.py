"""What the rerank client makes of a URL and of an answer (rerank/client.py),
without a service: the endpoint a URL names, a score for every document read
by index from any server's answer shape, an answer that is unusable refused
by what is wrong with it, and an error status worded with the service's own
message.

What the client sends and reads over HTTP, against each server's shape (the
rerank stand-in of tests/rerank_stub.py), is tests/integration/rerank/test_rerank_client.py's."""

from __future__ import annotations

import json

import pytest

from nexus_grpc.rerank import RerankBadAnswer, RerankRejected, endpoint_of, scores_from
from nexus_grpc.rerank.client import _rejected

#: As many documents as the client tests send.
DOCUMENTS = 4


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://gpu-box.lan:8080", "http://gpu-box.lan:8080/rerank"),
        ("http://gpu-box.lan:8080/", "http://gpu-box.lan:8080/rerank"),
        ("http://gpu-box.lan:8080/v1", "http://gpu-box.lan:8080/v1/rerank"),
        ("https://api.jina.ai/v1/rerank", "https://api.jina.ai/v1/rerank"),
        ("https://api.cohere.com/v2", "https://api.cohere.com/v2/rerank"),
        ("http://tei:80/rerank/", "http://tei:80/rerank"),
        ("http://box:8080/v1/reranking", "http://box:8080/v1/reranking"),
    ],
)
def test_the_url_names_the_endpoint_and_a_bare_host_gets_rerank(url, endpoint):
    assert endpoint_of(url) == endpoint


@pytest.mark.parametrize("url", ["gpu-box:8080", "ftp://box/rerank", "http://", ""])
def test_a_url_that_is_not_http_is_refused(url):
    with pytest.raises(ValueError, match="http"):
        endpoint_of(url)


# The answers that parse as JSON but are no usable ranking of the 4 documents;
# the ones that are no JSON at all are the client's to refuse (over HTTP).
MALFORMED = [
    ({"results": "none"}, "without results"),
    ({"object": "list"}, "without results"),
    ([1, 2, 3, 4], "not an object"),
    ({"results": [{"relevance_score": 0.5}]}, "index None"),
    ({"results": [{"index": 7, "relevance_score": 0.5}]}, "index 7 for 4 documents"),
    ({"results": [{"index": True, "relevance_score": 0.5}]}, "index True"),
    ({"results": [{"index": 0}]}, "score None"),
    ({"results": [{"index": 0, "relevance_score": "high"}]}, "score 'high'"),
    ({"results": [{"index": 0, "score": 1.0}, {"index": 0, "score": 0.5}]}, "twice"),
    ({"results": [{"index": 0, "relevance_score": 1.0}]}, "scored 1 of the 4"),
]


@pytest.mark.parametrize(("answer", "words"), MALFORMED)
def test_a_malformed_answer_is_refused_by_what_is_wrong(answer, words):
    with pytest.raises(RerankBadAnswer, match=words):
        scores_from(answer, DOCUMENTS)


def test_a_non_finite_score_is_refused():
    # Python's json reads NaN and Infinity, which no score may be.
    with pytest.raises(RerankBadAnswer, match="score inf"):
        scores_from({"results": [{"index": 0, "relevance_score": float("inf")}]}, 1)


def _refusal(status: int, body: object) -> RerankRejected:
    """What the client raises for an error status and its body: the body read
    as JSON where it is JSON (a text one as it is), as the client reads it."""
    text = body if isinstance(body, str) else json.dumps(body)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    refusal = _rejected("http://box:8080/rerank", status, data, text)
    assert isinstance(refusal, RerankRejected)
    return refusal


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            "HTTP 503: Loading model",
        ),
        (
            429,
            {"error": "Model is overloaded", "error_type": "Overloaded"},
            "HTTP 429: Model is overloaded",
        ),
        (
            422,
            {"detail": [{"loc": ["body", "query"], "msg": "field required"}]},
            "HTTP 422: field required",
        ),
        (
            400,
            {"message": "invalid request: model must be specified"},
            "HTTP 400: invalid request: model must be specified",
        ),
        (502, "Bad Gateway", "HTTP 502: Bad Gateway"),
        (500, {}, "HTTP 500: {}"),
    ],
)
def test_an_error_status_keeps_the_services_own_message(status, body, words):
    refusal = _refusal(status, body)
    assert refusal.status == status
    assert words in refusal.message
