"""The console's routes: each page at a stable URL, its JSON twin, and the few actions.

A page is ``reads.<page>(client, ...)``'s view rendered by its template;
the same path with ``.json`` appended answers that view as JSON (Datasette's
convention), so scripts and tests read exactly what a person sees.  Actions
(undo a merge, delete a memory, retry extraction) are a confirmation page
(GET) and a POST carrying the CSRF token; they answer with a redirect to the
page they came from.

A failed gRPC call shows its status and the server's message, as a page or
as ``{"error": {...}}``, with the HTTP status that fits; anything else is a
plain 500 whose details go to this process's log, never to the browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
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
from nexus_grpc.console import page_data, reads, usage_chart
from nexus_grpc.console.params import BadRequest, path_id, text
from nexus_grpc.console.security import (
    LOGIN_COOKIE,
    Guard,
    GuardSettings,
    Refused,
    check_csrf,
    csrf_token,
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
#: How often the live stream re-reads the episodes still pending: embedding
#: finishes without an extraction event, and an event can pass while the
#: stream is being opened.
RECHECK_SECONDS = 3.0
MAX_WATCHED = 200

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
    def __init__(self, client: NexusClient, guard: GuardSettings) -> None:
        self.client = client
        self.guard = guard
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
        if request.url.path.endswith(".json"):
            return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
        return self.html(
            request, "error.html", {"status": status, "code": code, "message": message}, status
        )

    def page(self, template: str, read: Page) -> Callable[[Request], Awaitable[Response]]:
        """A route answering ``read``'s view as HTML, or as JSON under ``.json``."""

        async def endpoint(request: Request) -> Response:
            try:
                view = await read(request)
            except BadRequest as exc:
                return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
            except NexusClientError as exc:
                return self.failure(
                    request, HTTP_STATUS.get(exc.code, 502), exc.code.name, exc.message
                )
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

    # Live states -----------------------------------------------------------

    async def events(self, request: Request) -> Response:
        """Server-Sent Events: the states of the page's episodes as they change.

        The browser names the episodes it shows still pending; they are sent
        at once, then again whenever WatchExtractions announces one of the
        project's episodes, and re-read every few seconds while any is
        pending (embedding has no event of its own)."""
        try:
            project_id = path_id(request.path_params["project_id"], "project_id")
            raw = text(request.query_params, "episodes", limit=20 * MAX_WATCHED)
            ids = [path_id(i, "episodes") for i in raw.split(",") if i.strip()][:MAX_WATCHED]
            await self.client.get_project(id=project_id)
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        except NexusClientError as exc:
            return self.failure(request, HTTP_STATUS.get(exc.code, 502), exc.code.name, exc.message)
        return StreamingResponse(
            self._states(project_id, ids),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def _states(self, project_id: int, ids: list[int]) -> AsyncIterator[str]:
        watched = set(ids)
        stream = self.client.watch_extractions(project_id=project_id)
        events: asyncio.Queue[int | None] = asyncio.Queue()

        async def listen() -> None:
            try:
                async for event in stream:
                    events.put_nowait(event.episode_id)
            except NexusClientError as exc:
                log.warning("console: the extraction stream ended: %s", exc)
            finally:
                events.put_nowait(None)

        listener = asyncio.create_task(listen())
        try:
            yield "retry: 2000\n\n"
            pending = await self._send_states(sorted(watched))
            for chunk in pending.chunks:
                yield chunk
            while True:
                try:
                    episode_id = await asyncio.wait_for(events.get(), RECHECK_SECONDS)
                except TimeoutError:
                    if not pending.ids:
                        yield ": still here\n\n"
                        continue
                    pending = await self._send_states(sorted(pending.ids))
                else:
                    if episode_id is None:
                        return
                    if episode_id not in watched:
                        continue
                    pending = await self._send_states(sorted({episode_id, *pending.ids}))
                for chunk in pending.chunks:
                    yield chunk
        finally:
            stream.cancel()
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener

    async def _send_states(self, ids: list[int]) -> _Sent:
        states = await reads.episode_states(self.client, ids)
        chunks = [f"event: episode\ndata: {json.dumps(s)}\n\n" for s in states]
        still = {
            s["id"]
            for s in states
            if "pending" in (s["embedding_state"], s["extraction_state"], s["memory_state"])
        }
        return _Sent(chunks, still)

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
        view = {
            "project_id": project_id,
            "action": action,
            "question": about,
            "user_id": user_id,
            "back": safe_next(request.query_params.get("back", "") or f"/projects/{project_id}"),
        }
        return self.html(request, "confirm.html", view)

    async def act(self, request: Request) -> Response:
        action = ACTIONS.get(request.path_params["action"])
        form = await request.form()
        try:
            check_csrf(request.scope, form)
        except Refused as refused:
            return self.failure(request, refused.status, "PERMISSION_DENIED", refused.message)
        try:
            if action is None:
                raise BadRequest("action", "no such action")
            project_id = path_id(request.path_params["project_id"], "project_id")
            target = path_id(request.path_params["target"], "id")
            fields = {k: str(v) for k, v in form.items()}
            done = await action.run(self.client, project_id, target, fields)
        except BadRequest as exc:
            return self.failure(request, 400, "INVALID_ARGUMENT", exc.message)
        except NexusClientError as exc:
            return self.failure(request, HTTP_STATUS.get(exc.code, 502), exc.code.name, exc.message)
        back = safe_next(str(form.get("back", "")) or f"/projects/{project_id}")
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
        form = await request.form()
        try:
            check_csrf(request.scope, form)
            queued = await self.client.extract_episode(all_failed=True)
        except Refused as refused:
            return self.failure(request, refused.status, "PERMISSION_DENIED", refused.message)
        except NexusClientError as exc:
            return self.failure(request, HTTP_STATUS.get(exc.code, 502), exc.code.name, exc.message)
        done = f"{queued.queued} failed extraction(s) queued again"
        return RedirectResponse(f"/status?{urlencode({'done': done})}", status_code=303)

    # Login -----------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next", "/"))
        if self.guard.login_token is None:
            return RedirectResponse(target, status_code=303)
        if request.method == "GET":
            return self.html(request, "login.html", {"next": target, "error": ""})
        form = await request.form()
        try:
            check_csrf(request.scope, form)
        except Refused as refused:
            return self.failure(request, refused.status, "PERMISSION_DENIED", refused.message)
        sent = str(form.get("token", "")).strip()
        target = safe_next(str(form.get("next", "/")))
        if not hmac.compare_digest(sent.encode(), self.guard.login_token.encode()):
            view = {"next": target, "error": "That is not the token this console printed."}
            return self.html(request, "login.html", view, status=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            LOGIN_COOKIE, self.guard.login_value(), httponly=True, samesite="strict", path="/"
        )
        return response


@dataclass(frozen=True)
class _Sent:
    #: Server-Sent Events, one per episode read.
    chunks: list[str]
    #: The episodes among them still pending.
    ids: set[int]


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
    console = Console(client, guard)

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
        Route("/projects/{project_id}/events", console.events),
        Route("/projects/{project_id}/{action}/{target}", console.confirm, methods=["GET"]),
        Route("/projects/{project_id}/{action}/{target}", console.act, methods=["POST"]),
        Route("/retry-failed-extractions", console.retry_failed, methods=["GET", "POST"]),
        Route("/login", console.login, methods=["GET", "POST"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={Exception: _internal})
    return Guard(app, guard)


async def _internal(request: Request, exc: Exception) -> Response:
    log.exception("console: %s %s failed", request.method, request.url.path, exc_info=exc)
    message = "internal error in the console; its log has the details"
    if request.url.path.endswith(".json"):
        return JSONResponse({"error": {"code": "INTERNAL", "message": message}}, status_code=500)
    return Response(message, status_code=500, media_type="text/plain")
