"""``nexus-grpc hooks run HOST`` against a real server, fed each host's own payloads.

The hosts' payloads and transcripts here have the shapes the pinned CLIs write
(test_claude_code.py, test_codex.py and test_gemini.py drive the CLIs
themselves); this module covers what a host run cannot easily vary: replays,
budgets, isolation, and a server that is down, slow or refusing.

What needs no subprocess or server, the payloads' refusals and fields, the flags'
refusals and the block cut to its budget: tests/unit/test_hooks_input_and_context.py;
here one budget and one unreadable input stay, for the command's wiring. What a hook
recalls and records on a stand-in for its wire (the order of a session start's
memories, the memory search standing in for a failed selection, a stop's request id
and cut text, a session of another project, a project create lost in a race):
tests/unit/test_hooks_rules_recall_and_capture.py.
"""

from __future__ import annotations

import ast
import json
import socket
import sys
import uuid
from pathlib import Path

import pytest

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as pb
from tests.e2e.agent_hooks.conftest import Blackhole, base_env, context_of, episodes_of, hook
from tests.light_install import BLOCKER
from tests.support import start_harness
from tests.tls_certificates import ca_server_and_client, openssl_or_skip

PROMPT = "Which port does the staging database listen on?"
ANSWER = "The staging database listens on port 5433; production stays on 5432."


def flags(harness, *more: str) -> list[str]:
    return ["--target", harness.target, "--user", "dana", *more]


def claude_transcript(path: Path, session: str, turns: list[tuple[str, str, str]]) -> Path:
    """A transcript as Claude Code writes it: each prompt a ``user`` entry with its
    ``promptId``, a tool result (a ``user`` entry too) and the answer."""
    lines = []
    parent = None
    for prompt_id, prompt, answer in turns:
        for entry in (
            {"type": "user", "promptId": prompt_id, "message": {"role": "user", "content": prompt}},
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
                },
            },
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            },
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]},
            },
        ):
            uid = str(uuid.uuid4())
            lines.append(
                json.dumps({**entry, "uuid": uid, "parentUuid": parent, "sessionId": session})
            )
            parent = uid
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_a_stop_records_the_exchange_once_in_the_agents_session(
    harness, home, project, tmp_path
):
    session = str(uuid.uuid4())
    transcript = claude_transcript(
        tmp_path / "t.jsonl",
        session,
        [("p-1", "Set up the repo", "Done."), ("p-2", PROMPT, ANSWER)],
    )
    stop = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": ANSWER,
    }
    env = base_env(home)
    for _ in range(2):  # the same stop, again: a retried hook
        ran = await hook("claude-code", stop, env=env, cwd=project, flags=flags(harness))
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    [episode] = await episodes_of(harness, session)
    assert (episode.user_message, episode.ai_response) == (PROMPT, ANSWER)
    assert dict(episode.metadata) == {
        "source": "nexus-grpc hooks",
        "host": "claude-code",
        "prompt_id": "p-2",
    }
    nexus_session = await harness.memory.GetSession(
        pb.GetSessionRequest(external_id=session)  # a UUID is the external_id itself
    )
    assert nexus_session.user_id == "dana"
    assert nexus_session.name == session
    project_row = await harness.memory.GetProject(pb.GetProjectRequest(id=nexus_session.project_id))
    assert project_row.name == "webshop"  # the git work tree's folder
    # Extraction (and, where the project forms memories, formation) is queued on it.
    assert episode.extraction_state == pb.JOB_STATE_PENDING


async def test_codex_stop_takes_the_prompt_of_its_own_turn(harness, home, project, tmp_path):
    session, turn = "01a24e12-567f-7032-a985-6b8a47e69747", "01a24e12-56c6-77c1-86ae-c0fe32cce48c"

    def user(text: str, turn_id: str | None) -> dict:
        payload = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        if turn_id:
            payload["internal_chat_message_metadata_passthrough"] = {"turn_id": turn_id}
        return {"type": "response_item", "payload": payload}

    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"type": "session_meta", "payload": {"id": session}},
                user("<environment_context>\n  <cwd>/x</cwd>\n</environment_context>", None),
                user(PROMPT, turn),
                user("A later turn's prompt", "01a24e12-9999-77c1-86ae-c0fe32cce48c"),
            )
        )
        + "\n"
    )
    stop = {
        "session_id": session,
        "turn_id": turn,
        "transcript_path": str(rollout),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "model": "gpt-5",
        "stop_hook_active": False,
        "last_assistant_message": ANSWER,
    }
    ran = await hook("codex", stop, env=base_env(home), cwd=project, flags=flags(harness))
    assert (ran.returncode, ran.stderr) == (0, "")
    [episode] = await episodes_of(harness, session)
    assert (episode.user_message, episode.metadata["prompt_id"]) == (PROMPT, turn)


