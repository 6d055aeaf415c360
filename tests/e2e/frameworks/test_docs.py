"""docs/integrations.md's examples run as they are written: each Python block of the
LangGraph, LangChain and LlamaIndex sections, in order, against one test server in place
of ``make run``'s (its address swapped in; no LLM, as ``make run``), from a thread as a
script runs them. Each prints exactly the output the docs show under it, and uses no API
its framework has deprecated."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import warnings
from pathlib import Path

from langchain_core._api.deprecation import LangChainDeprecationWarning

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"
SECTIONS = ("## LangGraph", "## LangChain", "## LlamaIndex")


def example(section: str) -> tuple[str, str]:
    """A section's Python block and the first text block after it: what it prints."""
    text = DOC.read_text()
    body = text[text.index(section) :]
    code = re.search(r"```python\n(.*?)```", body, re.S)
    printed = re.search(r"```text\n(.*?)```", body[code.end() :], re.S)
    return code.group(1), printed.group(1)


async def test_the_examples_run_as_written_and_print_what_the_docs_show(harness):
    for section in SECTIONS:
        code, shown = example(section)
        assert "127.0.0.1:50051" in code
        code = code.replace("127.0.0.1:50051", harness.target)
        printed = io.StringIO()

        compiled = compile(code, f"{DOC.name}: {section}", "exec")

        def run(compiled=compiled, printed=printed) -> list[warnings.WarningMessage]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with contextlib.redirect_stdout(printed):
                    exec(compiled, {"__name__": "__example__"})
            return caught

        caught = await asyncio.to_thread(run)
        assert printed.getvalue() == shown, section
        deprecated = [w for w in caught if issubclass(w.category, LangChainDeprecationWarning)]
        assert deprecated == [], [str(w.message) for w in deprecated]
