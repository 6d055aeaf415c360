"""What a summary pass decides once a model is asked (domain/summaries.py), on
the fakes of tests/fakes.py with a scripted in-process model (``Scripted``
below, an ``LLMClient`` whose answers are set by each test: no HTTP, no
stand-in): a session's cumulative summary and its rollover past the size cap,
passes that fit the model's context, an exchange longer than the context
folded rather than cut, a project overview streamed then stored, its fallback
to recent exchanges, its input folded to fit, a cut answer never stored, and
the episode range a written summary may name.

What a client sees of them over gRPC (the status codes, the overview's stream,
the automatic job run by the worker, the stand-in's prompts over HTTP) is
tests/e2e/service/test_summaries.py's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from nexus_grpc.core import jobs
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.summaries import OverviewPart, Summaries
from nexus_grpc.errors import FailedPrecondition, NotFound, Unavailable
from nexus_grpc.llm import LLMClient, LLMUnavailable
from nexus_grpc.llm.client import ChatAnswer, StreamDelta
from nexus_grpc.llm.tokens import estimate_messages, estimate_tokens
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.seeding import episode, project_session

MODEL = "qwen2.5:3b"
SESSION_PROMPT = "You summarise a conversation"
OVERVIEW_PROMPT = "You write a project overview"
FOLD_PROMPT = "You condense part of a project's history"


@dataclass
class Sent:
    """One request the model was sent."""

    messages: Sequence[Mapping[str, Any]]
    temperature: float
    num_predict: int
    num_ctx: int

    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)

    @property
    def truncated(self) -> bool:
        """The prompt would not fit the context asked for (a server cuts it)."""
        return estimate_messages(self.messages) > self.num_ctx


@dataclass
class Rule:
    contains: str
    answer: str | tuple[str, ...] | Exception
    times: int | None = None


class Scripted(LLMClient):
    """A model in the test's process: the first rule whose text the prompt
    contains answers (a rule with ``times`` is spent after that many), else
    ``default``; a tuple is streamed piece by piece. An answer longer than
    ``num_predict`` tokens is cut and ends "length", as a server's would."""

    def __init__(self) -> None:
        super().__init__("scripted://model", timeout=30.0)
        self.context = 32768
        self.default = "ok"
        self.rules: list[Rule] = []
        self.sent: list[Sent] = []

    def add_rule(self, answer, contains: str, times: int | None = None) -> None:
        self.rules.append(Rule(contains, answer, times))

    def prompts(self, marker: str) -> list[Sent]:
        return [s for s in self.sent if marker in s.prompt_text()]

    def _answer(self, messages, temperature, num_predict, num_ctx) -> str | tuple[str, ...]:
        sent = Sent(messages, temperature, num_predict, num_ctx)
        self.sent.append(sent)
        for rule in self.rules:
            if rule.contains in sent.prompt_text() and rule.times != 0:
                if rule.times is not None:
                    rule.times -= 1
                if isinstance(rule.answer, Exception):
                    raise rule.answer
                return rule.answer
        return self.default

    @staticmethod
    def _cut(text: str, num_predict: int) -> tuple[str, str]:
        if estimate_tokens(text) > num_predict:
            return text.encode()[:num_predict].decode(errors="ignore"), "length"
        return text, "stop"

    async def close(self) -> None:
        return None

    async def _fetch_context_length(self, model: str) -> int | None:
        return self.context

    async def _chat(self, model, messages, temperature, num_predict, num_ctx, schema):
        answer = self._answer(messages, temperature, num_predict, num_ctx)
        text, reason = self._cut("".join(answer), num_predict)
        return ChatAnswer(text, reason)

    async def _stream(  # type: ignore[override]
        self, model, messages, temperature, num_predict, num_ctx
    ) -> AsyncIterator[StreamDelta]:
        answer = self._answer(messages, temperature, num_predict, num_ctx)
        pieces = (answer,) if isinstance(answer, str) else answer
        text, reason = self._cut("".join(pieces), num_predict)
        left = len(text)
        for piece in pieces:
            if left <= 0:
                break
            yield StreamDelta(piece[:left])
            left -= len(piece)
        yield StreamDelta("", done_reason=reason)

    async def _list_models(self) -> list[str]:
        return [MODEL]

    def _map_error(self, exc, model, limit):
        return exc if isinstance(exc, LLMUnavailable) else LLMUnavailable(str(exc))


