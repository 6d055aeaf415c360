"""What comes back as context: at a session's start, and with each prompt.

- Session start: the project's and the user's most important memories, read
  with the scope the session has (``ListMemories``: PROJECT memories of the
  project, USER memories of ``--user``, the session's own task and session
  ones when it is resumed). Most important: longterm before the rest, then the
  most often selected (``use_count``), then the most confident, then the
  newest.
- A prompt: ``SelectMemories`` (the two passes, with the agent's session as
  the thread, so what it already used ranks lower and the usage is recorded)
  and the best matching exchanges of the project's other sessions
  (``SearchEpisodes``; the session's own are already in the model's context).
  Selection asks a model and may not answer within the deadline: a
  ``SearchMemories`` of the same prompt runs beside it, and its hits stand in
  when the selection fails or is late.

All calls of a prompt start at once and share the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from nexus_grpc.agent_hooks.context import Composed, compose, one_line
from nexus_grpc.agent_hooks.deadline import Deadline
from nexus_grpc.agent_hooks.wire import pb
from nexus_grpc.agent_hooks.workspace import GONE, Workspace

__all__ = ["Budgets", "at_prompt", "at_session_start"]

#: The server's limits (domain/validation.py): a search query, a selection prompt.
MAX_QUERY_CHARS = 2_000
MAX_PROMPT_CHARS = 10_000
MEMORY_CHARS = 600
USER_CHARS = 400
ANSWER_CHARS = 600
SELECTED = 8
EXCHANGES = 5
#: Part of the deadline kept back to answer the host after the calls.
ANSWER_MARGIN = 0.05
#: The share of what is left that selection may take: the rest is for using
#: the memory search's hits instead when it is late.
SELECTION_SHARE = 0.75


@dataclass(frozen=True)
class Budgets:
    """Tokens of context a hook may add (``--session-tokens``, ``--prompt-tokens``)."""

    session_start: int = 1000
    prompt: int = 600


def _memory_line(memory: Any) -> str:
    who = "user" if memory.kind == pb.MEMORY_KIND_USER else "project"
    title, content = memory.title.strip(), memory.content.strip()
    text = content if not title or content.startswith(title) else f"{title}: {content}"
    return f"({who}) {one_line(text or title, MEMORY_CHARS)}"


def _importance(memory: Any) -> tuple[Any, ...]:
    longterm = memory.tier == pb.TIER_LONGTERM
    updated = memory.update_time.seconds or memory.create_time.seconds
    return (not longterm, -memory.use_count, -memory.confidence, -updated)


def _scope(project_id: int, user: str, session: Any | None) -> Any:
    return pb.MemoryScope(
        project_id=project_id, user_id=user, session_id=session.id if session else 0
    )


def at_session_start(ws: Workspace, agent_session: str, budgets: Budgets) -> Composed:
    project_id = ws.project_id(create=False)
    if not project_id:
        return compose(ws.project, [], [], budgets.session_start)
    session = ws.find_session(agent_session)
    memories: list[Any] = []
    token = ""
    while True:
        page = _forgetting(
            ws,
            lambda token=token: ws.wire.call(
                "ListMemories",
                pb.ListMemoriesRequest(
                    scope=_scope(project_id, ws.user, session),
                    page_size=1000,
                    page_token=token,
                ),
                _for_call(ws.deadline),
            ),
        )
        memories += page.memories
        token = page.next_page_token
        if not token:
            break
    memories.sort(key=_importance)
    return compose(
        ws.project,
        [_memory_line(m) for m in memories],
        [],
        budgets.session_start,
        memories_title="What this project and user have in memory, most important first:",
    )


def at_prompt(ws: Workspace, agent_session: str, prompt: str, budgets: Budgets) -> Composed:
    project_id = ws.project_id(create=False)
    if not project_id or not prompt.strip():
        return compose(ws.project, [], [], budgets.prompt)
    session = ws.find_session(agent_session)
    scope = _scope(project_id, ws.user, session)
    left = _for_call(ws.deadline)
    selection = ws.wire.stream(
        "SelectMemories",
        pb.SelectMemoriesRequest(
            prompt=prompt[:MAX_PROMPT_CHARS],
            scope=scope,
            thread_id=ws.external_id(agent_session),
            limit=SELECTED,
        ),
        left * SELECTION_SHARE,
    )
    query = prompt[:MAX_QUERY_CHARS]
    memory_search = ws.wire.stream(
        "SearchMemories", pb.SearchMemoriesRequest(query=query, scope=scope, limit=SELECTED), left
    )
    exchanges = ws.wire.stream(
        "SearchEpisodes",
        pb.SearchEpisodesRequest(query=query, project_id=project_id, limit=EXCHANGES * 2),
        left,
    )
    failures: list[grpc.RpcError] = []
    selected = _collect(selection, failures)
    if selected is not None:
        memory_search.cancel()
        memories = [s.memory for s in selected]
    else:
        memories = [h.memory for h in _collect(memory_search, failures) or []]
    found = _collect(exchanges, failures)
    if any(f.code() in GONE for f in failures):
        ws.forget_project()
    if len(failures) == 3:
        raise failures[-1]  # nothing answered: say why, once
    own = session.id if session else 0
    hits = [h for h in found or [] if h.episode.session_id != own]
    return compose(
        ws.project,
        [_memory_line(m) for m in memories],
        [_exchange_line(h.episode) for h in hits[:EXCHANGES]],
        budgets.prompt,
        memories_title="Memories that may bear on this prompt:",
        exchanges_title="Earlier exchanges in this project like this prompt:",
    )


def _exchange_line(episode: Any) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(episode.occur_time.seconds))
    said = one_line(episode.user_message, USER_CHARS)
    answered = one_line(episode.ai_response, ANSWER_CHARS)
    return f"{when}: the user said \u201c{said}\u201d; the answer was \u201c{answered}\u201d"


def _for_call(deadline: Deadline) -> float:
    return max(deadline.left() - ANSWER_MARGIN, 0.01)


def _collect(stream: Iterable[Any], failures: list[grpc.RpcError]) -> list[Any] | None:
    """A stream's answers; None when it failed, which ``failures`` then holds (one
    call's failure is not the hook's: the others may still bring something)."""
    try:
        return list(stream)
    except grpc.RpcError as exc:
        failures.append(exc)
        return None


def _forgetting(ws: Workspace, call: Any) -> Any:
    """``call()``; a project that is gone is forgotten before the error goes on."""
    try:
        return call()
    except grpc.RpcError as exc:
        if exc.code() in GONE:
            ws.forget_project()
        raise
