"""Claude Code itself (the pinned ``@anthropic-ai/claude-code``, ``claude -p``) with
the hooks ``nexus-grpc hooks install claude-code`` wrote, against the Messages
API stand-in (``ANTHROPIC_BASE_URL``) and a real server."""

from __future__ import annotations

import json
from pathlib import Path

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from tests.e2e.agent_hooks.conftest import REPLY, Blackhole, base_env, hook, host_bin, install, run
from tests.model_api_stub import ANTHROPIC

# The user's own project settings: their permissions, and a hook of theirs on
# one of our events, in their own formatting (four spaces, no final newline).
USER_SETTINGS = """{
    "permissions": {
        "allow": ["Bash(npm test:*)"]
    },
    "hooks": {
        "UserPromptSubmit": [
            {
                "hooks": [
                    {
                        "type": "command",
                        "command": "echo 'The user asks for answers in British English.'"
                    }
                ]
            }
        ]
    }
}"""


def claude_env(home: Path, model_api) -> dict[str, str]:
    return {
        **base_env(home),
        "ANTHROPIC_BASE_URL": model_api.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-key",
        # No update checks, telemetry or error reports: nothing but the model API.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


async def claude(prompt: str, *, env: dict[str, str], cwd: Path):
    ran = await run([host_bin("claude"), "-p", prompt], env=env, cwd=cwd)
    assert ran.returncode == 0, ran
    assert REPLY in ran.stdout
    return ran


def sent_with(model_api, words: str) -> str:
    """What the model was shown in the request that carried the prompt ``words``."""
    found = [r.text() for r in model_api.calls(ANTHROPIC) if words in r.text()]
    assert found, f"no request carried {words!r}"
    return found[-1]


async def test_a_fact_from_one_session_reaches_the_model_in_a_later_session(
    harness, home, project, model_api
):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    env = claude_env(home, model_api)
    await install("claude-code", env=env, cwd=project, flags=["--target", harness.target])
    installed = json.loads(settings.read_text())
    assert installed["permissions"] == {"allow": ["Bash(npm test:*)"]}
    assert len(installed["hooks"]["UserPromptSubmit"]) == 2  # theirs, then ours

    told = "Remember for later: the staging database listens on port 5433."
    await claude(told, env=env, cwd=project)
    assert "5433" not in sent_with(model_api, told).replace(told, "")

    # A fact stored as the MCP tools store one (memory_add_fact, longterm).
    page = await harness.memory.ListProjects(pb.ListProjectsRequest(page_size=10))
    [webshop] = [p for p in page.projects if p.name == "webshop"]
    await harness.memory.CreateMemory(
        pb.CreateMemoryRequest(
            memory=pb.Memory(
                kind=pb.MEMORY_KIND_PROJECT,
                title="Deploys go out through scripts/deploy.sh, blue-green",
                content="Deploys go out through scripts/deploy.sh, blue-green",
                tier=pb.TIER_LONGTERM,
                project_id=webshop.id,
            )
        )
    )

    asked = "Which port does the staging database listen on?"
    await claude(asked, env=env, cwd=project)
    shown = sent_with(model_api, asked)
    assert "<nexus-memory" in shown and "memory, not instructions" in shown
    assert "listens on port 5433" in shown  # the earlier session's exchange, at the prompt
    assert "scripts/deploy.sh" in shown  # the project's memory, at the session's start
    assert "British English" in shown  # the user's own hook ran too

    # Each exchange is an episode of a session named after Claude's session id.
    sessions = await harness.memory.ListSessions(
        pb.ListSessionsRequest(project_id=webshop.id, page_size=10)
    )
    assert len(sessions.sessions) == 2
    recorded = []
    for s in sessions.sessions:
        assert s.metadata["host"] == "claude-code" and s.external_id == s.name
        page = await harness.memory.ListEpisodes(pb.ListEpisodesRequest(session_id=s.id))
        recorded += [(e.user_message, e.ai_response) for e in page.episodes]
    assert sorted(recorded) == sorted([(told, REPLY), (asked, REPLY)])

    # The same Stop again, from Claude's own transcript: nothing is stored twice.
    for s in sessions.sessions:
        [transcript] = (home / ".claude" / "projects").glob(f"*/{s.name}.jsonl")
        stop = {"session_id": s.name, "transcript_path": str(transcript), "cwd": str(project),
                "hook_event_name": "Stop", "stop_hook_active": False,
                "last_assistant_message": REPLY}  # fmt: skip
        ran = await hook("claude-code", stop, env=env, cwd=project,
                         flags=["--target", harness.target])  # fmt: skip
        assert (ran.returncode, ran.stderr) == (0, "")
        page = await harness.memory.ListEpisodes(pb.ListEpisodesRequest(session_id=s.id))
        assert len(page.episodes) == 1

    await run_ok(["hooks", "uninstall", "claude-code"], env=env, cwd=project)
    assert settings.read_text() == USER_SETTINGS  # byte for byte


async def run_ok(args: list[str], *, env: dict[str, str], cwd: Path) -> None:
    from tests.e2e.agent_hooks.conftest import NEXUS

    ran = await run([NEXUS, *args], env=env, cwd=cwd)
    assert ran.returncode == 0, ran


async def test_with_the_server_hung_claude_still_answers(home, project, model_api):
    env = claude_env(home, model_api)
    with Blackhole() as hung:
        await install(
            "claude-code", env=env, cwd=project, flags=["--target", hung, "--deadline", "0.5"]
        )
        asked = "What does the build script do?"
        await claude(asked, env=env, cwd=project)
    assert "<nexus-memory" not in sent_with(model_api, asked)


async def test_a_user_scope_install_leaves_no_trace_after_uninstall(home, project, model_api):
    env = claude_env(home, model_api)
    user_settings = home / ".claude" / "settings.json"
    user_settings.parent.mkdir()
    user_settings.write_text('{"theme": "dark", "hooks": {}}\n')
    await install("claude-code", env=env, cwd=project, flags=["--scope", "user"])
    assert not (project / ".claude").exists()
    assert json.loads(user_settings.read_text())["theme"] == "dark"
    await run_ok(["hooks", "uninstall", "claude-code", "--scope", "user"], env=env, cwd=project)
    assert user_settings.read_text() == '{"theme": "dark", "hooks": {}}\n'
