"""Where the tools act: the project found or created once, sessions found or created by
external_id, whatever order agents start in."""

from __future__ import annotations

import asyncio
import uuid

from nexus_grpc.client import NexusClient
from nexus_grpc.mcp.workspace import Workspace, WorkspaceOptions, external_id_for


async def test_agents_starting_at_once_settle_on_one_project(harness):
    clients = [NexusClient(harness.target, retry=None) for _ in range(4)]
    try:
        workspaces = [Workspace(c, WorkspaceOptions(project="busy")) for c in clients]
        ids = await asyncio.gather(*(w.project_id() for w in workspaces))
        assert len(set(ids)) == 1
        page = await clients[0].list_projects(page_size=1000)
        assert [p.id for p in page.projects if p.name == "busy"] == [ids[0]]
        # Once found, it is remembered: a later start finds the same one.
        later = Workspace(clients[0], WorkspaceOptions(project="busy"))
        assert await later.project_id() == ids[0]
    finally:
        for c in clients:
            await c.close()


async def test_sessions_are_opened_once_and_found_by_any_agent(harness):
    async with (
        NexusClient(harness.target, retry=None) as one,
        NexusClient(harness.target, retry=None) as two,
    ):
        first = Workspace(one, WorkspaceOptions(project="p"))
        second = Workspace(two, WorkspaceOptions(project="p"))
        assert (await first.find_session("terminal-1")).id == 0  # reading creates nothing
        assert (await one.list_sessions()).sessions == []
        opened = await asyncio.gather(
            first.open_session("terminal-1"), second.open_session("terminal-1")
        )
        assert opened[0].id == opened[1].id != 0
        assert [s.id for s in (await one.list_sessions()).sessions] == [opened[0].id]
        assert (await second.find_session("terminal-1")).id == opened[0].id


def test_agent_session_ids_map_to_external_ids():
    claude = str(uuid.uuid4())
    assert external_id_for("p", claude) == claude
    assert external_id_for("p", claude.upper()) == claude  # one UUID, however written
    plain = external_id_for("p", "terminal-1")
    assert str(uuid.UUID(plain)) == plain
    assert plain == external_id_for("p", "terminal-1")
    assert plain != external_id_for("q", "terminal-1")
