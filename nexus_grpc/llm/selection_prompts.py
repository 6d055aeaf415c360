"""Two-pass memory selection: prompts, schemas and answer parsing.

Pass 1 (fast model) sees only ids and titles and picks candidates; pass 2 sees
the candidates' content and ranks them.  Both answers are untrusted: ids the
model invents are dropped and relevance is clamped to 0..1.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nexus_grpc.llm.llm_errors import LLMBadOutput
from nexus_grpc.llm.sampling import SamplingOptions

Category = Literal["necessary", "supporting"]
CATEGORIES: tuple[Category, ...] = ("necessary", "supporting")

# Not fixed by the spec; low temperature because this is a classification task.
SELECTION_OPTIONS: SamplingOptions = {"temperature": 0.1, "num_predict": 600}
RANKING_OPTIONS: SamplingOptions = {"temperature": 0.1, "num_predict": 600}
# Each memory's content is cut in the ranking prompt so many candidates still
# fit a small model's context window.
MAX_RANKING_CONTENT_CHARS = 2000
# Answers are bounded in the schema so they fit num_predict (~20 tokens per
# item): a model that lists every title otherwise runs into the cut-off.
MAX_PICKS_PER_ANSWER = 25

SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "selected": {
            "type": "array",
            "maxItems": MAX_PICKS_PER_ANSWER,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "relevance": {"type": "number"},  # clamped when parsed
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                },
                "required": ["id", "relevance", "category"],
            },
        }
    },
    "required": ["selected"],
}

RANKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ranked": {
            "type": "array",
            "maxItems": MAX_PICKS_PER_ANSWER,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "relevance": {"type": "number"},  # clamped when parsed
                },
                "required": ["id", "relevance"],
            },
        }
    },
    "required": ["ranked"],
}

_SELECTION_SYSTEM = """\
You choose which stored memories an AI assistant needs to answer the user's prompt.
You see each memory's id and title only. Return JSON \
{"selected": [{"id", "relevance", "category"}]} with:
- id: an id from the list (never invent one);
- relevance: 0.0 (unrelated) to 1.0 (essential);
- category: "necessary" if the answer depends on it, "supporting" if it only helps.
Select only memories that matter for this prompt; return {"selected": []} if none do."""

_RANKING_SYSTEM = """\
You rank stored memories by how useful they are for answering the user's prompt.
Return JSON {"ranked": [{"id", "relevance"}]} using only the ids given, with \
relevance from 0.0 (not useful) to 1.0 (essential), most relevant first."""


@dataclass(frozen=True, slots=True)
class Selected:
    id: int
    relevance: float
    category: Category


def build_selection_messages(
    prompt: str,
    titles: Sequence[tuple[int, str]],
    thread_summary: str | None,
    used_ids: Collection[int],
) -> list[dict[str, str]]:
    """Pass-1 messages.  Memories in ``used_ids`` were already given to the
    assistant earlier in this thread; they are marked so the model re-selects
    them only when still needed."""
    used = set(used_ids)
    lines = [title_line(mid, title, mid in used) for mid, title in titles]
    user = (
        f"Thread summary:\n{_or_none(thread_summary)}\n\n"
        f"User prompt:\n{prompt}\n\n"
        "Memories (id and title):\n" + ("\n".join(lines) or "(none)")
    )
    return [{"role": "system", "content": _SELECTION_SYSTEM}, {"role": "user", "content": user}]


def title_line(mid: int, title: str, used: bool) -> str:
    """One memory's line in the pass-1 prompt (also what batches are sized by)."""
    return f"- [{mid}] {title}" + ("  (already used in this thread)" if used else "")


def ranking_block(mid: int, title: str, content: str) -> str:
    """One memory's block in the pass-2 prompt."""
    return f"[{mid}] {title}\n{_cut(content, MAX_RANKING_CONTENT_CHARS)}"


def build_ranking_messages(
    prompt: str,
    memories: Sequence[tuple[int, str, str]],
    thread_summary: str | None,
) -> list[dict[str, str]]:
    """Pass-2 messages; ``memories`` are (id, title, content) of the pass-1 picks."""
    blocks = [ranking_block(mid, title, content) for mid, title, content in memories]
    user = (
        f"Thread summary:\n{_or_none(thread_summary)}\n\n"
        f"User prompt:\n{prompt}\n\n"
        "Memories:\n\n" + ("\n\n".join(blocks) or "(none)")
    )
    return [{"role": "system", "content": _RANKING_SYSTEM}, {"role": "user", "content": user}]


def parse_selection(obj: Mapping[str, Any], valid_ids: Collection[int]) -> list[Selected]:
    """Pass-1 answer -> picks, most relevant first, one per id."""
    best: dict[int, Selected] = {}
    for item in _items(obj, "selected"):
        parsed = _id_and_relevance(item, valid_ids)
        if parsed is None:
            continue
        mid, relevance = parsed
        raw_cat = item.get("category")
        cat = raw_cat.strip().lower() if isinstance(raw_cat, str) else ""
        # An unknown category is not worth dropping a valid pick over.
        category: Category = "necessary" if cat == "necessary" else "supporting"
        if mid not in best or relevance > best[mid].relevance:
            best[mid] = Selected(id=mid, relevance=relevance, category=category)
    return sorted(best.values(), key=lambda s: s.relevance, reverse=True)


def parse_ranking(obj: Mapping[str, Any], valid_ids: Collection[int]) -> dict[int, float]:
    """Pass-2 answer -> {id: relevance}, ordered most relevant first."""
    best: dict[int, float] = {}
    for item in _items(obj, "ranked"):
        parsed = _id_and_relevance(item, valid_ids)
        if parsed is None:
            continue
        mid, relevance = parsed
        best[mid] = max(relevance, best.get(mid, 0.0))
    return dict(sorted(best.items(), key=lambda kv: kv[1], reverse=True))


def _items(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get(key), list):
        raise LLMBadOutput(f"answer must be an object with a '{key}' list")
    return [item for item in obj[key] if isinstance(item, Mapping)]


def _id_and_relevance(
    item: Mapping[str, Any], valid_ids: Collection[int]
) -> tuple[int, float] | None:
    raw_id, raw_rel = item.get("id"), item.get("relevance")
    # bool is an int subclass: reject it explicitly.  "12" is tolerated.
    if isinstance(raw_id, bool):
        return None
    if isinstance(raw_id, str) and raw_id.strip().lstrip("-").isdigit():
        raw_id = int(raw_id.strip())
    elif isinstance(raw_id, float) and raw_id.is_integer():
        raw_id = int(raw_id)
    if not isinstance(raw_id, int) or raw_id not in valid_ids:
        return None  # invented or malformed id
    if isinstance(raw_rel, bool) or not isinstance(raw_rel, (int, float, str)):
        return None
    try:
        relevance = float(raw_rel)
    except ValueError:
        return None
    if math.isnan(relevance):
        return None
    return raw_id, min(1.0, max(0.0, relevance))


def _or_none(text: str | None) -> str:
    return text.strip() if text and text.strip() else "(none)"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"
