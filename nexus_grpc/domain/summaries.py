"""Session summaries and project overviews (seeds 001 and 002).

Session summaries: the first one covers every episode of the session; while
the latest is under ``SUMMARY_SIZE_CAP`` characters it is rewritten
cumulatively (old summary + the episodes since); past the cap a new row
starts with the episodes since.  Each row records the episode range it
covers (first/last id, count).  The same code serves the SummarizeSession
RPC and the automatic ``summarize:session`` job.

Project overviews are built from the project's session summaries, or, when
there are none, from its most recent raw episodes (``overview_episode_limit``);
the prompt input is cut to its most recent 8,000 characters.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nexus_grpc.core import jobs, llm_usage, tenancy
from nexus_grpc.core.models import Episode, Page, Project, episode_text
from nexus_grpc.core.records import Summary
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import accounting, paging
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.accounting import accounted
from nexus_grpc.domain.budgets import Budgets
from nexus_grpc.domain.session_rights import require_may_write
from nexus_grpc.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from nexus_grpc.llm import (
    LLMBadOutput,
    LLMClient,
    LLMCutOff,
    LLMError,
    LLMInputTooLong,
    clean_stream,
    strip_model_tokens,
    tokens,
)
from nexus_grpc.llm import summary_prompts as prompts

log = logging.getLogger(__name__)
SUMMARY_SIZE_CAP = 2000
OVERVIEW_EPISODE_LIMIT = 200
# One summary pass reads at most this many episodes, and as many as fit the
# model's context in tokens (llm/tokens.py), so the prompt is never cut
# silently; what is left is queued as the next pass.
MAX_EPISODES_PER_PASS = 500
UPDATE_FIELDS = ("content",)


class NothingToSummarize(Exception):
    """The session has no episode the summaries do not already cover."""


@dataclass(frozen=True)
class OverviewPart:
    """One item of SummarizeProject's stream: a text delta, or the stored row."""

    text: str = ""
    summary: Summary | None = None
    # With the summary: model calls that made it (1, or more when folded).
    passes: int = 0


