"""The console's routes: each page at a stable URL, its JSON twin, and the few actions.

A page is ``reads.<page>(client, ...)``'s view rendered by its template;
the same path with ``.json`` appended answers that view as JSON (Datasette's
convention), so scripts and tests read exactly what a person sees.  Actions
(undo a merge, delete a memory, retry extraction, forget a user) are a
confirmation page (GET) and a POST carrying the CSRF token; they answer with
a redirect to the page they came from, or (forgetting) to the erasure's.

A failed gRPC call shows its status and the server's message, as a page or
as ``{"error": {...}}``, with the HTTP status that fits; anything else is a
plain 500 whose details go to this process's log, never to the browser.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import grpc
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.console import live, page_data, people, reads, usage_chart
from nexus_grpc.console.params import BadRequest, path_id, positive_id, text
from nexus_grpc.console.security import (
    LOGIN_COOKIE,
    Guard,
    GuardSettings,
    Logins,
    Refused,
    browser_of,
    client_of,
    csrf_token,
    form_of,
    login_cookie,
    logout_cookie,
    safe_next,
)

__all__ = ["build_app"]

HERE = Path(__file__).parent
log = logging.getLogger("nexus_grpc.console")

#: gRPC statuses as the HTTP status a browser or script expects.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}
#: What a browser is told when the server did not answer at all (no request
#: id came back): the transport's own message names the target's address
#: and the socket's error, which belong in this process's log.
UNREACHABLE = {
    grpc.StatusCode.UNAVAILABLE: "the console cannot reach its nexus-grpc server: is it"
    " running, and is the console's --target right? (the console's log has the details)",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the nexus-grpc server did not answer in time; try"
    " again (the console's log has the details)",
}

Page = Callable[[Request], Awaitable[dict[str, Any]]]


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = page_data.short
    env.filters["when"] = lambda value: (value or "").replace("T", " ").replace("Z", " UTC")
    env.filters["n"] = lambda value: f"{value:,}"
    env.globals["tokens_chart"] = usage_chart.tokens_chart
    env.globals["urlencode"] = lambda **kw: urlencode({k: v for k, v in kw.items() if v})
    return env


class Console:
    def __init__(self, client: NexusClient, guard: GuardSettings, logins: Logins) -> None:
        self.client = client
        self.guard = guard
        self.logins = logins
        self.streams = live.StreamSlots()
        self.env = _environment()

    # Rendering -------------------------------------------------------------

    def html(self, request: Request, template: str, view: dict[str, Any], status: int = 200):
        page = self.env.get_template(template).render(
            view=view,
            csrf_token=csrf_token(request.scope),
            path=request.url.path,
            query=dict(request.query_params),
            login=self.guard.login_token is not None,
        )
        return HTMLResponse(page, status_code=status)

    def failure(self, request: Request, status: int, code: str, message: str) -> Response:
        if request.url.path.endswith(".json") or request.url.path.endswith("/events"):
            return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
        return self.html(
            request, "error.html", {"status": status, "code": code, "message": message}, status
        )

    def call_failed(self, request: Request, exc: NexusClientError) -> Response:
        """A failed gRPC call, as the server said it; a server that did not
        answer at all, in plain words (its transport error goes to the log)."""
        message = exc.message
        if exc.request_id is None and exc.code in UNREACHABLE:
            log.warning("console: %s %s: the server did not answer: %s",
                        request.method, request.url.path, exc)  # fmt: skip
            message = UNREACHABLE[exc.code]
        return self.failure(request, HTTP_STATUS.get(exc.code, 502), exc.code.name, message)

    def page(self, template: str, read: Page) -> Callable[[Request], Awaitable[Response]]:
        """A route answering ``read``'s view as HTML, or as JSON under ``.json``."""

        async def endpoint(request: Request) -> Response:
            try:
                view = await read(request)
            except BadRequest as exc:
                return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
            except NexusClientError as exc:
                return self.call_failed(request, exc)
            if request.url.path.endswith(".json"):
                return JSONResponse(view)
            return self.html(request, template, view)

        return endpoint

    # Pages -----------------------------------------------------------------

    async def index(self, request: Request) -> dict[str, Any]:
        return await reads.index(self.client, request.query_params)

    async def project(self, request: Request) -> dict[str, Any]:
        project_id = path_id(request.path_params["project_id"], "project_id")
        return await reads.project(self.client, project_id, request.query_params)

    async def episode(self, request: Request) -> dict[str, Any]:
        project_id = path_id(request.path_params["project_id"], "project_id")
        episode_id = path_id(request.path_params["episode_id"], "episode_id")
        return await reads.episode(self.client, project_id, episode_id)

    async def memories(self, request: Request) -> dict[str, Any]:
        project_id = path_id(request.path_params["project_id"], "project_id")
        return await reads.memories(self.client, project_id, request.query_params)

    async def graph(self, request: Request) -> dict[str, Any]:
        project_id = path_id(request.path_params["project_id"], "project_id")
        return await reads.graph(self.client, project_id, request.query_params)

    async def search(self, request: Request) -> dict[str, Any]:
        project_id = path_id(request.path_params["project_id"], "project_id")
        return await reads.search(self.client, project_id, request.query_params)

    async def status(self, request: Request) -> dict[str, Any]:
        return await reads.status(self.client, request.query_params)

    async def user(self, request: Request) -> dict[str, Any]:
        return await people.user(self.client, request.query_params)

    async def erasure(self, request: Request) -> dict[str, Any]:
        erasure_id = path_id(request.path_params["erasure_id"], "erasure_id")
        return await people.erasure(self.client, erasure_id)

    async def receipts(self, request: Request) -> dict[str, Any]:
        return await people.receipts(self.client, request.query_params)

    # Live states -----------------------------------------------------------

    async def events(self, request: Request) -> Response:
        """Server-Sent Events: the states of the page's episodes as they change
        (live.py), for a browser that loaded the page, within its share of the
        console's streams."""
        try:
            project_id = path_id(request.path_params["project_id"], "project_id")
            raw = text(request.query_params, "episodes", limit=20 * live.MAX_WATCHED)
            ids = [path_id(i, "episodes") for i in raw.split(",") if i.strip()]
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        return await self.held_stream(
            request,
            lambda: self.client.get_project(id=project_id),
            lambda: live.states(self.client, project_id, ids[: live.MAX_WATCHED]),
        )

    async def erasure_events(self, request: Request) -> Response:
        """Server-Sent Events: an erasure's progress until its receipt
        (WatchErasure), within the same share of the console's streams."""
        try:
            erasure_id = path_id(request.path_params["erasure_id"], "erasure_id")
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        return await self.held_stream(
            request,
            lambda: self.client.get_erasure(id=erasure_id),
            lambda: live.erasure_steps(self.client, erasure_id),
        )

    async def held_stream(
        self,
        request: Request,
        check: Callable[[], Awaitable[object]],
        stream: Callable[[], AsyncIterator[str]],
    ) -> Response:
        """A live stream for a browser that loaded a page, within its share of
        the console's streams, once ``check`` says the key may read what it
        follows (its refusal is the answer, and the slot goes back)."""
        try:
            give_back = self.streams.take(browser_of(request.scope))
        except Refused as refused:
            code = "RESOURCE_EXHAUSTED" if refused.status == 429 else "PERMISSION_DENIED"
            return self.failure(request, refused.status, code, refused.message)
        try:
            await check()
        except NexusClientError as exc:
            give_back()
            return self.call_failed(request, exc)
        return live.HeldStream(stream(), give_back)

    # Actions ---------------------------------------------------------------

    async def confirm(self, request: Request) -> Response:
        """The page that asks before a change; its form POSTs to the same path."""
        action = request.path_params["action"]
        try:
            project_id = path_id(request.path_params["project_id"], "project_id")
            target = path_id(request.path_params["target"], "id")
            user_id = text(request.query_params, "user_id", limit=200)
            about = ACTIONS[action].describe(target)
        except (BadRequest, KeyError):
            return self.failure(request, 404, "NOT_FOUND", "no such action")
        home = f"/projects/{project_id}"
        view = {
            "project_id": project_id,
            "action": action,
            "question": about,
            "user_id": user_id,
            "back": safe_next(request.query_params.get("back", ""), home),
        }
        return self.html(request, "confirm.html", view)

    async def act(self, request: Request) -> Response:
        """A confirmed change (the guard checked the form's CSRF token)."""
        action = ACTIONS.get(request.path_params["action"])
        form = form_of(request.scope)
        try:
            if action is None:
                raise BadRequest("action", "no such action")
            project_id = path_id(request.path_params["project_id"], "project_id")
            target = path_id(request.path_params["target"], "id")
            done = await action.run(self.client, project_id, target, form)
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        except NexusClientError as exc:
            return self.call_failed(request, exc)
        back = safe_next(form.get("back", ""), f"/projects/{project_id}")
        joiner = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{joiner}{urlencode({'done': done})}", status_code=303)

    async def retry_failed(self, request: Request) -> Response:
        """Every failed extraction the key can see, queued again (ExtractEpisode
        all_failed): a confirmation page, then a POST with the CSRF token."""
        if request.method == "GET":
            view = {
                "project_id": 0,
                "action": "retry-failed-extractions",
                "question": "Run every failed extraction this key can see again? Each is"
                " queued as a new job.",
                "user_id": "",
                "back": "/status",
            }
            return self.html(request, "confirm.html", view)
        try:
            queued = await self.client.extract_episode(all_failed=True)
        except NexusClientError as exc:
            return self.call_failed(request, exc)
        done = f"{queued.queued} failed extraction(s) queued again"
        return RedirectResponse(f"/status?{urlencode({'done': done})}", status_code=303)

    # A person: their export, and forgetting them ---------------------------

    async def export_user(self, request: Request) -> Response:
        """ExportUser as a JSON Lines download, streamed as it arrives (never
        held whole here); a refusal is the page's error before any byte."""
        try:
            user_id = people.user_id_of(request.query_params)
            project_id = positive_id(request.query_params, "project_id")
            name, lines = await people.export_lines(self.client, user_id, project_id)
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        except NexusClientError as exc:
            return self.call_failed(request, exc)
        return StreamingResponse(
            lines,
            media_type="application/x-ndjson",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )

    async def forget(self, request: Request) -> Response:
        """Forget a user: a confirmation page where the user id must be typed
        to enable the button, then a POST (the guard checked its CSRF token)
        that checks the typed id again, calls ForgetUser and sends the browser
        to the erasure's page."""
        params = request.query_params if request.method == "GET" else form_of(request.scope)
        try:
            user_id = people.user_id_of(params)
            project_id = positive_id(params, "project_id")
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        view = {"user_id": user_id, "project_id": project_id, "project": None, "error": ""}
        if request.method == "GET":
            return self.html(request, "forget.html", view)
        try:
            people.check_typed(params, user_id)
        except BadRequest as exc:
            view["error"] = exc.message
            return self.html(request, "forget.html", view, status=400)
        try:
            started = await self.client.forget_user(user_id=user_id, project_id=project_id)
        except NexusClientError as exc:
            return self.call_failed(request, exc)
        done = (
            f"user {user_id!r} was already being forgotten: this request joined erasure"
            f" {started.id}"
            if started.joined
            else f"forgetting user {user_id!r}: erasure {started.id} started"
        )
        return RedirectResponse(
            f"/erasures/{started.id}?{urlencode({'done': done})}", status_code=303
        )

    # Login -----------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next", "/"))
        if self.guard.login_token is None:
            return RedirectResponse(target, status_code=303)
        if request.method == "GET":
            return self.html(request, "login.html", {"next": target, "error": ""})
        form = form_of(request.scope)
        target = safe_next(form.get("next", "/"))
        try:
            right = self.logins.check_token(client_of(request.scope), form.get("token", "").strip())
        except Refused as refused:
            view = {"next": target, "error": refused.message}
            return self.html(request, "login.html", view, status=refused.status)
        if not right:
            view = {"next": target, "error": "That is not the token this console printed."}
            return self.html(request, "login.html", view, status=401)
        response = RedirectResponse(target, status_code=303)
        tls = request.url.scheme == "https"
        response.headers.append("set-cookie", login_cookie(self.logins.open(), secure=tls))
        return response

    async def logout(self, request: Request) -> Response:
        """Ends this browser's login (a POST with the CSRF token, so that no
        other site can log a person out)."""
        response = RedirectResponse("/login" if self.guard.login_token else "/", status_code=303)
        self.logins.close(request.cookies.get(LOGIN_COOKIE, ""))
        response.headers.append("set-cookie", logout_cookie(secure=request.url.scheme == "https"))
        return response


