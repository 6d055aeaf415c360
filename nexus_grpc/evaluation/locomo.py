"""Reading LoCoMo-format conversations and turning them into episodes.

The construction is the one ``shared/eval/README.md`` fixes, so that figures
compare across servers and sessions: one project per conversation, one session
per ``session_N`` in order, consecutive turns paired into episodes
(``"[<date>] <speaker>: <text>"`` then ``"<speaker>: <text>"``, ``"(no reply)"``
for an odd last turn), both turns' dialogue ids mapped to the episode.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from nexus_grpc.evaluation.eval_errors import DataError

NO_REPLY = "(no reply)"
# Evidence is usually "D3:12"; a few items pack several ids into one string.
_DIALOGUE_ID = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class EpisodeText:
    user_message: str
    ai_response: str
    dialogue_ids: tuple[str, ...]
    #: The caption of a photo each turn shared ("" when it shared none). The
    #: README's construction leaves them out; the "photos" one keeps them.
    user_photo: str = ""
    ai_photo: str = ""


@dataclass(frozen=True)
class SessionText:
    date: str
    episodes: tuple[EpisodeText, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    #: Indexes into ``Conversation.episodes()`` that hold the answer.
    evidence: frozenset[int]


@dataclass(frozen=True)
class Conversation:
    name: str
    speakers: tuple[str, str]
    sessions: tuple[SessionText, ...]
    questions: tuple[Question, ...]
    #: Questions whose evidence maps to no episode (skipped, as the README says).
    skipped: int = field(default=0)

    def episodes(self) -> list[EpisodeText]:
        return [e for s in self.sessions for e in s.episodes]


def load(path: str | Path) -> Conversation:
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: {exc}") from exc
    if not isinstance(raw, dict) or "qa" not in raw or "speaker_a" not in raw:
        raise DataError(f"{path}: not a LoCoMo conversation (no speaker_a or qa)")
    sessions: list[SessionText] = []
    where: dict[str, int] = {}
    count = 0
    n = 1
    while f"session_{n}" in raw or f"session_{n}_date_time" in raw:
        turns = raw.get(f"session_{n}") or []
        date = str(raw.get(f"session_{n}_date_time", ""))
        episodes: list[EpisodeText] = []
        for i in range(0, len(turns), 2):
            first = turns[i]
            second = turns[i + 1] if i + 1 < len(turns) else None
            ids = (first["dia_id"],) + ((second["dia_id"],) if second else ())
            for dialogue_id in ids:
                where[dialogue_id] = count
            episodes.append(
                EpisodeText(
                    user_message=f"[{date}] {first['speaker']}: {first['text']}",
                    ai_response=f"{second['speaker']}: {second['text']}" if second else NO_REPLY,
                    dialogue_ids=ids,
                    user_photo=_caption(first),
                    ai_photo=_caption(second) if second else "",
                )
            )
            count += 1
        if episodes:
            sessions.append(SessionText(date, tuple(episodes)))
        n += 1
    questions: list[Question] = []
    skipped = 0
    for item in raw["qa"]:
        cited = {m for e in item.get("evidence") or [] for m in _DIALOGUE_ID.findall(str(e))}
        evidence = frozenset(where[i] for i in cited if i in where)
        if not evidence:
            skipped += 1
            continue
        questions.append(Question(str(item["question"]), int(item.get("category", 0)), evidence))
    return Conversation(
        name=path.stem,
        speakers=(str(raw["speaker_a"]), str(raw.get("speaker_b", ""))),
        sessions=tuple(sessions),
        questions=tuple(questions),
        skipped=skipped,
    )


def _caption(turn: dict[str, object]) -> str:
    """What an image captioner said of the photo a turn shared (LoCoMo's
    ``blip_caption``); "" for a turn without one. The ``query`` field beside it
    is the search that found the image, not something a client would have."""
    caption = turn.get("blip_caption")
    return str(caption).strip() if caption and turn.get("img_url") else ""


def load_all(paths: list[str]) -> list[Conversation]:
    """Every ``*.json`` under each path (a file or a folder), in name order."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        elif p.exists():
            files.append(p)
        else:
            raise DataError(f"{p}: no such file or folder")
    if not files:
        raise DataError(f"no conversation files under {', '.join(paths)}")
    return [load(f) for f in files]
