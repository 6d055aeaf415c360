"""`pip install 'nexus-grpc[console]'` is the console and the client, without the
server's dependencies: the console serves in a child interpreter where they cannot
import; without the extra, `nexus-grpc console` says what to install and the rest
of the command still works.

What the extra brings, read from pyproject.toml and the installed metadata, is
tested without a subprocess in tests/unit/test_console_rules_packaging.py."""

from __future__ import annotations

import asyncio
import http.cookiejar
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

from nexus_grpc.console.security import CSRF_COOKIE
from tests.light_install import ROOT, RUN_CLI, SERVER_IMPORTS, blocker

CONSOLE_IMPORTS = ("starlette", "uvicorn", "jinja2")


async def test_the_console_serves_without_the_server_dependencies(harness):
    # Nor python-multipart, which Starlette's own form parsing needs: the
    # console reads its (urlencoded) forms itself.
    blocked = (*SERVER_IMPORTS, "multipart", "python_multipart")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", blocker(blocked) + RUN_CLI, "console",
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

        def post_a_form() -> tuple[int, str]:
            # A browser's round: the page sets the CSRF cookie, the form sends it back.
            jar = http.cookiejar.CookieJar()
            opener = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(jar), _NoRedirect()
            )
            opener.open(url + "retry-failed-extractions", timeout=10).read()
            [csrf] = [c.value for c in jar if c.name == CSRF_COOKIE]
            form = urllib.parse.urlencode({"csrf_token": csrf}).encode()
            try:
                opener.open(url + "retry-failed-extractions", data=form, timeout=10)
            except urllib.error.HTTPError as answer:
                return answer.code, answer.headers.get("location", "")
            raise AssertionError("the form's answer was not a redirect")

        status, location = await asyncio.to_thread(post_a_form)
        assert status == 303 and location.startswith("/status?done=0+failed"), (status, location)
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The form's 303 as it is: where it sends the browser is the answer."""

    def redirect_request(self, *args, **kwargs):
        return None
