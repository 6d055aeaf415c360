"""Throwaway certificates made with the openssl CLI, for the tests that serve
or dial TLS: ``make_ca`` a certificate authority, ``issue`` a certificate it
signs, ``ca_server_and_client`` the set of one CA, a server certificate for
127.0.0.1/localhost and a client one. ``openssl_or_skip`` skips a test where
the CLI is missing (and fails it in CI, where .ci/run installs it). Not a
test module: the TLS and mTLS tests of the API (tests/e2e/api/test_auth.py),
the health check (tests/e2e/server/test_health_check_command.py) and the
agent hook (tests/e2e/agent_hooks/test_hook_run.py) make their certificates
the same way."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def openssl_or_skip() -> None:
    """Skips the test without the openssl CLI; in CI, fails it (a failed setup)."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):  # .ci/run installs it: missing there is a failed setup
            pytest.fail("openssl CLI not installed")
        pytest.skip("openssl CLI not installed")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(name: str, cwd: Path, subject: str | None = None) -> None:
    """A CA: ``name``.key and ``name``.pem, its subject's CN ``subject`` (else ``name``)."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN={subject or name}", cwd=cwd)  # fmt: skip


def issue(name: str, ca: str, cn: str, ext: str, cwd: Path) -> None:
    """``name``.key and ``name``.pem, for CN ``cn`` with extensions ``ext``, signed by ``ca``."""
    (cwd / f"{name}.ext").write_text(ext + "\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
            cwd=cwd)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem",
            "-extfile", f"{name}.ext", cwd=cwd)  # fmt: skip


def ca_server_and_client(d: Path) -> Path:
    """In ``d``: ca.pem, server.pem/.key for 127.0.0.1 and localhost, client.pem/.key."""
    make_ca("ca", d, "nexus test CA")
    issue("server", "ca", "localhost",
          "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth", d)  # fmt: skip
    issue("client", "ca", "orchestrator", "extendedKeyUsage=clientAuth", d)
    return d
