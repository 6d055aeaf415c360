"""Prompt sizes in tokens, and the context window a call asks for.

Why an upper bound and not a guess: Ollama (and llama.cpp) silently drop the
*front* of a prompt that does not fit ``num_ctx``, which is where the system
prompt and the instructions are.  An under-estimate is therefore a silent
wrong answer; an over-estimate only costs an extra part or batch.

The bound: the models we name (qwen2.5, SmolLM2, llama 3, and any model with a
byte-level BPE or a byte-fallback SentencePiece vocabulary) never produce more
tokens than the UTF-8 bytes of the text, because every token stands for at
least one byte.  ``estimate_tokens`` counts those bytes, plus the chat
template's control tokens per message.  For English it over-counts about 3-4x
(a token is ~4 characters); on qwen2.5's 32k context that still leaves room
for ~25 kB of input per call, and long input is split on purpose by the
callers (``budget_for``), never cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# <|im_start|>role\n ... <|im_end|>\n is 5 tokens in ChatML; llama 3's header is
# 4-5.  Counted generously so templates we have not seen still fit.
TEMPLATE_TOKENS_PER_MESSAGE = 12
# The generation prompt (<|im_start|>assistant\n) and a BOS token.
TEMPLATE_TOKENS_PER_CALL = 16
# num_ctx is asked for in these steps (powers of two from here) so the runner
# is not reloaded for every distinct prompt size: Ollama restarts a model's
# runner whenever num_ctx changes.
MIN_NUM_CTX = 2048
# When the server cannot say how long a model's context is, assume what
# Ollama itself defaults to: a call never asks for more than it may get.
DEFAULT_CONTEXT_LENGTH = 4096


def estimate_tokens(text: str) -> int:
    """An upper bound on the tokens of ``text`` for the models we name."""
    return len(text.encode("utf-8"))


def estimate_messages(messages: Sequence[Mapping[str, Any]]) -> int:
    """An upper bound on the prompt tokens of a chat request."""
    total = TEMPLATE_TOKENS_PER_CALL
    for message in messages:
        total += TEMPLATE_TOKENS_PER_MESSAGE + estimate_tokens(str(message.get("content") or ""))
    return total


# What an account counts when the server's answer gives no token counts (an
# OpenAI-compatible stream without usage, Ollama leaving prompt_eval_count out
# for a prompt it had cached): a typical byte-level BPE vocabulary spends about
# one token per 4 bytes of English. Never a size bound (that is
# ``estimate_tokens``, 3-4x higher): a budget charged by the bound would run
# out three times too early. Calls counted this way are marked ``estimated``.
BYTES_PER_TOKEN = 4
# ChatML's per-message control tokens (<|im_start|>role\n ... <|im_end|>\n),
# and the generation prompt of a call.
TYPICAL_TOKENS_PER_MESSAGE = 5
TYPICAL_TOKENS_PER_CALL = 3


def approximate_tokens(text: str) -> int:
    """About how many tokens ``text`` is (for accounting, not for sizing)."""
    size = len(text.encode("utf-8"))
    return 0 if size == 0 else max(1, round(size / BYTES_PER_TOKEN))


def approximate_messages(messages: Sequence[Mapping[str, Any]]) -> int:
    """About how many prompt tokens a chat request is (for accounting)."""
    return TYPICAL_TOKENS_PER_CALL + sum(
        TYPICAL_TOKENS_PER_MESSAGE + approximate_tokens(str(m.get("content") or ""))
        for m in messages
    )


def num_ctx_for(prompt_tokens: int, num_predict: int, context_length: int) -> int:
    """The context window to ask for: room for the prompt and the answer,
    rounded up to a power of two, never more than the model has."""
    need = prompt_tokens + num_predict
    size = MIN_NUM_CTX
    while size < need:
        size *= 2
    return min(size, context_length)


def input_budget(context_length: int, num_predict: int, overhead_tokens: int) -> int:
    """Tokens left for the variable input of a call (an episode, titles,
    summaries) once the answer and the fixed prompt text are reserved."""
    return max(0, context_length - num_predict - overhead_tokens)


def split_to_budget(text: str, budget_tokens: int) -> list[str]:
    """Cut ``text`` into consecutive parts of at most ``budget_tokens`` each,
    at paragraph, line or sentence ends where there is one in the second half
    of a part (a fact cut mid-word is lost to both parts)."""
    if budget_tokens <= 0:
        raise ValueError("budget_tokens must be positive")
    parts: list[str] = []
    rest = text
    while estimate_tokens(rest) > budget_tokens:
        # Bytes are the bound: take the longest prefix that fits in bytes.
        head = rest.encode("utf-8")[:budget_tokens].decode("utf-8", errors="ignore")
        cut = len(head)
        for sep in ("\n\n", "\n", ". ", " "):
            at = head.rfind(sep, len(head) // 2)
            if at > 0:
                cut = at + len(sep)
                break
        parts.append(rest[:cut])
        rest = rest[cut:]
    if rest or not parts:
        parts.append(rest)
    return parts