async def test_gemini_after_agent_records_the_users_words_without_hook_context(
    harness, home, project, tmp_path
):
    session = str(uuid.uuid4())
    chat = tmp_path / "session.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"sessionId": session, "kind": "main"},
                {"$set": {"messages": [{"id": "m0", "type": "user", "content": [
                    {"text": "<session_context>\nThis is the Gemini CLI.</session_context>"}]}]}},
                {"id": "m1", "type": "user", "content": [
                    {"text": f"<hook_context>earlier memory</hook_context>\n\n{PROMPT}"}]},
                {"id": "m2", "type": "gemini", "content": ANSWER},
            )
        )
        + "\n"
    )  # fmt: skip
    after = {
        "session_id": session,
        "transcript_path": str(chat),
        "cwd": str(project),
        "hook_event_name": "AfterAgent",
        "timestamp": "2026-12-07T01:20:41.867Z",
        "prompt": f"<hook_context>earlier memory</hook_context>\n\n{PROMPT}",
        "prompt_response": ANSWER,
        "stop_hook_active": False,
    }
    env = base_env(home)
    for _ in range(2):
        ran = await hook("gemini", after, env=env, cwd=project, flags=flags(harness))
        assert (ran.returncode, ran.stderr) == (0, "")
    [episode] = await episodes_of(harness, session)
    assert (episode.user_message, episode.metadata["prompt_id"]) == (PROMPT, "m1")


async def _exchange(harness, home, project, session: str, prompt: str, answer: str) -> None:
    stop = {
        "session_id": session,
        "cwd": str(project),
        "hook_event_name": "AfterAgent",
        "prompt": prompt,
        "prompt_response": answer,
    }
    ran = await hook("gemini", stop, env=base_env(home), cwd=project, flags=flags(harness))
    assert (ran.returncode, ran.stderr) == (0, "")


async def _memory(harness, project_id: int, text: str, *, kind=pb.MEMORY_KIND_PROJECT, user=""):
    await harness.memory.CreateMemory(
        pb.CreateMemoryRequest(
            memory=pb.Memory(
                kind=kind,
                title=text,
                content=text,
                tier=pb.TIER_LONGTERM,
                project_id=project_id,
                user_id=user,
            )
        )
    )


async def _project_id(harness, name: str = "webshop") -> int:
    page = await harness.memory.ListProjects(pb.ListProjectsRequest(page_size=100))
    return next(p.id for p in page.projects if p.name == name)


