"""Credentials kept out of everything the server says: RPC answers and the log.

Every URL an operator configures may carry a credential: its user info (a
``user:password@``, or a token as the user name), or any query parameter
(``?password=``, which libpq reads, ``?code=``, ``?sig=``, ``?x-api-key=``:
no list of names can know them all). Three settings are keys themselves.
What is sent as credentials is a credential too: httpx turns a URL's user
info into ``Authorization: Basic base64(user:password)``, and the keys go
out as ``Bearer`` values; a service that refuses them may quote them back.
Two layers keep them in:

- At the source, each component that names its server in a message names it
  through ``mask_url`` (the database, the vector index, the embedder, the
  LLM and rerank clients), and status lines are built from those names.
  ``mask_url`` hides the whole user info and every query parameter's value.
- At the boundaries (the log formatters, error and degraded messages sent to
  clients, search hits' ``degraded_reason``, GetServiceStatus's details, and
  any text a remote service answered), ``scrub``, the one function that does
  it, replaces every credential the configuration holds (``remember``:
  passwords, user names, query values, keys and the Basic values made from
  them), wherever a library or a remote service quoted it, and masks any URL
  it finds in the text as ``mask_url`` does.

Masking is one way for every URL, so a URL reads the same in a status line,
an error and the log: ``scheme://***@host:port/path?name=***``.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

MASK = "***"

#: Query parameters known to carry no credential, whose values are common
#: words ("require", "disable") or paths: their values are still masked in a
#: URL, but not hunted for as text, which would garble ordinary messages.
#: Every other parameter's value is taken for a credential.
PLAIN_PARAMETERS = frozenset(
    {
        "sslmode",
        "host",
        "hostaddr",
        "port",
        "dbname",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "gssencmode",
        "channel_binding",
        "timeout",
        "prefer_grpc",
    }
)
# Shorter values are not replaced as text (they would mask ordinary words);
# they are still masked wherever they stand in a URL.
MIN_SECRET_CHARS = 4

# A URL inside a message: scheme, then anything up to white space or a quote.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()


def mask_url(url: str) -> str:
    """The URL with its user info and every query parameter's value replaced
    by ``***``; the scheme, host, port, path and parameter names stay, so it
    can still be told apart in a message."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        port = parts.port
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        host = hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        netloc = f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(n, MASK if v else v) for n, v in pairs], safe="*")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries, as text to hunt for: its password (as
    written and percent-decoded); an http(s) URL's user name when no password
    follows it (a token passed that way) and the Basic value an HTTP client
    makes of its user info; and every query value but those of
    ``PLAIN_PARAMETERS``. A user name beside a password, or a database's
    user, is an identity, not a secret: hunting for it ("nexus") would garble
    every message that says the word; it is still masked in a URL."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]  # unparseable: the whole value is kept out
    found: list[str] = []
    userinfo, at, _ = parts.netloc.rpartition("@")
    http = parts.scheme.lower() in ("http", "https")
    if at:
        for written in {userinfo, unquote(userinfo)}:
            user, colon, password = written.partition(":")
            if password:
                found.append(password)
            elif http and user and not colon:
                found.append(user)
            if http:  # httpx sends "user:password", the colon even without one
                found.append(base64.b64encode(f"{user}:{password}".encode()).decode())
    found += [v for n, v in parse_qsl(parts.query) if v and n.lower() not in PLAIN_PARAMETERS]
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
    """``text`` with every remembered credential replaced by ``***``, and every
    URL in it masked as ``mask_url`` masks it."""
    if not text:
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if "://" in text:
        text = _URL.sub(lambda m: _mask_in_text(m.group(0)), text)
    return text


def _mask_in_text(url: str) -> str:
    """A URL found in a message, masked; punctuation that ended the sentence
    (not the URL) is kept as it was."""
    tail = ""
    while url and url[-1] in ".,;:)]}":
        tail = url[-1] + tail
        url = url[:-1]
    return mask_url(url) + tail