@pytest.fixture
def uow() -> FakeUnitOfWork:
    return FakeUnitOfWork()


@pytest.fixture
def model() -> Scripted:
    return Scripted()


@pytest.fixture
def summaries(uow: FakeUnitOfWork, model: Scripted) -> Summaries:
    return Summaries(FakeDatabase(uow), JobSignals(), model, MODEL)


async def refused(error: type[Exception], call) -> str:
    with pytest.raises(error) as err:
        await call
    return str(err.value)


async def overview(summaries: Summaries, project_id: int) -> list[OverviewPart]:
    return [part async for part in summaries.summarize_project(project_id)]


# A session's summaries ---------------------------------------------------------


async def test_a_first_summary_covers_every_episode_and_nothing_new_asks_no_model(
    uow, model, summaries
):
    _, sid = project_session(uow)
    e1 = episode(uow, sid, "apples?", "red")
    episode(uow, sid, "pears?", "green")
    model.add_rule("<think>hmm</think>Fruit talk.", SESSION_PROMPT, times=1)
    first = await summaries.summarize_session(sid)
    assert (first.content, first.first_episode_id, first.episode_count) == ("Fruit talk.", e1.id, 2)
    [sent] = model.prompts(SESSION_PROMPT)
    assert (sent.temperature, sent.num_predict) == (0.2, 500)
    # Nothing new: the latest summary comes back unchanged, no model call.
    again = await summaries.summarize_session(sid)
    assert again.id == first.id and len(model.prompts(SESSION_PROMPT)) == 1
    assert sorted(uow.summaries.rows) == [first.id]


async def test_a_summary_under_its_cap_is_rewritten_with_what_came_since(uow, model, summaries):
    _, sid = project_session(uow)
    episode(uow, sid, "apples?", "red")
    episode(uow, sid, "pears?", "green")
    model.add_rule("Fruit talk.", SESSION_PROMPT, times=1)
    first = await summaries.summarize_session(sid)
    e3 = episode(uow, sid, "plums?", "purple")
    model.add_rule("Fruit talk, plums too.", SESSION_PROMPT, times=1)
    second = await summaries.summarize_session(sid)
    assert second.id == first.id  # updated in place
    assert (second.content, second.last_episode_id, second.episode_count) == (
        "Fruit talk, plums too.",
        e3.id,
        3,
    )
    text = model.prompts(SESSION_PROMPT)[-1].prompt_text()
    assert "Fruit talk." in text and "plums?" in text and "apples?" not in text


async def test_a_summary_past_its_cap_is_left_and_a_new_one_starts(uow, model, summaries):
    _, sid = project_session(uow)
    episode(uow, sid, "apples?", "red")
    model.add_rule("Fruit talk.", SESSION_PROMPT, times=1)
    first = await summaries.summarize_session(sid)
    summaries.size_cap = 10  # the latest is now over its cap
    e4 = episode(uow, sid, "kiwis?", "brown")
    model.add_rule("Kiwis.", SESSION_PROMPT, times=1)
    third = await summaries.summarize_session(sid)
    assert third.id != first.id
    assert (third.first_episode_id, third.last_episode_id, third.episode_count) == (e4.id, e4.id, 1)
    assert "Fruit talk" not in model.prompts(SESSION_PROMPT)[-1].prompt_text()
    listed = await summaries.list(sid, 0, 0, "")
    assert [x.id for x in listed.items] == [first.id, third.id]
    assert uow.summaries.rows[first.id].content == "Fruit talk."


async def test_summarizing_nothing_an_unknown_session_or_a_failed_model_stores_nothing(
    uow, model, summaries
):
    _, sid = project_session(uow)
    assert f"session {sid} has no episodes to summarize" in await refused(
        FailedPrecondition, summaries.summarize_session(sid)
    )
    await refused(NotFound, summaries.summarize_session(999))
    episode(uow, sid)
    model.add_rule(LLMUnavailable("runner died"), SESSION_PROMPT)
    assert "the summary model failed" in await refused(
        Unavailable, summaries.summarize_session(sid)
    )
    assert uow.summaries.rows == {}


