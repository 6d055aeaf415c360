"""Codex CLI itself (the pinned ``@openai/codex``, ``codex exec``) with the hooks
``nexus-grpc hooks install codex`` wrote and trusted, against the Responses API
stand-in (a ``model_providers`` entry's ``base_url``) and a real server.

No ``--dangerously-bypass-hook-trust``: the hooks run because the install
wrote the trust Codex asks for."""

from __future__ import annotations

import json
from pathlib import Path

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from tests.e2e.agent_hooks.conftest import NEXUS, REPLY, Blackhole, base_env, host_bin, install, run
from tests.model_api_stub import OPENAI


def user_config(model_api, project: Path) -> str:
    """The user's own ~/.codex/config.toml: the model provider, the project
    trusted (as `codex --trust` leaves it), no final newline."""
    return (
        "# my Codex settings\n"
        'model = "gpt-5-codex"\n'
        'model_provider = "local"\n'
        'approval_policy = "never"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{model_api.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "LOCAL_MODEL_KEY"\n'
        "\n"
        f'[projects."{project}"]\n'
        'trust_level = "trusted"'
    )


def codex_env(home: Path) -> dict[str, str]:
    return {**base_env(home), "CODEX_HOME": str(home / ".codex"), "LOCAL_MODEL_KEY": "test-key"}


async def codex(prompt: str, *, env: dict[str, str], cwd: Path):
    ran = await run([host_bin("codex"), "exec", prompt], env=env, cwd=cwd)
    assert ran.returncode == 0, ran
    assert REPLY in ran.stdout
    return ran


def sent_with(model_api, words: str) -> str:
    found = [r.text() for r in model_api.calls(OPENAI) if words in r.text()]
    assert found, f"no request carried {words!r}"
    return found[-1]


async def test_a_fact_from_one_session_reaches_the_model_in_a_later_session(
    harness, home, project, model_api
):
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(user_config(model_api, project))
    env = codex_env(home)
    await install("codex", env=env, cwd=project, flags=["--target", harness.target])
    hooks = json.loads((project / ".codex" / "hooks.json").read_text())
    assert set(hooks["hooks"]) == {"SessionStart", "UserPromptSubmit", "Stop"}

    told = "Remember for later: the staging database listens on port 5433."
    await codex(told, env=env, cwd=project)
    asked = "Which port does the staging database listen on?"
    await codex(asked, env=env, cwd=project)
    shown = sent_with(model_api, asked)
    assert "<nexus-memory" in shown and "listens on port 5433" in shown

    page = await harness.memory.ListProjects(pb.ListProjectsRequest(page_size=10))
    [webshop] = [p for p in page.projects if p.name == "webshop"]
    sessions = await harness.memory.ListSessions(
        pb.ListSessionsRequest(project_id=webshop.id, page_size=10)
    )
    recorded = []
    for s in sessions.sessions:
        assert s.metadata["host"] == "codex"
        page = await harness.memory.ListEpisodes(pb.ListEpisodesRequest(session_id=s.id))
        recorded += [
            (e.user_message, e.ai_response, e.metadata["prompt_id"]) for e in page.episodes
        ]
    assert sorted(r[:2] for r in recorded) == sorted([(told, REPLY), (asked, REPLY)])
    assert all(r[2] for r in recorded)  # Codex's turn ids

    ran = await run([NEXUS, "hooks", "uninstall", "codex"], env=env, cwd=project)
    assert ran.returncode == 0, ran
    assert config.read_text() == user_config(model_api, project)  # byte for byte
    assert not (project / ".codex").exists()


async def test_with_the_server_hung_codex_still_answers(home, project, model_api):
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(user_config(model_api, project))
    env = codex_env(home)
    with Blackhole() as hung:
        await install(
            "codex",
            env=env,
            cwd=project,
            flags=["--target", hung, "--deadline", "0.5", "--scope", "user"],
        )
        asked = "What does the build script do?"
        await codex(asked, env=env, cwd=project)
    assert "<nexus-memory" not in sent_with(model_api, asked)
    assert (home / ".codex" / "hooks.json").exists()
