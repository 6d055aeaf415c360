"""Guards found by a mutation audit of the unit tier: rules of the agent
hooks (agent_hooks/context.py, agent_hooks/recall.py, agent_hooks/capture.py,
agent_hooks/project_cache.py) that no unit test held.

The rest are tests/unit/test_hooks_*.py's."""

from __future__ import annotations

import json

from nexus_grpc.agent_hooks import capture, recall
from nexus_grpc.agent_hooks.context import _fill, estimate_tokens
from nexus_grpc.agent_hooks.deadline import Deadline
from nexus_grpc.agent_hooks.project_cache import ProjectCache
from nexus_grpc.agent_hooks.wire import pb


def test_an_item_that_fills_the_budget_exactly_is_taken():
    item = "the staging database listens on port 5433"
    cost = estimate_tokens(item) + 1  # its line's own break
    assert _fill([item], cost, 0) == ([item], cost)
    assert _fill([item], cost - 1, 0) == ([], 0)


def test_a_message_one_character_past_the_limit_is_cut_to_the_limit_with_a_note():
    assert capture._cut("x" * capture.MAX_MESSAGE_CHARS) == "x" * capture.MAX_MESSAGE_CHARS
    cut = capture._cut("x" * (capture.MAX_MESSAGE_CHARS + 1))
    assert len(cut) == capture.MAX_MESSAGE_CHARS
    assert cut.endswith(f"characters cut by {capture.SOURCE}]")


def test_a_remembered_id_that_is_not_a_positive_whole_number_is_not_used(tmp_path):
    """The cache is a file a person may edit: a 0, negative or text id reads
    as not remembered (the next run looks the project up again)."""
    path = tmp_path / "projects.json"
    path.write_text(json.dumps({"t|-|zero": 0, "t|-|neg": -3, "t|-|text": "7", "t|-|ok": 7}))
    cache = ProjectCache(path, target="t", api_key="")
    assert [cache.get(name) for name in ("zero", "neg", "text", "ok")] == [None, None, None, 7]


class _Answers(list):
    """A server-streaming call's answers, as the hook's wire hands them over."""

    def cancel(self) -> None:
        pass


class _Workspace:
    """What ``at_prompt`` asks of the hook's workspace: the project, the
    agent's session on the server, and the wire's streams (scripted)."""

    project, user = "atlas", "ann"

    def __init__(self, session_id: int, exchanges: list[pb.SearchHit]) -> None:
        self.session = pb.Session(id=session_id)
        self.exchanges = exchanges
        self.deadline = Deadline(5.0)

    def project_id(self, *, create: bool) -> int:
        return 7

    def find_session(self, agent_session: str) -> pb.Session:
        return self.session

    def external_id(self, agent_session: str) -> str:
        return agent_session

    def forget_project(self) -> None:
        pass

    @property
    def wire(self) -> _Workspace:
        return self

    def stream(self, method: str, request: object, timeout: float) -> _Answers:
        return _Answers(self.exchanges if method == "SearchEpisodes" else [])


def _hit(session_id: int, said: str) -> pb.SearchHit:
    return pb.SearchHit(episode=pb.Episode(session_id=session_id, user_message=said))


def test_the_prompts_context_leaves_out_the_exchanges_of_the_agents_own_session():
    """The agent has its own session's turns already: only other sessions'
    exchanges are worth the budget."""
    ws = _Workspace(3, [_hit(3, "said in this session"), _hit(4, "said in another")])
    composed = recall.at_prompt(ws, "agent-1", "where does staging listen?", recall.Budgets())  # type: ignore[arg-type]
    assert "said in another" in composed.text
    assert "said in this session" not in composed.text
