"""A person's pages: what is held about a user, their export, and forgetting
them (docs/privacy.md).

What the user page counts is ExportUser's own stream, counted as it passes
and never held: no cheaper read counts one user's sessions and episodes
(ListSessions has no user filter, and GetProjectStats counts only a user's
memories, and only the hundred users with most), and the export is exactly
what the download hands over and what ForgetUser erases, under the same
rights. So the figures are the download's, record for record, and a user
the key may not see, or one who holds nothing, is the server's own
NOT_FOUND ("user 'bob' holds nothing here"), on this page as through gRPC.

The download is the same stream as JSON Lines (one ExportRecord a line, the
export format of ``nexus-grpc export-user``), written to the browser as it
arrives. An erasure's page is GetErasure (its progress against what it
planned, then the receipt); ``/erasures`` is ListErasures, an admin key's.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

from google.protobuf import json_format

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.console import page_data
from nexus_grpc.console.params import BadRequest, positive_id, text
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

Params = Mapping[str, str]

#: A user id's longest form, as the other pages take it.
USER_ID_CHARS = 200
#: Projects whose names the user page reads (one GetProject each); beyond,
#: a project is shown by its id.
NAMED_PROJECTS = 50
RECEIPTS_PER_PAGE = 50
#: The ExportRecord kinds the user page counts, in its order, and what a
#: person calls each.
HELD_KINDS = {
    "session": "sessions",
    "episode": "episodes",
    "memory": "memories (USER, every tier)",
    "memory_revision": "earlier versions of those memories",
    "entity": "entities their episodes named",
    "relationship": "facts their episodes gave",
    "relationship_evidence": "pieces of evidence of those facts",
    "entity_episode": "mentions of entities in their episodes",
    "entity_alias": "aliases",
    "memory_usage": "uses SelectMemories recorded",
}
#: What an erasure's progress is measured by: what it found at its start.
PROGRESS_KINDS = ("sessions", "episodes", "memories")


def user_id_of(params: Params, *, required: bool = True) -> str:
    """The user a page is about (its ``user_id``), as typed: the server
    refuses one with spaces around it, so it is not stripped here."""
    value = params.get("user_id", "")
    if len(value) > USER_ID_CHARS:
        raise BadRequest("user_id", f"is {len(value)} characters; the limit is {USER_ID_CHARS}")
    if required and not value:
        raise BadRequest("user_id", "is required")
    return value


# The user page --------------------------------------------------------------


async def user(client: NexusClient, params: Params) -> dict[str, Any]:
    """What is held about ``user_id`` (in ``project_id``, or the tenant),
    counted from ExportUser. With no user, the page is a form to name one."""
    user_id = user_id_of(params, required=False)
    project_id = positive_id(params, "project_id")
    view: dict[str, Any] = {"user_id": user_id, "project_id": project_id, "project": None}
    if not user_id:
        return view
    if project_id:
        view["project"] = page_data.plain(await client.get_project(id=project_id))
    tally = _Tally()
    async for record in client.export_user(user_id=user_id, project_id=project_id):
        tally.add(record)
    names = await _project_names(client, sorted(tally.projects))
    view["held"] = [
        {"kind": kind, "what": what, "count": tally.kinds[kind]}
        for kind, what in HELD_KINDS.items()
    ]
    view["counts"] = {kind: tally.kinds[kind] for kind in HELD_KINDS}
    view["projects"] = [
        {"project_id": pid, "name": names.get(pid, ""), **tally.projects[pid]}
        for pid in sorted(tally.projects)
    ]
    view["episodes_elsewhere"] = tally.elsewhere
    return view


class _Tally:
    """ExportUser's records counted as they pass: by kind, and by project
    (sessions, their episodes, memories; 0 is outside any project)."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.projects: dict[int, Counter[str]] = {}
        self.session_projects: dict[int, int] = {}
        #: Episodes written acting for the user in others' sessions.
        self.elsewhere = 0

    def _in(self, project_id: int, kind: str) -> None:
        self.projects.setdefault(project_id, Counter())[kind] += 1

    def add(self, record: memory_pb2.ExportRecord) -> None:
        kind = record.WhichOneof("record") or ""
        self.kinds[kind] += 1
        if kind == "session":
            self.session_projects[record.session.id] = record.session.project_id
            self._in(record.session.project_id, "sessions")
        elif kind == "episode":
            project_id = self.session_projects.get(record.episode.session_id)
            if project_id is None:
                self.elsewhere += 1
            else:
                self._in(project_id, "episodes")
        elif kind == "memory":
            self._in(record.memory.project_id, "memories")


