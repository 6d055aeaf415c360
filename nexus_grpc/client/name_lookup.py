"""Names a client works with, resolved to what the server holds.

A project is named, not numbered, in the places a person configures
(``nexus-grpc mcp --project``, the framework adapters' ``project=``,
``nexus-grpc usage --project``): it is found by name in the API key's own
tenant, where a name is unique (CreateProject answers ALREADY_EXISTS naming
the project that holds it), or created there on first use.
A conversation is named by whatever id its caller keeps (a LangChain
session id, an agent's session); it becomes a nexus session found by its
``external_id``, derived from that name, or created on first write.

``ListProjects`` under an admin key lists every tenant's projects, so the
lookup by name keeps only those of the key's own tenant (``GetServiceStatus``
says which that is): an admin's tools must not write into a project another
tenant happens to have named the same.
"""

from __future__ import annotations

import grpc

from nexus_grpc.client import NexusClient, NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.session_names import SESSION_NAMESPACE, session_external_id

__all__ = [
    "SESSION_NAMESPACE",
    "find_or_create_project",
    "find_project",
    "find_or_create_session",
    "session_external_id",
]

_PAGE = 1000


async def _own_tenant(client: NexusClient) -> str:
    return (await client.get_service_status()).tenant


async def _projects_named(client: NexusClient, name: str, tenant: str | None) -> list[int]:
    """Ids of the projects called ``name``, oldest first (one a tenant); only
    ``tenant``'s when given, else every one the key sees."""
    ids: list[int] = []
    token = ""
    while True:
        page = await client.list_projects(page_size=_PAGE, page_token=token)
        ids += [
            p.id for p in page.projects if p.name == name and (tenant is None or p.tenant == tenant)
        ]
        token = page.next_page_token
        if not token:
            return sorted(ids)


async def find_project(client: NexusClient, name: str) -> int | None:
    """The id of the project called ``name`` in the key's own tenant; None
    when there is none. Raises ``NexusClientError``."""
    if not await _projects_named(client, name, None):
        return None
    found = await _projects_named(client, name, await _own_tenant(client))
    return found[0] if found else None


async def find_or_create_project(client: NexusClient, name: str, *, description: str = "") -> int:
    """The id of the project called ``name`` in the key's own tenant, created
    (with ``description``) when there is none. Raises ``NexusClientError``."""
    # The key's tenant is asked for only when some project has the name:
    # GetServiceStatus checks every dependency, and a first start creates.
    if await _projects_named(client, name, None):
        tenant: str | None = await _own_tenant(client)
        found = await _projects_named(client, name, tenant)
        if found:
            return found[0]
    try:
        created = await client.create_project(
            project=memory_pb2.Project(name=name, description=description)
        )
    except NexusClientError as exc:
        # Another client, starting at once, created it first: the refusal
        # names the project, so both settle on the one the tenant holds.
        held = exc.resource_info
        if exc.code != grpc.StatusCode.ALREADY_EXISTS or held is None:
            raise
        return int(held.resource_name)
    return created.id


async def find_or_create_session(
    client: NexusClient,
    external_id: str,
    *,
    create: memory_pb2.Session,
) -> memory_pb2.Session:
    """The session with ``external_id`` in the key's tenant; ``create`` (with
    that external_id) when there is none. Two clients creating it at once
    both get the one that won. Raises ``NexusClientError``."""
    try:
        return await client.get_session(external_id=external_id)
    except NexusClientError as exc:
        if exc.code != grpc.StatusCode.NOT_FOUND:
            raise
    session = memory_pb2.Session()
    session.CopyFrom(create)
    session.external_id = external_id
    try:
        return await client.create_session(session=session)
    except NexusClientError as exc:
        if exc.code != grpc.StatusCode.ALREADY_EXISTS:
            raise
    return await client.get_session(external_id=external_id)