async def test_a_long_session_is_summarized_in_passes_that_fit_the_prompt(uow, model, summaries):
    model.default = "a summary so far"
    # An 8,192-token model: room for one 5,000-character episode per pass, not two.
    model.context = 8192
    _, sid = project_session(uow)
    eps = [episode(uow, sid, user="x" * 5000, ai="ok") for _ in range(3)]
    first = await summaries.summarize_session(sid)
    assert (first.first_episode_id, first.last_episode_id) == (eps[0].id, eps[0].id)
    sent = model.prompts(SESSION_PROMPT)
    assert sent and all(not s.truncated and s.num_ctx == 8192 for s in sent)
    # The rest is queued as a further pass, which the job runs.
    assert uow.jobs.pending_job(jobs.SUMMARIZE_SESSION, sid) is not None
    await summaries.run_session_summary(sid)
    await summaries.run_session_summary(sid)
    rows = (await summaries.list(sid, 0, 0, "")).items
    assert max(r.last_episode_id for r in rows) == eps[-1].id
    assert all(not s.truncated for s in model.prompts(SESSION_PROMPT))


async def test_an_episode_longer_than_the_context_is_folded_not_cut(uow, model, summaries):
    model.context = 4096
    model.add_rule("Part one: the user likes roses.", "Conversation:\nUser: FIRST-FACT", times=1)
    model.default = "The user likes roses and tulips."
    _, sid = project_session(uow)
    ep = episode(uow, sid, user="FIRST-FACT " + "roses " * 1200 + "LAST-FACT tulips", ai="ok")
    summary = await summaries.summarize_session(sid)
    assert summary.content == "The user likes roses and tulips."
    assert (summary.first_episode_id, summary.last_episode_id) == (ep.id, ep.id)
    sent = model.prompts(SESSION_PROMPT)
    assert len(sent) >= 2  # folded in several calls...
    assert all(not s.truncated for s in sent)  # ...none of them cut
    assert "FIRST-FACT" in sent[0].prompt_text() and "LAST-FACT" in sent[-1].prompt_text()
    # Each later part is folded into the summary so far.
    assert "Part one: the user likes roses." in sent[1].prompt_text()


# Project overviews -------------------------------------------------------------


async def test_an_overview_streams_its_text_then_the_stored_row(uow, model, summaries):
    pid, sid = project_session(uow, "Garden")
    eps = [episode(uow, sid, f"rose {i}") for i in range(4)]
    await summaries.create(
        sid,
        0,
        "Session about roses.",
        {"first_episode_id": eps[0].id, "last_episode_id": eps[3].id, "episode_count": 4},
    )
    model.add_rule(
        ("<think>plan", " it</think>", "Roses ", "and ", "<|im_end|>", "soil."),
        OVERVIEW_PROMPT,
        times=1,
    )
    parts = await overview(summaries, pid)
    deltas = [p.text for p in parts if p.summary is None]
    assert len(deltas) >= 2 and "".join(deltas) == "Roses and soil."
    last = parts[-1].summary
    assert last is not None and parts[-1].text == ""
    assert last.content == "Roses and soil." and last.session_id == 0
    assert last.project_id == pid and last.episode_count == 4
    assert parts[-1].passes == 1  # it fitted whole
    [sent] = model.prompts(OVERVIEW_PROMPT)
    assert (sent.temperature, sent.num_predict) == (0.2, 1200)
    assert "Session summaries" in sent.prompt_text()
    assert "Session about roses." in sent.prompt_text()
    assert (await summaries.get_overview(pid)).id == last.id
    # A second run updates the same overview row.
    model.add_rule("Updated.", OVERVIEW_PROMPT)
    again = (await overview(summaries, pid))[-1].summary
    assert again is not None and (again.id, again.content) == (last.id, "Updated.")


async def test_an_overview_without_summaries_reads_the_recent_episodes_truncated(
    uow, model, summaries
):
    pid, sid = project_session(uow, "Big")
    summaries.overview_episode_limit = 30
    model.add_rule("Overview.", OVERVIEW_PROMPT)
    eps = [episode(uow, sid, f"question {i:03d} " + "x" * 300, "answer") for i in range(40)]
    parts = await overview(summaries, pid)
    made = parts[-1].summary
    assert made is not None and made.content == "Overview."
    text = model.prompts(OVERVIEW_PROMPT)[0].prompt_text()
    assert "Conversation excerpts" in text
    assert "question 039" in text  # the most recent is kept
    assert "question 009" not in text  # beyond the episode limit
    assert "question 010" not in text  # cut by the 8,000-character truncation
    material = text.split("most recent last):\n", 1)[1].rsplit("\n\nWrite the overview", 1)[0]
    assert len(material) <= 8000
    assert made.last_episode_id == eps[-1].id
    assert made.first_episode_id == eps[10].id


