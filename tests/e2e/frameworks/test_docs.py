"""docs/integrations.md's examples run as they are written: each Python block of the
LangGraph, LangChain and LlamaIndex sections, against a test server in place of
``make run``'s (its address swapped in), from a thread as a script runs them."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
SECTIONS = ("## LangGraph", "## LangChain", "## LlamaIndex")


def example(section: str) -> str:
    text = DOC.read_text()
    body = text[text.index(section) :]
    return re.search(r"```python\n(.*?)```", body, re.S).group(1)


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
@pytest.mark.parametrize("section", SECTIONS)
async def test_the_example_runs_as_written(harness, section):
    code = example(section)
    assert "127.0.0.1:50051" in code
    code = code.replace("127.0.0.1:50051", harness.target)
    printed = io.StringIO()

    def run() -> None:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{DOC.name}: {section}", "exec"), {"__name__": "__example__"})

    await asyncio.to_thread(run)
    out = printed.getvalue()
    if section == "## LangGraph":
        assert out.strip() == "{'text': 'I love ramen'}"
    elif section == "## LangChain":
        assert "billing service" in out and "keyword" in out
    else:
        assert "I love green tea." in out
