"""Credentials kept out of everything the server says: RPC answers and the log.

Every URL an operator configures may carry a credential (``user:password@``,
or a ``password=`` query parameter, which libpq reads), and two settings are
keys themselves. Two layers keep them in:

- At the source, each component that names its server in a message names it
  through ``mask_url`` (the database, the vector index, the embedder and the
  LLM clients), and status lines are built from those names.
- At the boundaries (the log formatters, error and degraded messages sent to
  clients, GetServiceStatus's details), ``scrub`` replaces every credential
  the configuration holds (``remember``), wherever a library quoted it, and
  masks the password of any URL it finds in the text.

Masking is one way for every URL, so a URL reads the same in a status line,
an error and the log: ``scheme://user:***@host:port/path?password=***``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

#: Query parameters whose values are credentials (compared without case).
SECRET_PARAMETERS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "sslpassword",
        "secret",
        "token",
        "access_token",
        "api_key",
        "apikey",
        "api-key",
        "key",
        "auth",
    }
)
# Shorter values are not replaced as text (they would mask ordinary words);
# they are still masked wherever they stand in a URL.
MIN_SECRET_CHARS = 4

# ``scheme://user:password@``: the password is the group replaced.
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]*:)[^\s/@]*@")
# ``password=value`` inside a URL's query, wherever the URL appears.
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&](?:" + "|".join(map(re.escape, sorted(SECRET_PARAMETERS))) + r")=)[^&\s#'\"]+",
    re.IGNORECASE,
)

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def mask_url(url: str) -> str:
    """The URL with its password and any credential in its query replaced by
    ``***``; the user name, host, port and path stay, so it can still be told
    apart in a message."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
        username = parts.username
        hostname = parts.hostname
        port = parts.port
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if password is not None:
        host = hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        netloc = f"{username or ''}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name.lower() in SECRET_PARAMETERS for name, _ in pairs):
            query = urlencode(
                [(n, MASK if n.lower() in SECRET_PARAMETERS else v) for n, v in pairs], safe="*"
            )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: its password and secret query values."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.password] if parts.password else []
    except ValueError:
        return [url]  # unparseable: the whole value is kept out
    found += [v for n, v in parse_qsl(parts.query) if n.lower() in SECRET_PARAMETERS and v]
    return found


def remember(secrets: Iterable[str]) -> None:
    """Adds credentials that ``scrub`` replaces wherever they appear (longest
    first, so one that contains another is replaced whole)."""
    global _secrets
    fresh = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | fresh, key=len, reverse=True))


def forget() -> None:
    """Drops every remembered credential (tests)."""
    global _secrets
    with _lock:
        _secrets = ()


def scrub(text: str) -> str:
    """``text`` with every remembered credential, and the password and secret
    query values of any URL in it, replaced by ``***``."""
    if not text:
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text:
        text = _USERINFO.sub(rf"\g<head>{MASK}@", text)
    if "=" in text:
        text = _QUERY_SECRET.sub(rf"\g<head>{MASK}", text)
    return text