async def _project_names(client: NexusClient, project_ids: list[int]) -> dict[int, str]:
    async def one(project_id: int) -> tuple[int, str]:
        try:
            return project_id, (await client.get_project(id=project_id)).name
        except NexusClientError:
            return project_id, ""

    named = [i for i in project_ids if i][:NAMED_PROJECTS]
    return dict(await asyncio.gather(*(one(i) for i in named)))


# The export -----------------------------------------------------------------


def export_name(user_id: str, project_id: int) -> str:
    """The download's file name: the user id kept to safe characters."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in user_id)
    return (
        f"export-user-{safe[:80] or 'user'}{f'-project-{project_id}' if project_id else ''}.jsonl"
    )


async def export_lines(
    client: NexusClient, user_id: str, project_id: int
) -> tuple[str, AsyncIterator[bytes]]:
    """ExportUser as JSON Lines, one record a line, as it arrives. The first
    record is read here, so that a refusal (NOT_FOUND for a user the key may
    not see) is raised before any byte is sent; the rest is read as the
    browser takes it. A call that fails later ends the download unfinished
    (the connection is dropped, so the browser says it failed), never with
    a file that looks whole."""
    stream = client.export_user(user_id=user_id, project_id=project_id, timeout=None)
    try:
        first = await anext(stream, None)
    except BaseException:
        stream.cancel()
        raise

    async def lines() -> AsyncIterator[bytes]:
        try:
            if first is None:
                return
            yield _line(first)
            async for record in stream:
                yield _line(record)
        finally:
            stream.cancel()

    return export_name(user_id, project_id), lines()


def _line(record: memory_pb2.ExportRecord) -> bytes:
    as_dict = json_format.MessageToDict(record, preserving_proto_field_name=True)
    return (json.dumps(as_dict, ensure_ascii=False) + "\n").encode()


# Forgetting -----------------------------------------------------------------


def check_typed(form: Mapping[str, str], user_id: str) -> None:
    """A forget form goes on only when the user id typed into it is exactly
    the user's (no trimming: "alice " is not "alice")."""
    if form.get("typed_user_id", "") != user_id:
        raise BadRequest(
            "typed_user_id",
            f"type the user id exactly as shown ({user_id}) to forget them; nothing was forgotten",
        )


# An erasure and the receipts ------------------------------------------------


def erasure_view(erasure: memory_pb2.Erasure) -> dict[str, Any]:
    """The erasure as its page shows it: the message, its progress against
    what it planned (sessions, episodes and memories), and its counts by
    kind in the receipt's order."""
    row = page_data.plain(erasure)
    done = erasure.state == memory_pb2.ERASURE_STATE_DONE
    progress = [
        {
            "kind": kind,
            "done": getattr(erasure.counts, kind),
            "planned": getattr(erasure.planned, kind),
        }
        for kind in PROGRESS_KINDS
    ]
    whole = sum(p["planned"] for p in progress)
    went = sum(min(p["done"], p["planned"]) for p in progress)
    row["finished"] = done
    row["progress"] = progress
    row["percent"] = 100 if done or not whole else int(100 * went / whole)
    row["receipt"] = [
        {"kind": field.name, "count": getattr(erasure.counts, field.name)}
        for field in memory_pb2.ErasureCounts.DESCRIPTOR.fields
    ]
    return row


async def erasure(client: NexusClient, erasure_id: int) -> dict[str, Any]:
    return {"erasure": erasure_view(await client.get_erasure(id=erasure_id))}


async def receipts(client: NexusClient, params: Params) -> dict[str, Any]:
    """ListErasures: the tenant's receipts, newest first (an admin key's;
    any other key's PERMISSION_DENIED is the page's answer). ``user_id``
    finds one user's receipts, which then show the id that was named."""
    user_id = user_id_of(params, required=False)
    token = text(params, "page_token")
    listed = await client.list_erasures(
        page_size=RECEIPTS_PER_PAGE, page_token=token, user_id=user_id
    )
    return {
        "user_id": user_id,
        "erasures": [erasure_view(e) for e in listed.erasures],
        "next_page_token": listed.next_page_token,
    }
