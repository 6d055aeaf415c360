"""Safe by default: who may reach the console, and which requests may change anything.

- **Host and Origin.** On loopback the console answers only to its own
  address (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``): a web page
  elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its
  own name as ``Host`` and is refused.  A request that carries an ``Origin``
  (every browser POST and cross-site fetch does) must come from the console's
  own origin, wherever it is bound.
- **Login.** Bound beyond loopback (or given ``--console-token-file``), every
  page asks for the token printed at start; a correct one sets an HttpOnly,
  SameSite=Strict cookie holding a value derived from it (never the token).
  Scripts may send ``Authorization: Bearer TOKEN`` instead.
- **CSRF.** Every state-changing request is a POST whose form carries the
  token of the ``nexus_console_csrf`` cookie (double submit); the routes
  check it with :func:`check_csrf` before any call to the server.
- Every answer forbids framing, inline scripts and other origins' assets
  (Content-Security-Policy), so what the console shows cannot be dressed up
  by another site, nor run code it did not ship.

The API key never reaches the browser: it lives in this process's gRPC
client only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSRF_COOKIE", "LOGIN_COOKIE", "Guard", "GuardSettings", "check_csrf", "csrf_token"]

LOGIN_COOKIE = "nexus_console_login"
CSRF_COOKIE = "nexus_console_csrf"
CSRF_FIELD = "csrf_token"
#: Paths served without a login: the login form itself and the static files
#: it uses (they hold no data).
OPEN_PREFIXES = ("/login", "/static/")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        # Inline styles: cytoscape sets its canvas's; scripts stay strict.
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
        b" img-src 'self' data:; connect-src 'self'; frame-ancestors 'none';"
        b" form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
#: Pages hold what a key may see: never kept by the browser or a proxy. The
#: static files are revalidated (their ETag answers 304), so the browser keeps
#: its compiled copy of the graph library between pages.
NO_STORE = (b"cache-control", b"no-store")
REVALIDATE = (b"cache-control", b"no-cache")


class Refused(Exception):
    """A request the console does not serve: its status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class GuardSettings:
    host: str
    port: int
    loopback: bool
    #: The login token; None: no login (loopback without a token file).
    login_token: str | None = None
    #: Signs the login cookie; new each start, so a restart logs everyone out.
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def allowed_hosts(self) -> frozenset[str]:
        names = set(LOOPBACK_NAMES)
        names.add(f"[{self.host}]" if ":" in self.host else self.host)
        hosts = {f"{n}:{self.port}" for n in names}
        if self.port == 80:
            hosts |= names
        return frozenset(hosts)

    def login_value(self) -> str:
        assert self.login_token is not None
        return hmac.new(self.secret, self.login_token.encode(), hashlib.sha256).hexdigest()


def _cookies(headers: Mapping[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no cookie
        return {}
    return {k: v.value for k, v in jar.items()}


def csrf_token(scope: Scope) -> str:
    """This browser's CSRF token, to put in every form."""
    return str(scope.get("state", {}).get("csrf_token", ""))


def check_csrf(scope: Scope, form: Mapping[str, Any]) -> None:
    """Refuses (403) a POST whose form lacks the browser's CSRF token."""
    expected = _cookies(_headers(scope)).get(CSRF_COOKIE, "")
    sent = str(form.get(CSRF_FIELD, ""))
    if not expected or not hmac.compare_digest(expected.encode(), sent.encode()):
        raise Refused(
            403,
            "refused: this form did not carry the console's CSRF token (reload the page and"
            " try again; a form posted from another site is never accepted)",
        )


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class Guard:
    """The ASGI middleware in front of every route."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings
        self.hosts = settings.allowed_hosts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        try:
            self._check_host(headers)
            self._check_origin(scope, headers)
            cookies = _cookies(headers)
            redirect = self._check_login(scope, headers, cookies)
        except Refused as refused:
            await _plain(send, refused.status, refused.message, wants_json(scope))
            return
        if redirect is not None:
            await _redirect(send, redirect)
            return
        csrf = cookies.get(CSRF_COOKIE, "")
        fresh = not csrf or len(csrf) != 43
        if fresh:
            csrf = secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf_token"] = csrf

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                static = scope["path"].startswith("/static/")
                extra = [*SECURITY_HEADERS, REVALIDATE if static else NO_STORE]
                if fresh:
                    extra.append(
                        (
                            b"set-cookie",
                            f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict".encode(),
                        )
                    )
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check_host(self, headers: Mapping[str, str]) -> None:
        if not self.settings.loopback:
            return
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            raise Refused(
                403,
                f"refused: Host {host[:100]!r} is not this console's address"
                f" ({', '.join(sorted(self.hosts))}); a page elsewhere may not reach a"
                " console on loopback through its own name",
            )

    def _check_origin(self, scope: Scope, headers: Mapping[str, str]) -> None:
        origin = headers.get("origin")
        if origin is None:
            return
        if urlsplit(origin).netloc.lower() != headers.get("host", "").lower() or origin == "null":
            raise Refused(
                403,
                f"refused: a request from {origin[:100]!r}, another origin than this console",
            )

    def _check_login(
        self, scope: Scope, headers: Mapping[str, str], cookies: Mapping[str, str]
    ) -> str | None:
        """None when the request may go on; else where to send a browser to log in."""
        token = self.settings.login_token
        path: str = scope["path"]
        if token is None or path.startswith(OPEN_PREFIXES):
            return None
        cookie = cookies.get(LOGIN_COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self.settings.login_value().encode()):
            return None
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and hmac.compare_digest(
            bearer[len("Bearer ") :].encode(), token.encode()
        ):
            return None
        if scope["method"] in ("GET", "HEAD") and not wants_json(scope):
            query = scope.get("query_string", b"").decode("latin-1")
            back = path + (f"?{query}" if query else "")
            return f"/login?next={quote(back, safe='')}"
        raise Refused(401, "log in first: this console asks for the token printed at its start")


def wants_json(scope: Scope) -> bool:
    path: str = scope.get("path", "")
    return path.endswith(".json") or path.endswith("/events")


def safe_next(value: str) -> str:
    """Where to go after logging in: a path of this console, never another site."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def _plain(send: Send, status: int, message: str, as_json: bool) -> None:
    if as_json:
        import json

        body = json.dumps({"error": {"code": status, "message": message}}).encode()
        kind = b"application/json"
    else:
        body = message.encode()
        kind = b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind), *SECURITY_HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode("latin-1")), *SECURITY_HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": b""})
