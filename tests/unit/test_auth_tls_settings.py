"""The TLS settings a server starts with (runtime/tls.py), checked before it
starts: a certificate and its key go together, a client CA needs both, a
file that cannot be read or is not PEM is named. Called directly on
Settings; TLS and mTLS over the wire (a real CA, a real handshake) stay in
tests/e2e/api/test_auth.py, which moved these checks here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nexus_grpc.runtime.config import Settings
from nexus_grpc.runtime.tls import TLSConfigError, server_credentials


def settings(**tls: str) -> Settings:
    return Settings(listen="127.0.0.1:0", data_dir=Path("unused"), **tls)


def test_a_certificate_without_its_key_is_refused():
    with pytest.raises(ValueError, match="together"):
        server_credentials(settings(tls_cert="server.pem"))
    with pytest.raises(TLSConfigError, match="--tls-cert and --tls-key must be given together"):
        server_credentials(settings(tls_key="server.key"))


def test_a_client_ca_needs_a_certificate_and_key():
    with pytest.raises(ValueError, match="needs"):
        server_credentials(settings(tls_client_ca="ca.pem"))


def test_a_file_that_cannot_be_read_is_named(tmp_path):
    missing = tmp_path / "nope.pem"
    with pytest.raises(ValueError, match="cannot read") as err:
        server_credentials(settings(tls_cert=str(missing), tls_key=str(tmp_path / "server.key")))
    assert str(err.value).startswith(f"--tls-cert: cannot read {missing}")


def test_a_file_that_is_not_pem_is_named(tmp_path):
    """The loader's own job is reading the file it is given: a bad one here."""
    cert = tmp_path / "server.pem"
    cert.write_text("not a certificate")
    with pytest.raises(TLSConfigError, match=f"--tls-cert: {cert} is not PEM"):
        server_credentials(settings(tls_cert=str(cert), tls_key=str(cert)))


def test_no_tls_is_plaintext_and_keys_off_loopback_are_warned_of(caplog):
    assert server_credentials(settings()) is None
    with caplog.at_level(logging.WARNING, logger="nexus_grpc.runtime.tls"):
        local = Settings(listen="127.0.0.1:0", data_dir=Path("unused"), auth_keys_file="k.json")
        assert server_credentials(local) is None
        assert not caplog.records
        wide = Settings(listen="0.0.0.0:50051", data_dir=Path("unused"), auth_keys_file="k.json")
        assert server_credentials(wide) is None
    assert any("keys cross the network readable" in r.getMessage() for r in caplog.records)
