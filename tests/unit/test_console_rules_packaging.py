"""What ``pip install 'nexus-grpc[console]'`` brings, read from pyproject.toml and
the installed distributions' metadata: the console's web stack and the client, no
server dependency (the walk of tests/unit/distribution_walk.py).

(The console serving where the server's dependencies cannot import, and the
command without the extra, in child interpreters:
tests/e2e/console/test_console_light_install.py.)"""

from __future__ import annotations

import tomllib

from tests.unit.distribution_walk import ROOT, SERVER_DISTRIBUTIONS, closure, distribution_name


def test_the_console_extra_brings_no_server_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["console"]
    assert [distribution_name(r) for r in extra] == ["starlette", "uvicorn", "jinja2"]
    brought = closure(extra + project["dependencies"])
    assert {"starlette", "uvicorn", "jinja2", "grpcio"} <= brought
    assert brought.isdisjoint(SERVER_DISTRIBUTIONS), brought & SERVER_DISTRIBUTIONS
