"""Cleaning raw model text before it is parsed or shown.

Small local models leak template artefacts: reasoning models wrap their
chain-of-thought in ``<think>...</think>``, and Qwen-family models sometimes echo
ChatML control tokens (``<|im_start|>assistant``, ``<|im_end|>``).  None of that
belongs in JSON we parse or in an overview we show a user.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
# A closing tag with no opening one: the chat template opened the block in the
# prompt (Qwen3 style), so everything before the tag is reasoning.
_ORPHAN_CLOSE = re.compile(r"\A.*</think>", re.S | re.I)
# An opening tag that never closes: the model was cut off (num_predict) while
# still thinking, so nothing after it is an answer.
_UNTERMINATED_THINK = re.compile(r"<think>.*\Z", re.S | re.I)
_ROLES = ("system", "user", "assistant", "tool")
_CHATML = re.compile(
    r"<\|im_start\|>(?:[ \t]*(?:" + "|".join(_ROLES) + r")\b)?[ \t]*\n?"
    r"|<\|im_end\|>|<\|endoftext\|>",
    re.I,
)


def strip_model_tokens(text: str) -> str:
    """Remove think blocks and ChatML control tokens; trim the result."""
    text = _THINK_BLOCK.sub("", text)
    text = _ORPHAN_CLOSE.sub("", text)
    text = _UNTERMINATED_THINK.sub("", text)
    text = _CHATML.sub("", text)
    return text.strip()


def to_snake_case(label: str) -> str:
    """Normalise a relationship label: "Works At", "worksAt", "works-at" -> "works_at".

    Labels become graph edge names, so different spellings of the same verb
    must collapse to one key.
    """
    s = label.strip()
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)  # worksAt -> works_At
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)  # HTTPServer -> HTTP_Server
    s = re.sub(r"[\W_]+", "_", s)  # spaces, dashes, punctuation (unicode-aware)
    return s.strip("_").lower()


class StreamCleaner:
    """Incremental ``strip_model_tokens`` for streamed output.

    Deltas arrive in arbitrary pieces ("<th", "ink>"), so text that could be the
    start of a control tag is held back until it can be decided.  Differences
    from the batch version, unavoidable when streaming: an orphan ``</think>``
    only drops the tag (what preceded it was already sent), and trailing
    whitespace is passed through.
    """

    _TAGS = ("<think>", "</think>", "<|im_start|>", "<|im_end|>", "<|endoftext|>")

    def __init__(self) -> None:
        self._buf = ""
        self._in_think = False
        self._after_im_start = False  # drop the role word that follows <|im_start|>
        self._started = False  # leading whitespace is dropped, like .strip()

    def feed(self, delta: str) -> str:
        self._buf += delta
        out: list[str] = []
        while self._buf:
            if self._in_think:
                i = self._buf.lower().find("</think>")
                if i < 0:
                    self._buf = self._keep_partial(self._buf, ("</think>",))
                    break
                self._buf = self._buf[i + len("</think>") :]
                self._in_think = False
                continue
            if self._after_im_start:
                if not self._drop_role():
                    break  # need more text to decide
                continue
            i = self._buf.find("<")
            if i < 0:
                out.append(self._buf)
                self._buf = ""
                break
            out.append(self._buf[:i])
            rest = self._buf[i:]
            low = rest.lower()
            tag = next((t for t in self._TAGS if low.startswith(t)), None)
            if tag is not None:
                self._buf = rest[len(tag) :]
                self._in_think = tag == "<think>"
                self._after_im_start = tag == "<|im_start|>"
                continue
            if any(t.startswith(low) for t in self._TAGS):
                self._buf = rest  # a possible tag, cut mid-way: wait
                break
            out.append("<")
            self._buf = rest[1:]
        return self._emit("".join(out))

    def flush(self) -> str:
        """End of stream: release held-back text (an unfinished think is dropped)."""
        rest = "" if self._in_think else self._buf
        self._buf = ""
        return self._emit(rest)

    def _emit(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            self._started = bool(text)
        return text

    def _drop_role(self) -> bool:
        """Drop "assistant\\n" after <|im_start|>; False if undecidable yet."""
        stripped = self._buf.lstrip(" \t")
        low = stripped.lower()
        for role in _ROLES:
            if low.startswith(role):
                after = stripped[len(role) :]
                if not after:
                    return False
                if after[0].isalnum() or after[0] == "_":
                    break  # "assistants..." is content, not a role tag
                self._buf = after.lstrip(" \t")
                if self._buf.startswith("\n"):
                    self._buf = self._buf[1:]
                self._after_im_start = False
                return True
            if role.startswith(low):
                return False
        self._after_im_start = False
        return True

    @staticmethod
    def _keep_partial(buf: str, tags: tuple[str, ...]) -> str:
        """Inside a think block: keep only a tail that may start a closing tag."""
        low = buf.lower()
        for n in range(min(len(buf), max(len(t) for t in tags) - 1), 0, -1):
            if any(t.startswith(low[-n:]) for t in tags):
                return buf[-n:]
        return ""


async def clean_stream(deltas: AsyncIterator[str]) -> AsyncIterator[str]:
    """Wrap a delta stream (e.g. ``LLMClient.chat_stream``) with ``StreamCleaner``."""
    cleaner = StreamCleaner()
    async for delta in deltas:
        out = cleaner.feed(delta)
        if out:
            yield out
    tail = cleaner.flush()
    if tail:
        yield tail