@dataclass(frozen=True)
class Action:
    #: The confirmation page's question, about the target's id.
    describe: Callable[[int], str]
    #: Does it (client, project id, target id, the form); says what was done.
    run: Callable[[NexusClient, int, int, dict[str, str]], Awaitable[str]]


async def _undo_merge(client: NexusClient, project_id: int, merge_id: int, form: dict) -> str:
    merge = await client.undo_merge(merge_id=merge_id)
    return (
        f"merge {merge.id} undone: entities {', '.join(map(str, merge.source_ids))} are apart again"
    )


async def _delete_memory(client: NexusClient, project_id: int, memory_id: int, form: dict) -> str:
    user_id = text(form, "user_id", limit=200)
    memory = await client.get_memory(id=memory_id, user_id=user_id)
    if memory.project_id not in (0, project_id):
        raise reads.not_in_project("memory", memory_id, project_id)
    await client.delete_memory(id=memory_id, user_id=user_id)
    return f"memory {memory_id} deleted (its history stays readable by its owner for a while)"


async def _retry_extraction(
    client: NexusClient, project_id: int, episode_id: int, form: dict
) -> str:
    await reads.episode(client, project_id, episode_id)
    queued = await client.extract_episode(episode_id=episode_id)
    return f"extraction of episode {episode_id} queued again ({queued.queued} job)"