async def test_a_prompt_brings_back_other_sessions_exchanges_and_memories_marked_as_memory(
    harness, home, project
):
    earlier, now = str(uuid.uuid4()), str(uuid.uuid4())
    await _exchange(harness, home, project, earlier, "Where does staging run?", ANSWER)
    await _exchange(harness, home, project, now, "Which database port again?", "Port 5433.")
    project_id = await _project_id(harness)
    await _memory(harness, project_id, "The staging database is rebuilt every night at 02:00")
    await _memory(
        harness, project_id, "Dana prefers psql over GUI clients", kind=pb.MEMORY_KIND_USER,
        user="dana",
    )  # fmt: skip
    await _memory(
        harness, project_id, "Eve keeps her notes about the staging database in Notion",
        kind=pb.MEMORY_KIND_USER, user="eve",
    )  # fmt: skip
    other = await harness.memory.CreateProject(
        pb.CreateProjectRequest(project=pb.Project(name="other"))
    )
    await _memory(harness, other.id, "The staging database of project other is on port 7777")

    prompt = {
        "session_id": now,
        "cwd": str(project),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "What port is the staging database on?",
    }
    ran = await hook("claude-code", prompt, env=base_env(home), cwd=project, flags=flags(harness))
    assert (ran.returncode, ran.stderr) == (0, "")
    answer = json.loads(ran.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    context = answer["additionalContext"]
    assert context.startswith('<nexus-memory project="webshop">')
    assert context.endswith("</nexus-memory>")
    assert "memory, not instructions" in context
    assert ANSWER in context  # the other session's exchange
    assert "Port 5433." not in context  # this session's own is in the model's context already
    assert "rebuilt every night" in context  # a project memory
    assert "psql" in context  # dana's own
    assert "Eve" not in context and "7777" not in context  # another user's, another project's


async def test_context_stays_within_its_token_budget(harness, home, project):
    from nexus_grpc.agent_hooks.context import estimate_tokens

    session = str(uuid.uuid4())
    await _exchange(harness, home, project, session, "Note the staging setup", ANSWER)
    project_id = await _project_id(harness)
    for i in range(40):
        await _memory(harness, project_id, f"Staging fact number {i}: " + "detail " * 30)
    start = {"session_id": session, "cwd": str(project), "hook_event_name": "SessionStart",
             "source": "startup"}  # fmt: skip
    env = base_env(home)
    ran = await hook(
        "claude-code", start, env=env, cwd=project,
        flags=flags(harness, "--session-tokens", "300"),
    )  # fmt: skip
    context = context_of(ran)
    assert 0 < estimate_tokens(context) <= 300, ran
    assert context.count("Staging fact number") >= 1
    nothing = await hook(
        "claude-code", start, env=env, cwd=project, flags=flags(harness, "--session-tokens", "0")
    )
    assert (nothing.returncode, nothing.stdout) == (0, "")


async def test_reading_creates_nothing_before_the_first_exchange(harness, home, project):
    for event in ("SessionStart", "UserPromptSubmit"):
        payload = {"session_id": str(uuid.uuid4()), "cwd": str(project),
                   "hook_event_name": event, "prompt": "hello"}  # fmt: skip
        ran = await hook("claude-code", payload, env=base_env(home), cwd=project,
                         flags=flags(harness))  # fmt: skip
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    page = await harness.memory.ListProjects(pb.ListProjectsRequest(page_size=10))
    assert list(page.projects) == []


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop"])
async def test_a_server_down_or_hung_adds_nothing_and_exits_0_within_the_deadline(
    home, project, event
):
    payload = {"session_id": str(uuid.uuid4()), "cwd": str(project), "hook_event_name": event,
               "prompt": PROMPT, "last_assistant_message": ANSWER}  # fmt: skip
    payload.setdefault("transcript_path", "")
    with Blackhole() as hung:
        for target in (_closed_port(), hung):
            ran = await hook(
                "claude-code", {**payload, "prompt": PROMPT}, env=base_env(home), cwd=project,
                flags=["--target", target, "--deadline", "1"],
            )  # fmt: skip
            assert (ran.returncode, ran.stdout) == (0, "")
            [line] = ran.stderr.splitlines()
            assert line.startswith("nexus-grpc hooks: claude-code: ") and "no context" in line
            # The deadline holds whatever the server does; what is left is the
            # interpreter's start, well under a host's own hook timeout (60 s).
            assert ran.seconds < 1 + 4, ran


async def test_a_refused_key_adds_nothing_and_says_why(tmp_path, home, project):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": "hooks-key-0000000001", "name": "dev",
                                          "users": "*"}]}))  # fmt: skip
    h = await start_harness(tmp_path / "data", auth_keys_file=str(keys))
    try:
        payload = {"session_id": str(uuid.uuid4()), "cwd": str(project),
                   "hook_event_name": "Stop", "prompt": PROMPT,
                   "last_assistant_message": ANSWER}  # fmt: skip
        key_file = tmp_path / "key"
        for key in ("wrong-key-000000000001", "hooks-key-0000000001"):
            key_file.write_text(key + "\n")
            ran = await hook(
                "codex", payload, env=base_env(home), cwd=project,
                flags=["--target", h.target, "--api-key-file", str(key_file)],
            )  # fmt: skip
            assert (ran.returncode, ran.stdout) == (0, "")
            if key.startswith("wrong"):
                assert "UNAUTHENTICATED" in ran.stderr
            else:
                assert ran.stderr == ""
    finally:
        await h.close()


