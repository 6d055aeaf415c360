"""The console's guard (console/security.py) on its own: a three-line ASGI app
behind it, called in-process through httpx, with no gRPC server and no
network. Each rule the guard keeps is a test here: the Host a console on
loopback answers to (IPv6 and port 80 included), the CSRF token every POST
carries (the login's included), the login cookie (a forged or stale one
never reaches a page), the limit on wrong tokens, and the paths a browser
is sent back to, read as a browser reads them."""

from __future__ import annotations

import json

import httpx
import pytest

from nexus_grpc.console.security import (
    CSRF_COOKIE,
    LOGIN_COOKIE,
    Guard,
    GuardSettings,
    LoginLimits,
    Logins,
    Refused,
    form_of,
    login_cookie,
    safe_next,
)

TOKEN = "a-console-token-of-32-characters"
CSRF = "c" * 43


async def behind(scope, receive, send):
    """What the guard lets through: the app answers what it was given."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    reached = {"path": scope["path"], "form": form_of(scope), "body": body.decode()}
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": json.dumps(reached).encode()})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def client(guard: Guard, host: str = "127.0.0.1:8090", scheme: str = "http") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=guard), base_url=f"{scheme}://{host}"
    )


def beyond_loopback(logins: Logins | None = None) -> Guard:
    settings = GuardSettings(host="0.0.0.0", port=8090, loopback=False, login_token=TOKEN)
    return Guard(behind, settings, logins)


# Login --------------------------------------------------------------------------


async def test_a_forged_or_ended_login_cookie_never_reaches_a_page():
    clock = Clock()
    logins = Logins(TOKEN, lifetime=3600, clock=clock)
    guard = beyond_loopback(logins)
    async with client(guard) as http:
        for value in (
            "forged",
            "x" * 43,
            TOKEN,
            Logins(TOKEN).open(),
        ):  # the last: another process's
            http.cookies.set(LOGIN_COOKIE, value)
            page = await http.get("/projects/1?x=1")
            assert page.status_code == 303, value
            assert page.headers["location"] == "/login?next=%2Fprojects%2F1%3Fx%3D1"
            assert (await http.get("/projects/1.json")).status_code == 401
        value = logins.open()
        http.cookies.set(LOGIN_COOKIE, value)
        reached = await http.get("/projects/1.json")
        assert reached.status_code == 200 and reached.json()["path"] == "/projects/1.json"
        clock.now += 3600  # its lifetime has passed
        assert (await http.get("/projects/1.json")).status_code == 401
        value = logins.open()
        http.cookies.set(LOGIN_COOKIE, value)
        assert (await http.get("/projects/1.json")).status_code == 200
        logins.close(value)  # logged out
        assert (await http.get("/projects/1.json")).status_code == 401


def test_each_login_has_a_value_of_its_own_never_the_token():
    logins = Logins(TOKEN)
    first, second = logins.open(), logins.open()
    assert first != second and TOKEN not in (first, second)
    assert logins.valid(first) and logins.valid(second) and not logins.valid("")
    assert not Logins(TOKEN).valid(first)  # a restart (or another console) logs it out


def test_the_login_cookie_lasts_a_while_and_is_secure_over_tls():
    plain = login_cookie("v", secure=False, lifetime=600)
    assert plain == f"{LOGIN_COOKIE}=v; Path=/; Max-Age=600; HttpOnly; SameSite=Strict"
    assert login_cookie("v", secure=True, lifetime=600).endswith("; SameSite=Strict; Secure")


async def test_the_csrf_cookie_is_secure_over_tls():
    guard = Guard(behind, GuardSettings(host="127.0.0.1", port=8090, loopback=True))
    async with client(guard) as http:
        assert "Secure" not in (await http.get("/")).headers["set-cookie"]
    async with client(guard, scheme="https") as https:
        assert (await https.get("/")).headers["set-cookie"].endswith("SameSite=Strict; Secure")


def test_wrong_tokens_are_limited_per_client_and_then_overall():
    clock = Clock()
    logins = Logins(TOKEN, LoginLimits(per_client=3, overall=5, window_seconds=60), clock=clock)
    for _ in range(3):
        assert not logins.check_token("10.0.0.1", "guess")
    # Past the limit even the right token is not compared: guessing stops.
    with pytest.raises(Refused) as refused:
        logins.check_token("10.0.0.1", TOKEN)
    assert refused.value.status == 429
    assert refused.value.message.startswith("too many wrong tokens from 10.0.0.1 (3 in 1 minutes)")
    assert "try again in 1 min 0 s" in refused.value.message
    assert logins.check_token("10.0.0.2", TOKEN)  # another client is not held back
    assert not logins.check_token("10.0.0.2", "guess")
    assert not logins.check_token("10.0.0.3", "guess")
    # Five wrong in all, from three addresses: nobody is compared now.
    with pytest.raises(Refused) as overall:
        logins.check_token("10.0.0.4", TOKEN)
    assert "from every address" in overall.value.message
    assert "those already logged in stay so" in overall.value.message
    clock.now += 61  # the window has passed
    assert logins.check_token("10.0.0.1", TOKEN)


async def test_a_wrong_bearer_token_is_a_wrong_try_too():
    logins = Logins(TOKEN, LoginLimits(per_client=2, overall=100))
    guard = beyond_loopback(logins)
    async with client(guard) as http:
        for _ in range(2):
            wrong = await http.get("/.json", headers={"authorization": "Bearer guess"})
            assert wrong.status_code == 401
        right = await http.get("/.json", headers={"authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 429 and "too many wrong tokens" in right.text


# CSRF ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/login", "/logout", "/projects/1/delete-memory/2"])
async def test_a_post_without_the_browsers_csrf_token_never_reaches_a_route(path):
    guard = beyond_loopback()
    async with client(guard) as http:
        http.cookies.set(CSRF_COOKIE, CSRF)
        form = {"token": TOKEN, "next": "/"}
        for sent in ({}, {"csrf_token": ""}, {"csrf_token": "d" * 43}):
            refused = await http.post(path, data={**form, **sent})
            assert refused.status_code == 403 and "CSRF token" in refused.text, sent
        # Right, but not a form: no token can be read from it.
        as_json = await http.post(path, json={"csrf_token": CSRF})
        assert as_json.status_code == 403
    async with client(guard) as fresh:  # a browser that never kept the cookie
        refused = await fresh.post(path, data={**form, "csrf_token": CSRF})
        assert refused.status_code == 403


async def test_a_post_with_the_token_reaches_its_route_with_its_form():
    guard = Guard(behind, GuardSettings(host="127.0.0.1", port=8090, loopback=True))
    async with client(guard) as http:
        http.cookies.set(CSRF_COOKIE, CSRF)
        reached = await http.post("/projects/1/delete-memory/2",
                                  data={"csrf_token": CSRF, "user_id": "alice é"})  # fmt: skip
        assert reached.status_code == 200
        seen = reached.json()
        assert seen["form"] == {"csrf_token": CSRF, "user_id": "alice é"}
        assert "user_id=alice" in seen["body"]  # the route can read the body itself too
        huge = await http.post("/login", data={"csrf_token": CSRF, "x": "y" * 70_000})
        assert huge.status_code == 413


# Host ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "port", "served", "refused"),
    [
        ("::1", 8090, ["[::1]:8090", "127.0.0.1:8090", "localhost:8090"],
         ["::1:8090", "[::1]", "[::1]:80", "[::2]:8090", "[::ffff:127.0.0.1]:8090"]),
        ("127.0.0.1", 8090, ["[::1]:8090", "LOCALHOST:8090"],
         ["127.0.0.1", "localhost", "127.0.0.1:80", "127.0.0.1:8091"]),
        ("127.0.0.1", 80, ["127.0.0.1", "localhost", "[::1]", "127.0.0.1:80", "localhost:80"],
         ["127.0.0.1:8090", "evil.example", "127.0.0.1.evil.example"]),
        # The console's own names, and the foreign ones, of the whole-console tests.
        ("127.0.0.1", 8090, ["127.0.0.1:8090", "localhost:8090", "[::1]:8090"],
         ["evil.example:8090", "127.0.0.1:9999", "localhost.evil:8090"]),
    ],
)  # fmt: skip
async def test_on_loopback_only_the_consoles_own_hosts_are_served(bound, port, served, refused):
    guard = Guard(behind, GuardSettings(host=bound, port=port, loopback=True))
    async with client(guard) as http:
        for host in served:
            assert (await http.get("/", headers={"host": host})).status_code == 200, host
        for host in refused:
            answer = await http.get("/", headers={"host": host})
            assert answer.status_code == 403, host
            assert "is not this console's address" in answer.text
            assert '"path"' not in answer.text  # the page behind was never reached


# Origin -------------------------------------------------------------------------


async def test_a_request_from_another_origin_is_refused():
    guard = Guard(behind, GuardSettings(host="127.0.0.1", port=8090, loopback=True))
    async with client(guard) as http:
        same = await http.get("/.json", headers={"origin": "http://127.0.0.1:8090"})
        assert same.status_code == 200 and same.json()["path"] == "/.json"
        for origin in ("http://evil.example", "null"):
            answer = await http.get("/.json", headers={"origin": origin})
            assert answer.status_code == 403, origin
            assert "another origin" in answer.json()["error"]["message"], origin


# Where a browser is sent --------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/projects/3/memories?user_id=alice", "/projects/3/memories?user_id=alice"),
        ("/projects/3?x=1#episode-4", "/projects/3?x=1#episode-4"),
        ("/%09/evil.example", "/%09/evil.example"),  # encoded: a path of this console
        ("/a b\"<c>", "/a%20b%22%3Cc%3E"),
        ("/search?q=a\\b", "/search?q=a%5Cb"),
        ("/\u00e9t\u00e9", "/%C3%A9t%C3%A9"),
        ("  /status  ", "/status"),
    ],
)  # fmt: skip
def test_a_path_of_the_console_comes_back_encoded(given, kept):
    assert safe_next(given) == kept


@pytest.mark.parametrize(
    "given",
    [
        "//evil.example", "/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example",
        "\t//evil.example", "/\\evil.example", "\\\\evil.example", "\\/evil.example",
        "\x00//evil.example", " //evil.example", "\\evil.example", "/\t\\evil.example",
        "https://evil.example/", "http:/evil.example", "javascript:alert(1)", "JaVaScRiPt:x",
        "data:text/html,x", "evil.example", "", "?next=/", "#x", ".//evil.example",
    ],
)  # fmt: skip
def test_another_site_or_a_scheme_becomes_the_default(given):
    assert safe_next(given) == "/"
    assert safe_next(given, "/projects/3") == "/projects/3"


@pytest.mark.parametrize(
    "back",
    ["/\t/evil.example", "/\n/evil.example", "//evil.example", "/\\evil.example",
     "\\\\evil.example", "\\evil.example", "https://evil.example", "javascript:alert(1)",
     " //evil.example"],
)  # fmt: skip
def test_a_go_back_link_that_would_leave_the_console_goes_to_the_project(back):
    """The delete-memory page's go-back link, as the whole-console test sends it:
    anything that is not a path of this console is the project's page."""
    assert safe_next(back, "/projects/7") == "/projects/7"
