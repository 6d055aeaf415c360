"""A cross-encoder reranker on the LAN (``--reranker-url``): the HTTP API that
llama.cpp's llama-server, Hugging Face TEI, Infinity and Jina/Cohere-compatible
services share (``client``), used within each search's deadline (``reranker``)."""

from nexus_grpc.rerank.client import RerankClient, endpoint_of, scores_from
from nexus_grpc.rerank.rerank_errors import (
    RerankBadAnswer,
    RerankError,
    RerankRejected,
    RerankSkipped,
    RerankTimeout,
    RerankUnreachable,
)
from nexus_grpc.rerank.reranker import Reranker, RerankStats

__all__ = [
    "RerankBadAnswer",
    "RerankClient",
    "RerankError",
    "RerankRejected",
    "RerankSkipped",
    "RerankStats",
    "RerankTimeout",
    "RerankUnreachable",
    "Reranker",
    "endpoint_of",
    "scores_from",
]