class Summaries:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        llm: LLMClient | None,
        model: str,
        *,
        size_cap: int = SUMMARY_SIZE_CAP,
        overview_episode_limit: int = OVERVIEW_EPISODE_LIMIT,
        budgets: Budgets | None = None,
    ) -> None:
        self.db = db
        self.budgets = budgets or Budgets(db)
        self.signals = signals
        self.llm = llm
        self.model = model
        self.size_cap = size_cap
        self.overview_episode_limit = overview_episode_limit
        # One summarization at a time per session (the RPC and the job).
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    # CRUD -------------------------------------------------------------------

    async def create(
        self, session_id: int, project_id: int, content: str, values: Mapping[str, int]
    ) -> Summary:
        v.positive_id("summary.session_id", session_id, required=False)
        v.positive_id("summary.project_id", project_id, required=False)
        v.text("summary.content", content, limit=v.MAX_MESSAGE_CHARS, required=True)
        if not session_id and not project_id:
            raise InvalidArgument(
                "summary needs a session_id or a project_id",
                fields=("summary.session_id", "summary.project_id"),
            )
        first = v.positive_id(
            "summary.first_episode_id", values.get("first_episode_id", 0), required=False
        )
        last = v.positive_id(
            "summary.last_episode_id", values.get("last_episode_id", 0), required=False
        )
        count = v.count("summary.episode_count", values.get("episode_count", 0))
        if first and last and first > last:
            raise InvalidArgument(
                f"summary.first_episode_id {first} is after summary.last_episode_id {last}",
                fields=("summary.first_episode_id", "summary.last_episode_id"),
            )

        tenant = tenancy.visible()
        at = time.time()  # a session past its project's retention is gone

        def write(uow: UnitOfWork) -> Summary:
            if session_id:
                session = _session(uow, session_id, "summary.session_id", tenant, at)
                require_may_write(session, "summarize")
                if project_id and session.project_id != project_id:
                    raise InvalidArgument(
                        f"session {session_id} is not in project {project_id}; give one or the"
                        " other (a session summary belongs to its session's project)",
                        fields=("summary.session_id", "summary.project_id"),
                    )
            elif not uow.projects.exists(project_id, tenant):
                raise FailedPrecondition(f"summary.project_id {project_id} does not exist")
            _check_range(uow, session_id, project_id, first, last, at)
            return indexed(
                uow,
                uow.summaries.insert(
                    session_id=session_id,
                    project_id=project_id,
                    content=content,
                    first_episode_id=first,
                    last_episode_id=last,
                    episode_count=count,
                ),
            )

        summary = await self.db.write(write)
        self.signals.wake(jobs.INDEX_SUMMARY)
        return summary

    async def get(self, summary_id: int) -> Summary:
        v.positive_id("id", summary_id)
        tenant = tenancy.visible()
        at = time.time()  # a summary past its project's retention is gone
        return await self.db.read(lambda c: c.summaries.get(summary_id, tenant, retained_at=at))

    async def update(self, summary_id: int, content: str, mask: list[str]) -> Summary:
        v.positive_id("summary.id", summary_id)
        v.update_mask(mask, UPDATE_FIELDS)
        v.text("summary.content", content, limit=v.MAX_MESSAGE_CHARS, required=True)
        tenant = tenancy.visible()
        at = time.time()

        def write(uow: UnitOfWork) -> Summary:
            _check_session_of(uow, uow.summaries.get(summary_id, tenant, retained_at=at))
            return indexed(uow, uow.summaries.update(summary_id, {"content": content}))

        summary = await self.db.write(write)
        self.signals.wake(jobs.INDEX_SUMMARY)
        return summary

    async def delete(self, summary_id: int) -> None:
        v.positive_id("id", summary_id)
        tenant = tenancy.visible()
        at = time.time()

        def delete(uow: UnitOfWork) -> None:
            _check_session_of(uow, uow.summaries.get(summary_id, tenant, retained_at=at))
            unindex(uow, summary_id)
            uow.summaries.delete(summary_id)

        await self.db.write(delete)
        self.signals.wake(jobs.INDEX_SUMMARY)

    async def list(
        self, session_id: int, project_id: int, page_size: int, page_token: str
    ) -> Page[Summary]:
        v.positive_id("session_id", session_id, required=False)
        v.positive_id("project_id", project_id, required=False)
        size = paging.page_size(page_size)
        after = paging.decode_token(page_token)

        tenant = tenancy.visible()
        at = time.time()  # what is past the project's retention is gone

        def read(uow: UnitOfWork) -> list[Summary]:
            if session_id:
                uow.sessions.get(session_id, tenant, retained_at=at)
                return uow.summaries.list_for_session(session_id, after, size + 1, retained_at=at)
            if project_id:
                if not uow.projects.exists(project_id, tenant):
                    raise NotFound(
                        f"project {project_id} does not exist",
                        resource_type="project",
                        resource_name=project_id,
                    )
                return uow.summaries.list_for_project(project_id, after, size + 1, retained_at=at)
            raise InvalidArgument(
                "session_id or project_id is required", fields=("session_id", "project_id")
            )

        rows = await self.db.read_in_transaction(read)
        return paging.page(rows, size)

    # Session summaries -------------------------------------------------------

    async def summarize_session(self, session_id: int) -> Summary:
        """The SummarizeSession RPC: summarize now, or return the latest summary
        when no episode is new.  FAILED_PRECONDITION for a session with no
        episodes; UNAVAILABLE without a reachable model."""
        v.positive_id("session_id", session_id)
        tenant = tenancy.visible()
        at = time.time()  # a session past its project's retention is gone
        session = await self.db.read(lambda c: c.sessions.get(session_id, tenant, retained_at=at))
        require_may_write(session, "summarize")
        if self.llm is None:
            raise Unavailable("summaries need Ollama, and none is configured (--ollama-url)")
        await self.budgets.require(
            session.tenant, f"summarizing session {session_id}", session.user_id
        )
        try:
            async with accounted(self.db, llm_usage.SUMMARY):
                return await self.run_session_summary(session_id)
        except NothingToSummarize:
            latest = await self.db.read(
                lambda c: c.summaries.latest_for_session(session_id, retained_at=at)
            )
            if latest is None:
                raise FailedPrecondition(
                    f"session {session_id} has no episodes to summarize"
                ) from None
            return latest
        except LLMError as exc:
            raise Unavailable(f"the summary model failed: {exc}") from exc

    async def run_session_summary(self, session_id: int) -> Summary:
        """Summarize the episodes not yet covered and store the result.

        Raises NothingToSummarize, NotFound (session gone) or an LLMError.
        Idempotent: a rerun after a crash finds the episodes already covered.
        """
        assert self.llm is not None
        async with self._locks[session_id]:
            session, latest, new = await self.db.read_in_transaction(
                lambda c: self._pending_episodes(c, session_id)
            )
            if not new:
                raise NothingToSummarize(session_id)
            llm_usage.attribute(session.project_id, session.tenant, session.user_id)
            cumulative = latest is not None and len(latest.content) < self.size_cap
            previous = latest.content if cumulative and latest is not None else None
            llm, num_predict = self.llm, prompts.SESSION_SUMMARY_OPTIONS["num_predict"]
            fixed = prompts.build_session_text_messages("", previous)
            budget = await llm.input_budget(self.model, fixed, num_predict)
            if budget <= 0:
                raise LLMInputTooLong(
                    f"{self.model}'s context has no room for new exchanges next to the summary"
                )
            this_pass = _within_budget(new, budget)
            more = len(this_pass) < len(new) or len(new) == MAX_EPISODES_PER_PASS
            new = this_pass
            body = _dated_body(new)
            text, calls = await self._fold(body, previous, new[0].id)
            if calls > 1:
                log.info(
                    "session %d: episode %d was longer than %s's context; folded in %d calls",
                    session_id,
                    new[0].id,
                    self.model,
                    calls,
                )

            # The calls are kept with the summary they made: a crash after
            # this commit reruns the job, which then finds nothing new.
            spent = accounting.pending()

            def write(uow: UnitOfWork) -> Summary:
                uow.usage.insert(spent)
                if more:
                    uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [session_id])
                if cumulative and latest is not None:
                    current = uow.summaries.find(latest.id)
                    if current is None or current.last_episode_id != latest.last_episode_id:
                        raise FailedPrecondition(
                            f"summary {latest.id} changed while it was being updated"
                        )
                    return uow.summaries.update(
                        latest.id,
                        {
                            "content": text,
                            "last_episode_id": new[-1].id,
                            "episode_count": latest.episode_count + len(new),
                        },
                    )
                return uow.summaries.insert(
                    session_id=session_id,
                    project_id=0,
                    content=text,
                    first_episode_id=new[0].id,
                    last_episode_id=new[-1].id,
                    episode_count=len(new),
                )

            summary = await self.db.write(lambda uow: indexed(uow, write(uow)))
            accounting.written(spent)
        self.signals.wake(jobs.INDEX_SUMMARY, jobs.SUMMARIZE_SESSION)
        return summary

    async def _fold(self, body: str, previous: str | None, first_id: int) -> tuple[str, int]:
        """``body`` summarized into ``previous`` (None: a first summary), and
        the calls it took. One exchange longer than the context is folded,
        never cut: its parts are summarized in order, each into the summary
        so far."""
        assert self.llm is not None
        llm, num_predict = self.llm, prompts.SESSION_SUMMARY_OPTIONS["num_predict"]
        text, calls = previous, 0
        while True:
            budget = await llm.input_budget(
                self.model, prompts.build_session_text_messages("", text), num_predict
            )
            if budget <= 0:
                raise LLMInputTooLong(
                    f"{self.model}'s context has no room to fold episode {first_id}"
                )
            head = tokens.split_to_budget(body, budget)[0]
            body = body[len(head) :]
            answer = await llm.chat_text(
                self.model,
                prompts.build_session_text_messages(head, text),
                **prompts.SESSION_SUMMARY_OPTIONS,
            )
            calls += 1
            if not answer:
                raise LLMBadOutput("the summary model answered with empty text")
            text = answer
            if not body.strip():
                break
        assert text is not None
        return text, calls

    @staticmethod
    def _pending_episodes(uow: UnitOfWork, session_id: int):
        # What is past the project's retention is neither summarized nor
        # built upon: a summary past it reads as none, its episodes as gone.
        at = time.time()
        session = uow.sessions.get(session_id, retained_at=at)
        latest = uow.summaries.latest_for_session(session_id, retained_at=at)
        after = latest.last_episode_id if latest else 0
        cutoff = uow.episodes.retention_cutoff(session_id, at)
        return (
            session,
            latest,
            uow.episodes.list_for_session(session_id, after, MAX_EPISODES_PER_PASS, since=cutoff),
        )

    # Project overviews -------------------------------------------------------

    async def get_overview(self, project_id: int) -> Summary | None:
        v.positive_id("project_id", project_id)
        tenant = tenancy.visible()
        at = time.time()  # an overview past the project's retention is gone

        def read(uow: UnitOfWork) -> Summary | None:
            if not uow.projects.exists(project_id, tenant):
                raise NotFound(
                    f"project {project_id} does not exist",
                    resource_type="project",
                    resource_name=project_id,
                )
            return uow.summaries.overview(project_id, retained_at=at)

        return await self.db.read_in_transaction(read)

    async def summarize_project(self, project_id: int) -> AsyncIterator[OverviewPart]:
        v.positive_id("project_id", project_id)

        tenant = tenancy.visible()
        at = time.time()

        def read(uow: UnitOfWork):
            # The overview is written from what the project keeps: nothing
            # past its retention (summaries or exchanges) goes into it.
            project = uow.projects.get(project_id, tenant)
            cutoff = None if project.retention is None else at - project.retention
            sums = uow.summaries.project_session_summaries(project_id, retained_at=at)
            eps = (
                []
                if sums
                else uow.summaries.project_recent_episodes(
                    project_id, self.overview_episode_limit, since=cutoff
                )
            )
            return project, sums, eps

        project, sums, eps = await self.db.read_in_transaction(read)
        if sums:
            sources = [s.content for s in sums]
        elif eps:
            sources = [episode_text(u, a) for _, u, a in eps]
        else:
            raise FailedPrecondition(
                f"project {project_id} has no session summaries and no episodes to summarize"
            )
        if self.llm is None:
            raise Unavailable(
                "project overviews need Ollama, and none is configured (--ollama-url)"
            )
        await self.budgets.require(project.tenant, f"the overview of project {project_id}")
        async with accounted(self.db, llm_usage.OVERVIEW):
            llm_usage.attribute(project.id, project.tenant)  # no user's work
            async for part in self._overview(self.llm, project, sums, eps, sources):
                yield part

    async def _overview(
        self,
        llm: LLMClient,
        project: Project,
        sums: Sequence[Summary],
        eps: Sequence[tuple[int, str, str]],
        sources: Sequence[str],
    ) -> AsyncIterator[OverviewPart]:
        project_id = project.id
        try:
            material, passes = await self._fold_overview_input(llm, project.name, sources)
            messages = prompts.build_project_overview_messages(
                project.name, sources, bool(sums), material=material
            )
        except LLMError as exc:
            raise Unavailable(f"the summary model failed: {exc}") from exc
        parts: list[str] = []
        try:
            async for delta in clean_stream(
                llm.chat_stream(self.model, messages, **prompts.PROJECT_OVERVIEW_OPTIONS)
            ):
                parts.append(delta)
                yield OverviewPart(text=delta)
        except LLMCutOff as exc:
            # The deltas were shown as they came; a cut overview is not stored.
            raise Unavailable(
                f"the overview was cut off and not stored: {exc}; a model with more room"
                " (or a shorter history) is needed"
            ) from exc
        except LLMError as exc:
            raise Unavailable(f"the summary model failed: {exc}") from exc
        text = strip_model_tokens("".join(parts))
        if not text:
            raise Unavailable("the summary model answered with an empty overview")
        if sums:
            first = min((s.first_episode_id for s in sums if s.first_episode_id), default=0)
            last = max(s.last_episode_id for s in sums)
            count = sum(s.episode_count for s in sums)
        else:
            first, last, count = eps[0][0], eps[-1][0], len(eps)

        calls = accounting.pending()

        def write(uow: UnitOfWork) -> Summary:
            uow.usage.insert(calls)
            existing = uow.summaries.overview(project_id)
            changes: dict[str, Any] = {
                "content": text,
                "first_episode_id": first,
                "last_episode_id": last,
                "episode_count": count,
            }
            if existing is not None:
                return indexed(uow, uow.summaries.update(existing.id, changes))
            if not uow.projects.exists(project_id):
                raise NotFound(
                    f"project {project_id} was deleted while being summarized",
                    resource_type="project",
                    resource_name=project_id,
                )
            return indexed(
                uow, uow.summaries.insert(session_id=0, project_id=project_id, **changes)
            )

        summary = await self.db.write(write)
        accounting.written(calls)
        self.signals.wake(jobs.INDEX_SUMMARY)
        yield OverviewPart(summary=summary, passes=passes + 1)

    async def _fold_overview_input(
        self, llm: LLMClient, project_name: str, sources: Sequence[str]
    ) -> tuple[str, int]:
        """The overview's input, and how many fold calls made it fit.

        Material longer than the model's context is condensed part by part
        (oldest first, each part whole) until it fits: never cut from the
        front, where a real server would cut it silently.
        """
        num_predict = prompts.PROJECT_OVERVIEW_OPTIONS["num_predict"]
        material = prompts.overview_material(sources)
        passes = 0
        while True:
            fixed = prompts.build_project_overview_messages(project_name, [], True, material="")
            budget = await llm.input_budget(self.model, fixed, num_predict)
            if tokens.estimate_tokens(material) <= budget:
                return material, passes
            fold_fixed = prompts.build_fold_messages(project_name, "", 999, 999)
            fold_budget = await llm.input_budget(
                self.model, fold_fixed, prompts.SESSION_SUMMARY_OPTIONS["num_predict"]
            )
            if budget <= 0 or fold_budget <= 0:
                raise LLMInputTooLong(f"{self.model}'s context has no room for an overview")
            pieces = tokens.split_to_budget(material, fold_budget)
            if len(pieces) == 1 and passes:
                raise LLMInputTooLong(
                    f"the condensed history still does not fit {self.model}'s context"
                )
            condensed = []
            for i, piece in enumerate(pieces, 1):
                condensed.append(
                    await llm.chat_text(
                        self.model,
                        prompts.build_fold_messages(project_name, piece, i, len(pieces)),
                        **prompts.SESSION_SUMMARY_OPTIONS,
                    )
                )
                passes += 1
            material = "\n\n---\n\n".join(c for c in condensed if c)
            log.info(
                "project overview of %s: input folded in %d parts to fit %s's context",
                project_name,
                len(pieces),
                self.model,
            )


