"""What the adapters share: the install without frameworks, the project looked up by
name in the key's own tenant (an admin's too). Refusals as Python's exceptions, given
the client's error without a server: tests/unit/test_frameworks_conventional_errors.py."""

from __future__ import annotations

import json

import pytest

from nexus_grpc.client import NexusClient
from nexus_grpc.integrations.langgraph import NexusStore
from tests.light_install import run_light
from tests.support import start_harness

FRAMEWORKS = ("langgraph", "langchain_core", "llama_index", "agents")


def blocked(code: str):
    """``code`` in a child interpreter where no framework imports."""
    return run_light(
        f"import importlib.abc, sys\nBLOCKED = {FRAMEWORKS!r}\n"
        "class NoFramework(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, NoFramework())\n" + code
    )


def test_the_package_imports_without_any_framework_and_each_adapter_names_its_extra():
    shared = blocked(
        "import nexus_grpc.integrations, nexus_grpc.integrations.adapter_client\n"
        "import nexus_grpc.integrations.search_results, nexus_grpc.integrations.chat_sessions\n"
        "print('shared ok')\n"
    )
    assert shared.returncode == 0, shared.stderr
    assert "shared ok" in shared.stdout
    for module, extra in [("langgraph", "langgraph"), ("langchain", "langchain"),
                          ("llamaindex", "llamaindex")]:  # fmt: skip
        result = blocked(f"import nexus_grpc.integrations.{module}")
        assert result.returncode != 0
        assert f"pip install 'nexus-grpc[{extra}]'" in result.stderr, result.stderr


ALPHA_ADMIN = "alpha-admin-key-000000001"
BETA_USER = "beta-user-key-00000000001"


async def test_an_admin_key_finds_and_creates_the_project_in_its_own_tenant(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": ALPHA_ADMIN, "name": "alpha-ops", "admin": True, "tenant": "alpha"},
                    {"key": BETA_USER, "name": "beta-app", "users": "*", "tenant": "beta"},
                ]
            }
        )
    )
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    try:
        async with (
            NexusClient(h.target, api_key=BETA_USER, retry=None) as beta,
            NexusClient(h.target, api_key=ALPHA_ADMIN, retry=None) as alpha,
        ):
            await NexusStore(client=beta, project="assistant").aput(
                ("memories", "bob"), "k", {"secret": "beta's"}
            )
            # The admin sees beta's project in its listing, but its store is alpha's own.
            store = NexusStore(client=alpha, project="assistant")
            assert await store.aget(("memories", "bob"), "k") is None
            await store.aput(("memories", "bob"), "k", {"secret": "alpha's"})
            listed = (await alpha.list_projects(page_size=100)).projects
            assert sorted((p.name, p.tenant) for p in listed) == [
                ("assistant", "alpha"),
                ("assistant", "beta"),
            ]
            again = NexusStore(client=alpha, project="assistant")
            assert (await again.aget(("memories", "bob"), "k")).value == {"secret": "alpha's"}
            back = NexusStore(client=beta, project="assistant")
            assert (await back.aget(("memories", "bob"), "k")).value == {"secret": "beta's"}
            # Without the key, nothing at all.
            with pytest.raises(PermissionError, match="UNAUTHENTICATED"):
                async with NexusClient(h.target, retry=None) as nobody:
                    await NexusStore(client=nobody, project="assistant").aget(("x",), "k")
    finally:
        await h.close()
