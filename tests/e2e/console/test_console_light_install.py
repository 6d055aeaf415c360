"""`pip install 'nexus-grpc[console]'` is the console and the client, without the
server's dependencies; without the extra, `nexus-grpc console` says what to install
and the rest of the command still works."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tomllib
import urllib.request

from tests.e2e.mcp.test_mcp_light_install import (
    ROOT,
    RUN_CLI,
    SERVER_DISTRIBUTIONS,
    SERVER_IMPORTS,
    _closure,
    _name,
    blocker,
)

CONSOLE_IMPORTS = ("starlette", "uvicorn", "jinja2")


def test_the_console_extra_brings_no_server_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["console"]
    assert [_name(r) for r in extra] == ["starlette", "uvicorn", "jinja2"]
    brought = _closure(extra + project["dependencies"])
    assert {"starlette", "uvicorn", "jinja2", "grpcio"} <= brought
    assert brought.isdisjoint(SERVER_DISTRIBUTIONS), brought & SERVER_DISTRIBUTIONS


async def test_the_console_serves_without_the_server_dependencies(harness):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", blocker(SERVER_IMPORTS) + RUN_CLI, "console",
        "--target", harness.target, "--listen", "127.0.0.1:0",
        cwd=str(ROOT), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()
        assert "serving on http://127.0.0.1:" in line, line
        url = line.split("serving on ", 1)[1].strip()

        def fetch() -> tuple[int, str]:
            with urllib.request.urlopen(url + "status.json", timeout=10) as answer:
                return answer.status, answer.read().decode()

        status, body = await asyncio.to_thread(fetch)
        assert status == 200 and '"state"' in body
    finally:
        process.terminate()
        await process.wait()


def test_without_the_extra_console_says_what_to_install_and_the_cli_still_works():
    blocked = subprocess.run(
        [sys.executable, "-c", blocker(CONSOLE_IMPORTS) + "import starlette"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert blocked.returncode != 0  # positive control: the blocker blocks
    result = subprocess.run(
        [sys.executable, "-c", blocker(CONSOLE_IMPORTS) + RUN_CLI, "console"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "pip install 'nexus-grpc[console]'" in result.stderr
    helped = subprocess.run(
        [sys.executable, "-c", blocker(CONSOLE_IMPORTS) + RUN_CLI, "console", "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert helped.returncode == 0 and "--listen" in helped.stdout
