"""Safe by default: who may reach the console, and which requests may change anything.

- **Host and Origin.** On loopback the console answers only to its own
  address (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``): a web page
  elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its
  own name as ``Host`` and is refused.  A request that carries an ``Origin``
  (every browser POST and cross-site fetch does) must come from the console's
  own origin, wherever it is bound.
- **CSRF.** Every request that is not a GET or HEAD is a form whose
  ``csrf_token`` field carries the token of the browser's
  ``nexus_console_csrf`` cookie (double submit).  The guard checks it before
  any route runs, so no route can forget it, and hands the route the form it
  parsed (``form_of``): the console needs no multipart library.
- **Login.** Bound beyond loopback (or given ``--console-token-file``), every
  page asks for the token printed at start.  A correct one opens a login of
  its own (:class:`Logins`): a random value in an HttpOnly, SameSite=Strict
  cookie with a ``Max-Age`` (``Secure`` when the console is reached over
  TLS), which logging out or a restart ends.  Scripts may send
  ``Authorization: Bearer TOKEN`` instead.  Wrong tokens are counted, per
  client address and over all of them, and past the limit no token is even
  compared until the window has passed.
- Every answer forbids framing, inline scripts and other origins' assets
  (Content-Security-Policy), so what the console shows cannot be dressed up
  by another site, nor run code it did not ship.
- Every place the console sends a browser to a path it was given (after a
  login, an action, a "go back" link) takes it through :func:`safe_next`,
  which reads it as a browser would.

The API key never reaches the browser: it lives in this process's gRPC
client only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CSRF_COOKIE",
    "LOGIN_COOKIE",
    "Guard",
    "GuardSettings",
    "LoginLimits",
    "Logins",
    "Refused",
    "csrf_token",
    "form_of",
    "login_cookie",
    "logout_cookie",
    "safe_next",
]

LOGIN_COOKIE = "nexus_console_login"
CSRF_COOKIE = "nexus_console_csrf"
CSRF_FIELD = "csrf_token"
#: Paths served without a login: the login form itself, logging out, and the
#: static files they use (which hold no data).
OPEN_PREFIXES = ("/login", "/logout", "/static/")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: The methods that change nothing, and so need no CSRF token.
SAFE_METHODS = ("GET", "HEAD")
#: The largest form the console reads: its forms hold a token, an id or two
#: and a path.
MAX_FORM_BYTES = 64 * 1024
#: How long a login lasts, in the cookie (Max-Age) and in this process.
LOGIN_SECONDS = 12 * 3600
#: Logins held at once; the oldest goes first (each one needed the token).
MAX_LOGINS = 1000

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
#: What a browser drops before it parses a URL (WHATWG URL): C0 controls and
#: spaces at either end, tabs and newlines anywhere.
_EDGE_JUNK = "".join(chr(c) for c in range(0x21))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
#: Characters a path given back keeps as they are; anything else (a space, a
#: quote, a backslash, a control, non-ASCII) is percent-encoded.
_PATH_SAFE = "/?#[]@!$&'()*+,;=:-._~%"


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

    def allowed_hosts(self) -> frozenset[str]:
        names = set(LOOPBACK_NAMES)
        names.add(f"[{self.host}]" if ":" in self.host else self.host)
        hosts = {f"{n}:{self.port}" for n in names}
        if self.port == 80:
            # A browser leaves the default port out of Host.
            hosts |= names
        return frozenset(hosts)


@dataclass(frozen=True)
class LoginLimits:
    """Wrong tokens allowed within ``window_seconds``: from one client
    address, and from all of them together (a token-guessing botnet)."""

    per_client: int = 10
    overall: int = 100
    window_seconds: float = 300.0


class Logins:
    """The console's logins: the token check, the wrong tries counted, and
    each browser's login as a random value of its own.

    A login cookie is a fresh random value per login, kept here (as its
    SHA-256, so the table's lookup times tell nothing of a value) until it
    expires or its browser logs out; a restart forgets every one."""

    def __init__(
        self,
        token: str | None,
        limits: LoginLimits = LoginLimits(),
        *,
        lifetime: float = LOGIN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.limits = limits
        self.lifetime = lifetime
        self.clock = clock
        self._logins: dict[bytes, float] = {}
        self._wrong: dict[str, deque[float]] = {}
        self._all_wrong: deque[float] = deque()

    # The token ---------------------------------------------------------------

    def check_token(self, client: str, sent: str) -> bool:
        """Whether ``sent`` is the token. Refuses (429) without comparing while
        ``client``, or every client together, has tried too many wrong ones."""
        assert self.token is not None
        self._refuse_when_limited(client)
        if hmac.compare_digest(sent.encode(), self.token.encode()):
            return True
        now = self.clock()
        self._wrong.setdefault(client, deque()).append(now)
        self._all_wrong.append(now)
        return False

    def _refuse_when_limited(self, client: str) -> None:
        now = self.clock()
        window = self.limits.window_seconds
        for tries in (self._all_wrong, self._wrong.get(client, deque())):
            while tries and tries[0] <= now - window:
                tries.popleft()
        if client in self._wrong and not self._wrong[client]:
            del self._wrong[client]
        mine = self._wrong.get(client, deque())
        minutes = f"{window / 60:g} minutes"
        if len(mine) >= self.limits.per_client:
            raise Refused(
                429,
                f"too many wrong tokens from {client} ({len(mine)} in {minutes}): try again"
                f" in {_wait(mine[0] + window - now)}; no token is checked until then",
            )
        if len(self._all_wrong) >= self.limits.overall:
            raise Refused(
                429,
                f"too many wrong tokens tried on this console ({len(self._all_wrong)} in"
                f" {minutes}, from every address): logging in waits"
                f" {_wait(self._all_wrong[0] + window - now)}; those already logged in stay so",
            )

    # Logins ------------------------------------------------------------------

    def open(self) -> str:
        """A new login: the value its cookie holds."""
        now = self.clock()
        for key in [k for k, until in self._logins.items() if until <= now]:
            del self._logins[key]
        while len(self._logins) >= MAX_LOGINS:
            del self._logins[next(iter(self._logins))]
        value = secrets.token_urlsafe(32)
        self._logins[_digest(value)] = now + self.lifetime
        return value

    def valid(self, value: str) -> bool:
        until = self._logins.get(_digest(value)) if value else None
        if until is None:
            return False
        if until <= self.clock():
            del self._logins[_digest(value)]
            return False
        return True

    def close(self, value: str) -> None:
        if value:
            self._logins.pop(_digest(value), None)


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def _wait(seconds: float) -> str:
    seconds = max(1, int(seconds + 0.999))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def login_cookie(value: str, *, secure: bool, lifetime: float = LOGIN_SECONDS) -> str:
    """The Set-Cookie value of a login: HttpOnly, SameSite=Strict, a Max-Age,
    and Secure where the console is reached over TLS (so the browser never
    sends it over plain HTTP)."""
    tls = "; Secure" if secure else ""
    return (
        f"{LOGIN_COOKIE}={value}; Path=/; Max-Age={int(lifetime)}; HttpOnly; SameSite=Strict{tls}"
    )


def logout_cookie(*, secure: bool) -> str:
    tls = "; Secure" if secure else ""
    return f"{LOGIN_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{tls}"


def safe_next(value: str, default: str = "/") -> str:
    """Where to send a browser: a path of this console, never another site.

    Checked as a browser reads it: tabs and newlines anywhere and controls
    at either end are dropped, a backslash is a slash, so ``/\\t/evil``,
    ``/\\\\evil`` and ``\\\\evil`` are ``//evil`` (another host) and refused,
    as are ``https:``, ``javascript:`` and anything else not starting with
    one slash. What is kept comes back percent-encoded (backslashes too), so
    nothing in it is read as anything but this console's path."""
    cleaned = value.strip(_EDGE_JUNK).translate(_TAB_OR_NEWLINE)
    seen = cleaned.replace("\\", "/")
    if not cleaned.startswith("/") or seen.startswith("//"):
        return default
    return quote(cleaned, safe=_PATH_SAFE)


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


def browser_of(scope: Scope) -> str:
    """The browser a request came from, as far as the console can tell: its
    CSRF cookie (set on its first page); empty for a client that never kept
    one."""
    return str(scope.get("state", {}).get("browser", ""))


def form_of(scope: Scope) -> dict[str, str]:
    """The form of a POST, as the guard parsed it (its CSRF token checked)."""
    return dict(scope.get("state", {}).get("form", {}))


def client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


class Guard:
    """The ASGI middleware in front of every route."""

    def __init__(self, app: ASGIApp, settings: GuardSettings, logins: Logins | None = None) -> None:
        self.app = app
        self.settings = settings
        self.hosts = settings.allowed_hosts()
        self.logins = logins if logins is not None else Logins(settings.login_token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        cookies = _cookies(headers)
        csrf = cookies.get(CSRF_COOKIE, "")
        fresh = len(csrf) != 43
        if fresh:
            csrf = secrets.token_urlsafe(32)
        state = scope.setdefault("state", {})
        state["csrf_token"] = csrf
        state["browser"] = "" if fresh else csrf
        try:
            self._check_host(headers)
            self._check_origin(headers)
            if scope["method"] not in SAFE_METHODS:
                body = await _read_body(receive)
                state["form"] = _check_csrf(headers, cookies, body)
                receive = _replay(body, receive)
            redirect = self._check_login(scope, headers, cookies)
        except Refused as refused:
            await _plain(send, refused.status, refused.message, wants_json(scope))
            return
        if redirect is not None:
            await _redirect(send, redirect)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                static = scope["path"].startswith("/static/")
                extra = [*SECURITY_HEADERS, REVALIDATE if static else NO_STORE]
                if fresh:
                    tls = "; Secure" if scope.get("scheme") == "https" else ""
                    cookie = f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict{tls}"
                    extra.append((b"set-cookie", cookie.encode()))
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

    def _check_origin(self, headers: Mapping[str, str]) -> None:
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
        path: str = scope["path"]
        if self.settings.login_token is None or path.startswith(OPEN_PREFIXES):
            return None
        if self.logins.valid(cookies.get(LOGIN_COOKIE, "")):
            return None
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and self.logins.check_token(
            client_of(scope), bearer[len("Bearer ") :]
        ):
            return None
        if scope["method"] in SAFE_METHODS and not wants_json(scope):
            query = scope.get("query_string", b"").decode("latin-1")
            back = path + (f"?{query}" if query else "")
            return f"/login?next={quote(back, safe='')}"
        raise Refused(401, "log in first: this console asks for the token printed at its start")


def _check_csrf(
    headers: Mapping[str, str], cookies: Mapping[str, str], body: bytes
) -> dict[str, str]:
    """The form, once it carries this browser's CSRF token; else refused (403)."""
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    form: dict[str, str] = {}
    if kind == "application/x-www-form-urlencoded":
        try:
            form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except UnicodeDecodeError:
            raise Refused(400, "refused: the form is not UTF-8") from None
    expected = cookies.get(CSRF_COOKIE, "")
    sent = form.get(CSRF_FIELD, "")
    if not expected or not hmac.compare_digest(expected.encode(), sent.encode()):
        raise Refused(
            403,
            "refused: this form did not carry the console's CSRF token (reload the page and"
            " try again; a form posted from another site is never accepted)",
        )
    return form


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refused(400, "refused: the request ended before its body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise Refused(413, f"refused: a console form is at most {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the route: the body already read, then the client's own."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def wants_json(scope: Scope) -> bool:
    path: str = scope.get("path", "")
    return path.endswith(".json") or path.endswith("/events")


async def _plain(send: Send, status: int, message: str, as_json: bool) -> None:
    if as_json:
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
