"""Gemini CLI itself (the pinned ``@google/gemini-cli``, ``gemini -p``) with the
hooks ``nexus-grpc hooks install gemini`` wrote (SessionStart, BeforeAgent,
AfterAgent), against the Gemini API stand-in (``GOOGLE_GEMINI_BASE_URL``) and a
real server."""

from __future__ import annotations

from pathlib import Path

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from tests.e2e.agent_hooks.conftest import NEXUS, REPLY, Blackhole, base_env, host_bin, install, run
from tests.model_api_stub import GEMINI

# The user's own settings, with a comment (Gemini CLI reads JSON with comments).
USER_SETTINGS = """{
  // signed in with an API key; no usage statistics (nothing but the model API)
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "ui": {"hideTips": true} /* quiet */
}
"""


def gemini_env(home: Path, model_api) -> dict[str, str]:
    return {
        **base_env(home),
        "GEMINI_API_KEY": "test-key",
        "GOOGLE_GEMINI_BASE_URL": model_api.url,
        # The project's folder is trusted (its .gemini/settings.json is read).
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }


async def gemini(prompt: str, *, env: dict[str, str], cwd: Path):
    ran = await run([host_bin("gemini"), "-p", prompt], env=env, cwd=cwd)
    assert ran.returncode == 0, ran
    assert REPLY in ran.stdout
    return ran


def sent_with(model_api, words: str) -> str:
    found = [r.text() for r in model_api.calls(GEMINI) if words in r.text()]
    assert found, f"no request carried {words!r}"
    return found[-1]


async def test_a_fact_from_one_session_reaches_the_model_in_a_later_session(
    harness, home, project, model_api
):
    user_settings = home / ".gemini" / "settings.json"
    user_settings.parent.mkdir()
    user_settings.write_text(USER_SETTINGS)
    env = gemini_env(home, model_api)
    await install("gemini", env=env, cwd=project, flags=["--target", harness.target])

    told = "Remember for later: the staging database listens on port 5433."
    await gemini(told, env=env, cwd=project)
    asked = "Which port does the staging database listen on?"
    await gemini(asked, env=env, cwd=project)
    shown = sent_with(model_api, asked)
    # Gemini CLI escapes the markup of what hooks add (inside its <hook_context>).
    assert "&lt;nexus-memory" in shown and "listens on port 5433" in shown

    page = await harness.memory.ListProjects(pb.ListProjectsRequest(page_size=10))
    [webshop] = [p for p in page.projects if p.name == "webshop"]
    sessions = await harness.memory.ListSessions(
        pb.ListSessionsRequest(project_id=webshop.id, page_size=10)
    )
    recorded = []
    for s in sessions.sessions:
        assert s.metadata["host"] == "gemini"
        page = await harness.memory.ListEpisodes(pb.ListEpisodesRequest(session_id=s.id))
        recorded += [(e.user_message, e.ai_response) for e in page.episodes]
        # The id of Gemini's own message in its transcript (not a hash of the words).
        assert all(not e.metadata["prompt_id"].startswith("sha256:") for e in page.episodes)
    # The user's words alone: not the context hooks put in front of them.
    assert sorted(recorded) == sorted([(told, REPLY), (asked, REPLY)])

    ran = await run([NEXUS, "hooks", "uninstall", "gemini"], env=env, cwd=project)
    assert ran.returncode == 0, ran
    assert not (project / ".gemini").exists()
    assert user_settings.read_text() == USER_SETTINGS


async def test_with_the_server_hung_gemini_still_answers(home, project, model_api):
    user_settings = home / ".gemini" / "settings.json"
    user_settings.parent.mkdir()
    user_settings.write_text(USER_SETTINGS)
    env = gemini_env(home, model_api)
    with Blackhole() as hung:
        await install(
            "gemini",
            env=env,
            cwd=project,
            flags=["--target", hung, "--deadline", "0.5", "--scope", "user"],
        )
        asked = "What does the build script do?"
        await gemini(asked, env=env, cwd=project)
    assert "nexus-memory" not in sent_with(model_api, asked)
    ran = await run(
        [NEXUS, "hooks", "uninstall", "gemini", "--scope", "user"], env=env, cwd=project
    )
    assert ran.returncode == 0, ran
    assert user_settings.read_text() == USER_SETTINGS  # comments and all
