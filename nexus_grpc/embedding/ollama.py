"""Embedder backed by an Ollama server's /api/embed endpoint."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np
import ollama

from nexus_grpc.core.redact import mask_url

from .embedder import EmbedderUnavailable, EmbeddingDimensionMismatch


class OllamaEmbedder:
    """Embeds through Ollama (e.g. ``nomic-embed-text``). Pure I/O, so nothing to offload."""

    def __init__(
        self,
        host: str,
        model: str = "nomic-embed-text",
        dimension: int = 768,
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        self.host = mask_url(host)  # for messages: the client below gets the real one
        self.model = model
        self.dimension = dimension
        # Prefixed so a switch between a local and an Ollama-served model of the same
        # name is still seen as a model change.
        self.model_id = f"ollama:{model}"
        self._batch_size = batch_size
        self._client = ollama.AsyncClient(host=host, timeout=timeout)

    #: Not fitted for any Ollama model; MiniLM's value is a middle ground.
    similarity_temperature: float = 0.05
    #: Not fitted either, and a model's cosines may start anywhere: no floor.
    similarity_floor: float = -1.0

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self.embed([text])
        return vector

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(
                await self._embed_batch([str(t) for t in texts[start : start + self._batch_size]])
            )
        return out

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        try:
            resp = await self._client.embed(model=self.model, input=texts)
        except ollama.ResponseError as e:
            raise EmbedderUnavailable(
                f"ollama at {self.host} answered HTTP {e.status_code} for model "
                f"{self.model!r}: {e.error}"
            ) from e
        # ollama maps httpx.ConnectError to the builtin ConnectionError; timeouts and
        # other transport failures surface as raw httpx errors.
        except (ConnectionError, httpx.HTTPError, TimeoutError) as e:
            raise EmbedderUnavailable(f"ollama at {self.host} unreachable: {e}") from e
        vectors = np.asarray(resp.embeddings, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbedderUnavailable(
                f"ollama returned {vectors.shape[0] if vectors.ndim else 0} embeddings "
                f"for {len(texts)} inputs"
            )
        if vectors.shape[1] != self.dimension:
            raise EmbeddingDimensionMismatch(
                f"ollama model {self.model!r} returns {vectors.shape[1]}-d vectors but the "
                f"embedder is configured for {self.dimension}; set the dimension to match"
            )
        # /api/embed normalises already; re-normalising is cheap and guarantees the contract.
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.clip(norms, 1e-12, None)).tolist()  # type: ignore[no-any-return]

    async def close(self) -> None:
        # AsyncClient wraps an httpx.AsyncClient; close its connection pool.
        await self._client._client.aclose()
