"""TLS and mTLS server credentials from ``--tls-cert``, ``--tls-key`` and ``--tls-client-ca``."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from nexus_grpc.runtime.config import Settings

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


class TLSConfigError(ValueError):
    pass


def _read(flag: str, path: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"{flag}: cannot read {path}: {exc}") from exc
    if b"-----BEGIN" not in data:
        raise TLSConfigError(f"{flag}: {path} is not PEM")
    return data


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials, or None for plaintext; mTLS when a client CA is given."""
    if not settings.tls_cert and not settings.tls_key:
        if settings.tls_client_ca:
            raise TLSConfigError("--tls-client-ca needs --tls-cert and --tls-key")
        if settings.auth_keys_file and not _is_loopback(settings.listen):
            log.warning(
                "API keys are enabled but %s is plaintext: keys cross the network readable;"
                " set --tls-cert and --tls-key",
                settings.listen,
            )
        return None
    if not (settings.tls_cert and settings.tls_key):
        raise TLSConfigError("--tls-cert and --tls-key must be given together")
    cert = _read("--tls-cert", settings.tls_cert)
    key = _read("--tls-key", settings.tls_key)
    client_ca = _read("--tls-client-ca", settings.tls_client_ca) if settings.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _is_loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0]
    return host in LOOPBACK_HOSTS
