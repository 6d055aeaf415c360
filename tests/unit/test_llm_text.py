"""What is left of a model's text once its own tokens are stripped
(llm/text.py): thinking blocks and chat-template markers go, whole or split
across a stream's deltas, and a relationship's label becomes snake_case.

The clients that apply them to a served answer are tested against the Ollama
stand-in in tests/integration/llm/test_llm.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus_grpc.llm import StreamCleaner, clean_stream, strip_model_tokens, to_snake_case


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<think>reasoning</think>answer", "answer"),
        ("<THINK>a\nb</THINK>\n\nanswer", "answer"),
        ("<think>cut off while thinking", ""),
        ("reasoning only</think>answer", "answer"),
        ("<|im_start|>assistant\nHello<|im_end|>", "Hello"),
        ("<|im_start|>Hi<|im_end|><|endoftext|>", "Hi"),
        ("a <b> c", "a <b> c"),
    ],
)
def test_strip_model_tokens(raw: str, clean: str) -> None:
    assert strip_model_tokens(raw) == clean


@pytest.mark.parametrize(
    ("label", "snake"),
    [
        ("Works At", "works_at"),
        ("worksAt", "works_at"),
        ("works-at", "works_at"),
        ("WORKS_AT", "works_at"),
        ("  is part of  ", "is_part_of"),
        ("usesHTTPServer", "uses_http_server"),
        ("!!", ""),
    ],
)
def test_to_snake_case(label: str, snake: str) -> None:
    assert to_snake_case(label) == snake


def test_stream_cleaner_handles_split_tags() -> None:
    pieces = ["<th", "ink>sec", "ret</thi", "nk>\n", "<|im_", "start|>assis", "tant\nHel", "lo <b>"]
    pieces += ["<|im_end|>", " end"]
    cleaner = StreamCleaner()
    out = "".join(cleaner.feed(p) for p in pieces) + cleaner.flush()
    assert out == "Hello <b> end"
    raw = "".join(pieces)
    assert strip_model_tokens(raw) == out


async def test_clean_stream_wraps_deltas() -> None:
    async def deltas() -> AsyncIterator[str]:
        for d in ["<think>x", "</think>", "Over", "view"]:
            yield d

    assert [d async for d in clean_stream(deltas())] == ["Over", "view"]