def _dated_body(new: Sequence[Episode]) -> str:
    """The exchanges a pass summarizes, as the prompt gives them."""
    return "\n\n".join(
        prompts.dated_text(
            e.user_message,
            e.ai_response,
            # Only an imported exchange (stored well after it happened)
            # carries its date: a live one happened when it was stored.
            e.occur_at if abs(e.created_at - e.occur_at) > prompts.IMPORTED_AFTER_SECONDS else None,
        )
        for e in new
    )


def _within_budget(episodes: list, budget: int) -> list:
    """The oldest episodes whose text fits the token budget (always at least
    one: a longer one is folded)."""
    taken: list = []
    used = 0
    for e in episodes:
        size = tokens.estimate_tokens(episode_text(e.user_message, e.ai_response)) + 2
        if taken and used + size > budget:
            break
        taken.append(e)
        used += size
    return taken


def _check_range(
    uow: UnitOfWork,
    session_id: int,
    project_id: int,
    first: int,
    last: int,
    at: float,
) -> None:
    """A stored range must name episodes the summary's scope holds.

    The automatic summarizer resumes after the latest summary's
    last_episode_id: a range naming an episode that never existed (or
    another session's) would silently mark episodes as summarized that
    never were.
    """
    owner = f"session {session_id}" if session_id else f"project {project_id}"
    for field, episode_id in (
        ("summary.first_episode_id", first),
        ("summary.last_episode_id", last),
    ):
        if not episode_id:
            continue
        try:
            # Another tenant's episode reads as missing, not as someone else's.
            episode = uow.episodes.get(episode_id, tenancy.visible())
        except NotFound:
            raise FailedPrecondition(f"{field} {episode_id} does not exist") from None
        cutoff = uow.episodes.retention_cutoff(episode.session_id, at)
        if cutoff is not None and episode.occur_at < cutoff:
            # Past its project's retention: gone, as a deleted one is.
            raise FailedPrecondition(f"{field} {episode_id} does not exist")
        if session_id:
            inside = episode.session_id == session_id
        else:
            inside = uow.sessions.get(episode.session_id).project_id == project_id
        if not inside:
            raise FailedPrecondition(f"{field} {episode_id} is not an episode of {owner}")


def indexed(uow: UnitOfWork, summary: Summary) -> Summary:
    """``summary``, just written: its embedding queued in the same transaction."""
    uow.jobs.enqueue(jobs.INDEX_SUMMARY, [summary.id])
    return summary


def unindex(uow: UnitOfWork, summary_id: int) -> None:
    """The job that takes a summary's point out, queued while its row is still
    there (the job takes the row's tenant); the caller deletes the row next."""
    uow.jobs.enqueue(jobs.INDEX_SUMMARY, [summary_id])


def _check_session_of(uow: UnitOfWork, summary: Summary) -> None:
    """A session's summary is changed only by a key that may write into the
    session (a project's overview by any key of its tenant)."""
    if summary.session_id:
        require_may_write(uow.sessions.get(summary.session_id), "change summaries of")


def _session(uow: UnitOfWork, session_id: int, field: str, tenant: str | None, at: float):
    try:
        return uow.sessions.get(session_id, tenant, retained_at=at)
    except NotFound:
        raise FailedPrecondition(f"{field} {session_id} does not exist") from None
