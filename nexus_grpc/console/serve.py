"""``nexus-grpc console``: binds the address, says where it is, and serves.

The socket is bound before anything else, so ``--listen 127.0.0.1:0`` works
and the address printed is the one bound.  Beyond loopback (or with
``--console-token-file``) a login token is required: one is made and
printed at start unless the file names one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import secrets
import socket
import sys

import uvicorn

from nexus_grpc.client import NexusClient
from nexus_grpc.console.options import ListenAddress
from nexus_grpc.console.routes import build_app
from nexus_grpc.console.security import GuardSettings

__all__ = ["bind", "guard_settings", "run"]

MIN_TOKEN_CHARS = 16


class ConsoleConfigError(Exception):
    pass


def bind(address: ListenAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Without it the last piece of each answer waits for the browser's
    # delayed ACK (40 ms) on a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((address.host, address.port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.readline().strip()
    except OSError as exc:
        raise ConsoleConfigError(f"--console-token-file: {exc}") from exc
    if len(token) < MIN_TOKEN_CHARS:
        raise ConsoleConfigError(
            f"--console-token-file {path}: its first line must hold a token of at least"
            f" {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
        )
    return token


def guard_settings(address: ListenAddress, port: int, token_file: str) -> GuardSettings:
    """Whether a login is asked, and with which token."""
    token: str | None = None
    if token_file:
        token = read_token(token_file)
    elif not address.loopback:
        token = secrets.token_urlsafe(24)
    return GuardSettings(host=address.host, port=port, loopback=address.loopback, login_token=token)


async def _serve(client: NexusClient, address: ListenAddress, token_file: str) -> None:
    sock = bind(address)
    port = sock.getsockname()[1]
    guard = guard_settings(address, port, token_file)
    host = f"[{address.host}]" if ":" in address.host else address.host
    print(f"nexus-grpc console: serving on http://{host}:{port}/", file=sys.stderr, flush=True)
    if guard.login_token is not None and not token_file:
        print(
            f"nexus-grpc console: bound beyond loopback, it asks for a login; the token is"
            f" {guard.login_token}",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(
        build_app(client, guard), log_level="warning", lifespan="off", access_log=False
    )
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await client.close()


def run(args: argparse.Namespace, client: NexusClient) -> int:
    """Serves until the process is stopped."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(client, args.listen, args.console_token_file))
    except (ConsoleConfigError, OSError) as exc:
        print(f"nexus-grpc console: {exc}", file=sys.stderr)
        return 2
    return 0
