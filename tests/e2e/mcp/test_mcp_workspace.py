"""Where the tools act: the project found or created once, sessions found or created by
external_id, whatever order agents start in. (The external_id an agent's session id
maps to, and ``nexus-grpc mcp``'s flags: tests/unit/test_mcp_options.py.)"""

from __future__ import annotations

import asyncio

from nexus_grpc.client import NexusClient
from nexus_grpc.mcp.workspace import Workspace, WorkspaceOptions


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


async def test_an_admin_keys_project_is_found_and_created_in_its_own_tenant(tmp_path):
    """An admin key lists every tenant's projects; ``--project`` must still be
    the one of its own tenant, as the README says (the fourth probe found
    tenant B's admin writing into tenant A's project of the same name)."""
    import json

    from tests.support import start_harness

    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": "ws-a-key-000000001", "name": "a", "users": "*", "tenant": "ta"},
                    {"key": "ws-b-admin-0000001", "name": "b-ops", "users": "*",
                     "admin": True, "tenant": "tb"},
                ]
            }
        )
    )  # fmt: skip
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    try:
        async with (
            NexusClient(h.target, api_key="ws-a-key-000000001", retry=None) as a,
            NexusClient(h.target, api_key="ws-b-admin-0000001", retry=None) as b_admin,
        ):
            theirs = await Workspace(a, WorkspaceOptions(project="A-form")).project_id()
            mine = await Workspace(b_admin, WorkspaceOptions(project="A-form")).project_id()
            assert mine != theirs
            got = await b_admin.get_project(id=mine)
            assert (got.name, got.tenant) == ("A-form", "tb")
            # Found again, not created again; tenant A's project is A's alone.
            assert await Workspace(b_admin, WorkspaceOptions(project="A-form")).project_id() == mine
            listed = await a.list_projects(page_size=100)
            assert [(p.id, p.tenant) for p in listed.projects] == [(theirs, "ta")]
    finally:
        await h.close()
