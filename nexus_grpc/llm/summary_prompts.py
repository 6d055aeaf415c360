"""Prompts for session summaries and project overviews (plain-text answers).

Session summaries are generated non-streaming (``LLMClient.chat_text``);
project overviews are streamed (``LLMClient.chat_stream`` wrapped in
``text.clean_stream``) so the caller can forward text as it is produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from nexus_grpc.core.models import episode_text
from nexus_grpc.llm.sampling import SamplingOptions

SESSION_SUMMARY_OPTIONS: SamplingOptions = {"temperature": 0.2, "num_predict": 500}
PROJECT_OVERVIEW_OPTIONS: SamplingOptions = {"temperature": 0.2, "num_predict": 1200}
MAX_OVERVIEW_INPUT_CHARS = 8000

_SESSION_SYSTEM = """\
You summarise a conversation between a user and an AI assistant for later recall.
Write a concise summary (at most a few short paragraphs) covering the topics, \
decisions, facts about the user and their work, and open questions. Plain text \
only; no preamble, no headings, no lists of every message."""

_OVERVIEW_SYSTEM = """\
You write a project overview from the history of work on a project.
Describe what the project is, its goals, the technologies and people involved, \
key decisions so far, the current state and the next steps. Use short \
paragraphs in plain text or simple Markdown; no preamble."""


def truncate_recent(text: str, limit: int) -> str:
    """Keep the last ``limit`` characters: the most recent material matters most
    for an overview, and the prompt must fit the small model's context."""
    if limit <= 0:
        return ""
    return text if len(text) <= limit else text[-limit:]


# An exchange stored this much later than it happened was imported: its date
# is part of what the summary should keep ("in May 2023 they moved to Paris").
IMPORTED_AFTER_SECONDS = 60.0


def dated_text(user: str, ai: str, occur_at: float | None = None) -> str:
    """An exchange for the summary prompt, led by the date it happened when that
    is not simply the moment it was stored (None: no date line)."""
    text = episode_text(user, ai)
    if occur_at is None:
        return text
    when = datetime.fromtimestamp(occur_at, tz=UTC).strftime("%d %B %Y, %H:%M UTC")
    return f"(On {when})\n{text}"


def _format_episodes(episodes: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(episode_text(user, ai) for user, ai in episodes)


def build_session_summary_messages(
    episodes: Sequence[tuple[str, str]],
    previous_summary: str | None,
) -> list[dict[str, str]]:
    """Messages for a session summary.

    ``episodes`` are (user_message, ai_response) pairs, oldest first.  With no
    previous summary they are all the episodes of the session; with one, they
    are only the episodes since, and the model updates the summary cumulatively
    (cheaper than re-reading the whole session).
    """
    return build_session_text_messages(_format_episodes(episodes), previous_summary)


def build_session_text_messages(body: str, previous_summary: str | None) -> list[dict[str, str]]:
    """Session-summary messages for already formatted exchanges, or for one
    part of an exchange too long for the model's context (folded in order)."""
    body = body or "(no messages)"
    if previous_summary and previous_summary.strip():
        user = (
            f"Current summary of the session:\n{previous_summary.strip()}\n\n"
            f"New exchanges since that summary:\n{body}\n\n"
            "Rewrite the summary so it also covers the new exchanges. "
            "Keep what is still relevant from the current summary."
        )
    else:
        user = f"Conversation:\n{body}\n\nWrite the summary."
    return [{"role": "system", "content": _SESSION_SYSTEM}, {"role": "user", "content": user}]


_FOLD_SYSTEM = """\
You condense part of a project's history for a later overview. Keep every \
decision, technology, person, fact and open question; drop chit-chat. Plain \
text only; no preamble."""


def overview_material(sources: Sequence[str]) -> str:
    """The overview's input: the sources joined, cut to their most recent
    ``MAX_OVERVIEW_INPUT_CHARS`` characters."""
    return truncate_recent("\n\n---\n\n".join(sources), MAX_OVERVIEW_INPUT_CHARS)


def build_fold_messages(
    project_name: str, part: str, index: int, count: int
) -> list[dict[str, str]]:
    """A fold pass: one part of material too long for one call, condensed."""
    user = (
        f"Project: {project_name}\n\n"
        f"Part {index} of {count} of its history (oldest first):\n{part or '(none)'}\n\n"
        "Condense this part."
    )
    return [{"role": "system", "content": _FOLD_SYSTEM}, {"role": "user", "content": user}]


def build_project_overview_messages(
    project_name: str,
    sources: Sequence[str],
    from_summaries: bool,
    *,
    material: str | None = None,
) -> list[dict[str, str]]:
    """Messages for a project overview.

    ``sources`` are session summaries (``from_summaries=True``) or, when no
    session has a summary yet, raw episode texts; oldest first.  The joined
    input is cut to its last ``MAX_OVERVIEW_INPUT_CHARS`` characters.
    ``material`` replaces that input (the condensed parts of a folded one).
    """
    kind = "Session summaries" if from_summaries else "Conversation excerpts"
    if material is None:
        material = overview_material(sources)
    user = (
        f"Project: {project_name}\n\n"
        f"{kind} (oldest first, most recent last):\n{material or '(none)'}\n\n"
        f"Write the overview of {project_name}."
    )
    return [{"role": "system", "content": _OVERVIEW_SYSTEM}, {"role": "user", "content": user}]