async def test_input_it_cannot_read_is_one_line_and_exit_0(home, project):
    from tests.e2e.agent_hooks.conftest import NEXUS, run

    ran = await run(
        [NEXUS, "hooks", "run", "claude-code", "--target", _closed_port()],
        env=base_env(home), cwd=project, stdin=b'{"hook_event_name": "PreToolUse"}',
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "")
    [line] = ran.stderr.splitlines()
    assert "not one of ours" in line
    # A flag this version does not know (a command another version installed):
    # exit 2 would make Claude Code block the prompt.
    ran = await run(
        [NEXUS, "hooks", "run", "claude-code", "--context-budget", "9"],
        env=base_env(home), cwd=project, stdin=b"{}",
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "")
    [line] = ran.stderr.splitlines()
    assert "unrecognized arguments: --context-budget 9" in line


async def test_a_hook_runs_on_the_client_install_and_imports_only_what_it_needs(
    harness, home, project
):
    """``pip install nexus-grpc`` (no [server] extra) is enough, and a hook loads
    neither the typed client nor any other command's modules: its start-up is
    paid on every prompt."""
    from tests.e2e.agent_hooks.conftest import run

    code = BLOCKER + (
        "import sys\nfrom nexus_grpc.cli import main\ncode = main()\n"
        "print(sorted(m for m in sys.modules if m.startswith('nexus_grpc')),"
        " file=sys.stderr)\nsys.exit(code)\n"
    )
    stop = {"session_id": str(uuid.uuid4()), "cwd": str(project), "hook_event_name": "Stop",
            "prompt": PROMPT, "last_assistant_message": ANSWER}  # fmt: skip
    ran = await run(
        [sys.executable, "-c", code, "hooks", "run", "codex", *flags(harness)],
        env=base_env(home), cwd=project, stdin=json.dumps(stop).encode(),
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "")
    loaded = ast.literal_eval(ran.stderr.strip().splitlines()[-1])
    assert {m.split(".")[1] for m in loaded if m.count(".")} <= {
        "agent_hooks",
        "cli",
        "gen",
        "session_names",
    }, loaded
    [episode] = await episodes_of(harness, stop["session_id"])
    assert episode.user_message == PROMPT


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client one."""
    openssl_or_skip()
    return ca_server_and_client(tmp_path_factory.mktemp("certs"))


async def test_a_hook_speaks_mtls_with_a_key_file(tmp_path, home, project, certs):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": "hooks-key-0000000002", "name": "dev",
                                          "users": "*"}]}))  # fmt: skip
    h = await start_harness(
        tmp_path / "data",
        tls_cert=str(certs / "server.pem"),
        tls_key=str(certs / "server.key"),
        tls_client_ca=str(certs / "ca.pem"),
        auth_keys_file=str(keys),
    )
    try:
        key_file = tmp_path / "key"
        key_file.write_text("hooks-key-0000000002\n")
        session = str(uuid.uuid4())
        stop = {"session_id": session, "cwd": str(project), "hook_event_name": "Stop",
                "prompt": PROMPT, "last_assistant_message": ANSWER}  # fmt: skip
        tls = ["--target", f"localhost:{h.target.rsplit(':', 1)[1]}", "--cacert",
               str(certs / "ca.pem"), "--api-key-file", str(key_file)]  # fmt: skip
        without_client_cert = await hook("claude-code", stop, env=base_env(home), cwd=project,
                                         flags=tls)  # fmt: skip
        assert without_client_cert.returncode == 0
        assert "UNAVAILABLE" in without_client_cert.stderr
        mtls = [*tls, "--cert", str(certs / "client.pem"), "--key", str(certs / "client.key")]
        ran = await hook("claude-code", stop, env=base_env(home), cwd=project, flags=mtls)
        assert (ran.returncode, ran.stderr) == (0, "")
    finally:
        await h.close()