ACTIONS = {
    "undo-merge": Action(
        lambda i: (
            f"Undo merge {i}? Its source entities come back as they were, with their"
            " names, links and facts."
        ),
        _undo_merge,
    ),
    "delete-memory": Action(
        lambda i: f"Delete memory {i}? Reads and searches stop returning it at once.",
        _delete_memory,
    ),
    "retry-extraction": Action(
        lambda i: f"Run extraction of episode {i} again? It is queued as a new job.",
        _retry_extraction,
    ),
}


def build_app(client: NexusClient, guard: GuardSettings) -> Guard:
    """The console as an ASGI app, acting through ``client``."""
    logins = Logins(guard.login_token)
    console = Console(client, guard, logins)

    def both(path: str, template: str, read: Page) -> list[Route]:
        endpoint = console.page(template, read)
        twin = "/.json" if path == "/" else f"{path}.json"
        # The twin first: ``{project_id}`` would otherwise take "3.json".
        return [Route(twin, endpoint), Route(path, endpoint)]

    routes = [
        *both("/", "index.html", console.index),
        Route("/index.json", console.page("index.html", console.index)),
        *both("/status", "status.html", console.status),
        *both("/projects/{project_id}", "project.html", console.project),
        *both("/projects/{project_id}/episodes/{episode_id}", "episode.html", console.episode),
        *both("/projects/{project_id}/memories", "memories.html", console.memories),
        *both("/projects/{project_id}/graph", "graph.html", console.graph),
        *both("/projects/{project_id}/search", "search.html", console.search),
        *both("/users", "user.html", console.user),
        Route("/users/export.jsonl", console.export_user),
        Route("/users/forget", console.forget, methods=["GET", "POST"]),
        *both("/erasures", "erasures.html", console.receipts),
        *both("/erasures/{erasure_id}", "erasure.html", console.erasure),
        Route("/erasures/{erasure_id}/events", console.erasure_events),
        Route("/projects/{project_id}/events", console.events),
        Route("/projects/{project_id}/{action}/{target}", console.confirm, methods=["GET"]),
        Route("/projects/{project_id}/{action}/{target}", console.act, methods=["POST"]),
        Route("/retry-failed-extractions", console.retry_failed, methods=["GET", "POST"]),
        Route("/login", console.login, methods=["GET", "POST"]),
        Route("/logout", console.logout, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={Exception: _internal})
    return Guard(app, guard, logins)


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("console: %s %s failed", request.method, request.url.path, exc_info=exc)
    message = "internal error in the console; its log has the details"
    if request.url.path.endswith(".json"):
        return JSONResponse({"error": {"code": "INTERNAL", "message": message}}, status_code=500)
    return Response(message, status_code=500, media_type="text/plain")
