"""The console's login, logout and retry-every-failed-extraction routes
(console/routes.py), in-process on the stand-in client of
tests/unit/console_stand_ins.py: what the login form answers to a wrong
token, a right one and one too many wrong ones, the login cookie over TLS, a
console on loopback that asks no login, the logout, and the confirmed retry.
The guard's own rules (the cookie's value and lifetime, the limits' arithmetic)
are in test_console_guard.py.

A console beyond loopback in front of a real server, logged into and out of,
stays whole-server in tests/e2e/console/test_console_app.py, as the wiring."""

from __future__ import annotations

from html import unescape

import httpx

from nexus_grpc.console.routes import build_app
from nexus_grpc.console.security import CSRF_COOKIE, LOGIN_COOKIE, GuardSettings, LoginLimits
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.unit.console_stand_ins import StandIn

TOKEN = "t" * 32


def projects() -> StandIn:
    return StandIn(list_projects=memory_pb2.ListProjectsResponse())


def console(client: StandIn, base: str = "http://console.lan:8090") -> httpx.AsyncClient:
    port = 8443 if base.startswith("https") else 8090
    guard = GuardSettings(host="0.0.0.0", port=port, loopback=False, login_token=TOKEN)
    app = build_app(client, guard)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


async def _login_page(http: httpx.AsyncClient) -> str:
    page = await http.get("/login?next=/status")
    assert page.status_code == 200 and 'name="token"' in page.text
    token = http.cookies.get(CSRF_COOKIE)
    assert token
    return token


async def test_over_tls_the_login_cookie_is_secure():
    """What a TLS proxy in front of the console forwards: the request's scheme
    is https, and the login cookie is never sent over plain HTTP."""
    async with console(projects(), "https://console.lan:8443") as https:
        csrf = await _login_page(https)
        right = await https.post("/login", data={"token": TOKEN, "csrf_token": csrf})
        assert right.status_code == 303
        assert right.headers["set-cookie"].endswith("HttpOnly; SameSite=Strict; Secure")
        assert (await https.get("/.json")).status_code == 200


async def test_a_login_goes_to_the_page_asked_for_but_never_off_the_console():
    async with console(projects()) as http:
        csrf = await _login_page(http)
        wrong = await http.post("/login", data={"token": "nope", "csrf_token": csrf})
        assert wrong.status_code == 401 and LOGIN_COOKIE not in http.cookies
        assert "That is not the token this console printed." in wrong.text
        away = await http.post(
            "/login", data={"token": TOKEN, "csrf_token": csrf, "next": "//evil.example/"}
        )
        assert away.status_code == 303 and away.headers["location"] == "/"
        assert "Secure" not in away.headers["set-cookie"]  # plain HTTP
        back = await http.post(
            "/login", data={"token": f" {TOKEN} ", "csrf_token": csrf, "next": "/status"}
        )
        assert back.headers["location"] == "/status"  # the token as typed, spaces aside


async def test_wrong_tokens_are_stopped_with_a_clear_message_on_the_login_page():
    async with console(projects()) as http:
        csrf = await _login_page(http)
        for _ in range(LoginLimits().per_client):
            wrong = await http.post("/login", data={"token": "guess", "csrf_token": csrf})
            assert wrong.status_code == 401
        stopped = await http.post("/login", data={"token": TOKEN, "csrf_token": csrf})
        assert stopped.status_code == 429 and LOGIN_COOKIE not in http.cookies
        assert "too many wrong tokens from 127.0.0.1 (10 in 5 minutes): try again in" in (
            unescape(stopped.text)
        )
        assert 'name="token"' in stopped.text  # the login page, saying why


async def test_a_logout_ends_this_browsers_login_only():
    async with console(projects()) as http:
        csrf = await _login_page(http)
        await http.post("/login", data={"token": TOKEN, "csrf_token": csrf})
        first = http.cookies.get(LOGIN_COOKIE)
        await http.post("/login", data={"token": TOKEN, "csrf_token": csrf})
        out = await http.post("/logout", data={"csrf_token": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert "Max-Age=0" in out.headers["set-cookie"]
        assert (await http.get("/.json")).status_code == 401
        http.cookies.set(LOGIN_COOKIE, first)  # the first login is still good
        assert (await http.get("/.json")).status_code == 200


async def test_on_loopback_there_is_no_login_to_ask():
    guard = GuardSettings(host="127.0.0.1", port=8090, loopback=True)
    app = build_app(StandIn(), guard)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8090") as http:
        page = await http.get("/login?next=/status")
        assert page.status_code == 303 and page.headers["location"] == "/status"
        csrf = http.cookies.get(CSRF_COOKIE)
        out = await http.post("/logout", data={"csrf_token": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/"


async def test_retrying_every_failed_extraction_is_confirmed_then_says_how_many():
    client = StandIn(extract_episode=graph_pb2.ExtractEpisodeResponse(queued=3))
    guard = GuardSettings(host="127.0.0.1", port=8090, loopback=True)
    app = build_app(client, guard)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8090") as http:
        confirm = await http.get("/retry-failed-extractions")
        assert confirm.status_code == 200 and "Run every failed extraction" in confirm.text
        assert client.calls == []  # asking is not doing
        done = await http.post(
            "/retry-failed-extractions", data={"csrf_token": http.cookies.get(CSRF_COOKIE)}
        )
    assert done.status_code == 303
    assert done.headers["location"] == "/status?done=3+failed+extraction%28s%29+queued+again"
    assert client.asked("extract_episode") == [{"all_failed": True}]
