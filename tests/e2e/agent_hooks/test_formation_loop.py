"""What the user says in one agent session forms their memory, and the next session
starts with it: the stop hook's episode goes through extraction and formation
(the server's LLM is the Ollama stand-in, scripted as a careful model would
answer), and the session-start hook brings the formed memory back, to that
user only."""

from __future__ import annotations

import uuid

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from tests.e2e.agent_hooks.conftest import base_env, context_of, episodes_of, hook
from tests.graph_support import EMPTY
from tests.memory_formation_support import formed, said, script

STUB_DEFAULT_REPLY = EMPTY
TOLD = "I'm on the platform team now, so route infra questions to me."


async def test_a_stop_forms_the_users_memory_and_the_next_session_starts_with_it(
    gh, stub, home, project
):
    script(stub, TOLD, said("The user is on the platform team.", "I'm on the platform team"))
    first = str(uuid.uuid4())
    stop = {
        "session_id": first,
        "cwd": str(project),
        "hook_event_name": "Stop",
        "prompt": TOLD,
        "prompt_id": "p-1",
        "last_assistant_message": "Noted: infra questions go to you.",
    }
    flags = ["--target", gh.target, "--user", "dana"]
    ran = await hook("codex", stop, env=base_env(home), cwd=project, flags=flags)
    assert (ran.returncode, ran.stderr) == (0, "")
    [episode] = await episodes_of(gh, first)
    event = await formed(gh, episode.id)
    [operation] = event.memory_formation.operations
    assert operation.user_id == "dana"
    episode = await gh.memory.GetEpisode(pb.GetEpisodeRequest(id=episode.id))
    assert episode.memory_state == pb.JOB_STATE_DONE

    start = {"session_id": str(uuid.uuid4()), "cwd": str(project),
             "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
    ran = await hook("codex", start, env=base_env(home), cwd=project, flags=flags)
    assert "(user) The user is on the platform team." in context_of(ran)
    other = await hook(
        "codex", start, env=base_env(home), cwd=project,
        flags=["--target", gh.target, "--user", "erin"],
    )  # fmt: skip
    assert "platform team" not in context_of(other)
