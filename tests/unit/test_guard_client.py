"""Guards found by a mutation audit of the unit tier: rules of the Python
client (client/views.py, client/name_lookup.py) that no unit test held.

The rest are tests/unit/test_client_requests_and_views.py's; the lookups
against a real server are the end-to-end tier's."""

from __future__ import annotations

from nexus_grpc.client import MemoryKind
from nexus_grpc.client.name_lookup import find_project
from nexus_grpc.client.views import view
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2


def test_an_enum_value_newer_than_this_client_reads_as_its_number():
    assert view(memory_pb2.Memory(kind=memory_pb2.MEMORY_KIND_USER)).kind is MemoryKind.USER
    assert view(memory_pb2.Memory(kind=99)).kind == 99


class _Listing:
    """What find_project asks of a client: the projects the key sees (an
    admin key sees every tenant's) and the key's own tenant."""

    def __init__(self, tenant: str, projects: list[memory_pb2.Project]) -> None:
        self.tenant, self.projects = tenant, projects

    async def list_projects(
        self, page_size: int, page_token: str
    ) -> memory_pb2.ListProjectsResponse:
        return memory_pb2.ListProjectsResponse(projects=self.projects)

    async def get_service_status(self) -> memory_pb2.ServiceStatus:
        return memory_pb2.ServiceStatus(tenant=self.tenant)


async def test_a_project_is_found_by_name_only_in_the_keys_own_tenant():
    seen = [
        memory_pb2.Project(id=1, name="atlas", tenant="other"),
        memory_pb2.Project(id=2, name="atlas", tenant="mine"),
    ]
    assert await find_project(_Listing("mine", seen), "atlas") == 2  # type: ignore[arg-type]
    assert await find_project(_Listing("third", seen), "atlas") is None  # type: ignore[arg-type]
