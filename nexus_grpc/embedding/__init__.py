"""Text embedders: offline MiniLM (default) or E5, or a remote Ollama server."""

from __future__ import annotations

from .e5 import E5Embedder
from .embedder import Embedder, EmbedderUnavailable, EmbeddingDimensionMismatch
from .minilm import MiniLMEmbedder
from .ollama import OllamaEmbedder
from .query_cache import QueryVectorCache

__all__ = [
    "E5Embedder",
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingDimensionMismatch",
    "MiniLMEmbedder",
    "OllamaEmbedder",
    "QueryVectorCache",
    "make_embedder",
]


def make_embedder(
    kind: str = "minilm",
    *,
    ollama_host: str | None = None,
    ollama_model: str = "nomic-embed-text",
    threads: int = 0,
    ollama_dimension: int = 768,
    ollama_timeout: float = 30.0,
) -> Embedder:
    """Build the configured embedder. ``threads`` <= 0 picks a default for the host."""
    kind = (kind or "minilm").strip().lower()
    if kind == "e5":
        return E5Embedder(threads=threads if threads > 0 else None)
    if kind == "minilm":
        return MiniLMEmbedder(threads=threads if threads > 0 else None)
    if kind == "ollama":
        if not ollama_host:
            raise ValueError("embedder 'ollama' needs an Ollama host (e.g. http://127.0.0.1:11434)")
        return OllamaEmbedder(
            ollama_host, model=ollama_model, dimension=ollama_dimension, timeout=ollama_timeout
        )
    raise ValueError(f"unknown embedder {kind!r}; expected 'minilm', 'e5' or 'ollama'")
