"""The stop event: the exchange becomes an episode of the agent's session.

The prompt and the answer come from the event where the host sends them and
from the end of its transcript otherwise (``transcripts.py``). The episode's
``request_id`` is the prompt's id, so a stop that runs again (a retried hook,
a host that fires it twice) stores nothing twice: the server answers the
first episode. Every field of the request is a function of the exchange, as
a replay must be the same request (AIP-155). Once stored, the server indexes
it, extracts its entities and, in a project that forms memories, forms the
user's memories from it, as for any other episode.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import grpc

from nexus_grpc.agent_hooks.payloads import HookInput
from nexus_grpc.agent_hooks.transcripts import Turn, last_turn
from nexus_grpc.agent_hooks.wire import pb
from nexus_grpc.agent_hooks.workspace import GONE, SOURCE, Workspace

__all__ = ["Recorded", "exchange_of", "record"]

#: The server's limit on each side of an episode (domain/validation.py).
MAX_MESSAGE_CHARS = 100_000
MAX_ID_CHARS = 200


class NothingToRecord(Exception):
    """The stop came without a prompt or an answer to store."""


@dataclass(frozen=True)
class Recorded:
    #: 0 when the prompt's id was already stored with other words.
    episode_id: int
    session_id: int


def _cut(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    note = f"\n[… {len(text) - MAX_MESSAGE_CHARS + 40} characters cut by {SOURCE}]"
    return text[: MAX_MESSAGE_CHARS - len(note)] + note


def exchange_of(host: str, event: HookInput) -> Turn:
    """The prompt, its id and the answer of the turn that just stopped."""
    turn = Turn()
    needs_transcript = not (event.prompt and event.prompt_id and event.response)
    if needs_transcript and event.transcript_path:
        try:
            turn = last_turn(
                host, event.transcript_path, turn_id=event.prompt_id, prompt=event.prompt
            )
        except OSError:
            turn = Turn()
    prompt = event.prompt or turn.prompt
    response = event.response or turn.response
    prompt_id = event.prompt_id or turn.prompt_id
    if not prompt_id:
        # No id anywhere: the exchange's own words stand in, so the same stop
        # run again is still the same request.
        digest = hashlib.sha256(f"{prompt}\x00{response}".encode()).hexdigest()[:32]
        prompt_id = f"sha256:{digest}"
    return Turn(prompt, prompt_id, response)


def record(ws: Workspace, host: str, event: HookInput) -> Recorded:
    turn = exchange_of(host, event)
    if not turn.prompt.strip() or not turn.response.strip():
        raise NothingToRecord(
            f"{event.event_name} of session {event.session_id} has no"
            f" {'prompt' if not turn.prompt.strip() else 'answer'} to record"
        )
    project_id = ws.project_id(create=True)
    try:
        session = ws.open_session(event.session_id, project_id)
    except grpc.RpcError as exc:
        if exc.code() in GONE:
            ws.forget_project()
        raise
    if session.project_id != project_id:
        where = f"project {session.project_id}" if session.project_id else "no project"
        raise ValueError(
            f"agent session {event.session_id} is nexus session {session.id}, which belongs to"
            f" {where}, not to project {ws.project!r} ({project_id}); nothing recorded"
        )
    request = pb.CreateEpisodeRequest(
        session_id=session.id,
        user_message=_cut(turn.prompt),
        ai_response=_cut(turn.response),
        request_id=f"{host}:{turn.prompt_id}"[:MAX_ID_CHARS],
        project_id=project_id,
    )
    request.metadata.update({"source": SOURCE, "host": host, "prompt_id": turn.prompt_id})
    try:
        episode = ws.wire.call("CreateEpisode", request, ws.deadline.left())
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
        # The prompt's id was stored with other words (the host rewrote its
        # answer): the first recording stands.
        return Recorded(0, session.id)
    return Recorded(episode.id, session.id)