async def test_an_overview_past_the_context_is_folded_and_says_how_often(uow, model, summaries):
    # A 4,096-token model: the 8,000 characters of summaries do not fit with
    # 1,200 answer tokens; whole, as a real server would cut them, not at all.
    model.context = 4096
    pid, sid = project_session(uow, "Garden")
    for i in range(4):
        e = episode(uow, sid, f"rose {i}")
        await summaries.create(
            sid,
            0,
            f"SESSION-{i} " + "roses " * 300,
            {"first_episode_id": e.id, "last_episode_id": e.id, "episode_count": 1},
        )
    model.add_rule("Condensed: roses.", FOLD_PROMPT)
    model.add_rule("An overview of roses.", OVERVIEW_PROMPT)
    parts = await overview(summaries, pid)
    folds, final = model.prompts(FOLD_PROMPT), model.prompts(OVERVIEW_PROMPT)
    assert len(folds) >= 2 and len(final) == 1
    made = parts[-1].summary
    assert made is not None and made.content == "An overview of roses."
    assert parts[-1].passes == len(folds) + 1
    assert all(not s.truncated for s in folds + final)
    # Oldest first, every session's summary in some part, none cut mid-way.
    folded = "".join(s.prompt_text() for s in folds)
    assert all(f"SESSION-{i}" in folded for i in range(1, 4))
    assert final[0].prompt_text().count("Condensed: roses.") == len(folds)


async def test_a_cut_summary_or_overview_is_never_stored(uow, model, summaries):
    pid, sid = project_session(uow, "Garden")
    episode(uow, sid, "I set up Grafana dashboards and Prometheus alerts.")
    model.default = "The user set up Grafana dashboards and " + "more " * 2000
    await refused(Unavailable, summaries.summarize_session(sid))
    assert uow.summaries.rows == {}
    # Retried once with twice the room, then refused: not stored mid-sentence.
    assert [s.num_predict for s in model.prompts(SESSION_PROMPT)] == [500, 1000]
    message = await refused(Unavailable, overview(summaries, pid))
    assert "cut off and not stored" in message
    assert await summaries.get_overview(pid) is None and uow.summaries.rows == {}
    # The positive case: an answer that ends on its own is stored.
    model.default = "The user set up Grafana dashboards."
    done = await summaries.summarize_session(sid)
    assert done.content == "The user set up Grafana dashboards."
    assert list(uow.summaries.rows) == [done.id]


# A written summary's range -----------------------------------------------------


async def test_a_summary_range_names_episodes_of_its_own_scope(uow, summaries):
    """Found by tests/e2e/api/test_fuzz_rpcs.py: a range naming an episode that never
    existed was stored, and the summarizer, which resumes after the latest
    summary's last_episode_id, would then skip every episode up to it."""
    pid, sid = project_session(uow)
    _, other_sid = project_session(uow, "other")
    mine, theirs = episode(uow, sid), episode(uow, other_sid)
    for session_id, project_id, first, last, says in (
        (sid, 0, 0, theirs.id + 100, f"summary.last_episode_id {theirs.id + 100} does not exist"),
        (sid, 0, mine.id, theirs.id, f"is not an episode of session {sid}"),
        (sid, 0, theirs.id, 0, f"summary.first_episode_id {theirs.id} is not an episode"),
        (0, pid, 0, theirs.id, f"is not an episode of project {pid}"),
    ):
        values = {"first_episode_id": first, "last_episode_id": last}
        message = await refused(
            FailedPrecondition, summaries.create(session_id, project_id, "c", values)
        )
        assert "episode" in message and says in message, message
    assert uow.summaries.rows == {}
    ok = await summaries.create(
        0, pid, "c", {"first_episode_id": mine.id, "last_episode_id": mine.id}
    )
    assert (ok.project_id, ok.last_episode_id) == (pid, mine.id)
