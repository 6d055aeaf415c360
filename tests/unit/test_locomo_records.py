"""How a LoCoMo-format conversation becomes episodes and questions
(nexus_grpc/evaluation/locomo.py), the construction shared/eval/README.md
fixes: sessions in order, consecutive turns paired, "(no reply)" for an odd
last turn, every turn's dialogue id mapped to its episode, questions whose
evidence maps to nothing skipped, a photo's caption kept beside its turn.
Each test writes the file the loader is given (reading it is the loader's
job); storing the episodes over gRPC is
tests/e2e/service/test_recall_eval_photos.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nexus_grpc.evaluation.eval_errors import DataError
from nexus_grpc.evaluation.locomo import NO_REPLY, load, load_all

DATE_1 = "1:56 pm on 8 May, 2023"
DATE_2 = "10:37 am on 27 June, 2023"


def _turn(speaker: str, dia_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann",
    "speaker_b": "Bo",
    "session_1_date_time": DATE_1,
    "session_1": [
        _turn(
            "Ann",
            "D1:1",
            "Look what I finished this weekend!",
            img_url=["https://example.invalid/a.jpg"],
            blip_caption="  a photo of a painting of a sunset  ",
            query="painting sunrise",
        ),
        _turn("Bo", "D1:2", "Wow, gorgeous colours"),
        _turn("Ann", "D1:3", "We also adopted a beagle"),
    ],
    "session_2_date_time": DATE_2,
    "session_2": [
        _turn("Bo", "D2:1", "How is the beagle?"),
        _turn("Ann", "D2:2", "Chewing everything", blip_caption="a dog", img_url=[]),
    ],
    "qa": [
        {"question": "Who painted a sunset?", "evidence": ["D1:1"], "category": 4},
        {"question": "Which dog?", "evidence": ["D1:3; D2:2"], "category": 1},
        {"question": "What did Bo say?", "evidence": ["D1:2"]},
        {"question": "Never said", "evidence": ["D9:9"], "category": 2},
        {"question": "No evidence", "category": 3},
    ],
}


def _write(tmp_path: Path, raw: Any, name: str = "conv-26.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_turns_pair_into_episodes_the_first_dated_the_odd_last_unanswered(tmp_path):
    conv = load(_write(tmp_path, CONVERSATION))
    assert conv.name == "conv-26" and conv.speakers == ("Ann", "Bo")
    assert [s.date for s in conv.sessions] == [DATE_1, DATE_2]
    texts = [(e.user_message, e.ai_response) for e in conv.episodes()]
    assert texts == [
        (f"[{DATE_1}] Ann: Look what I finished this weekend!", "Bo: Wow, gorgeous colours"),
        (f"[{DATE_1}] Ann: We also adopted a beagle", NO_REPLY),
        (f"[{DATE_2}] Bo: How is the beagle?", "Ann: Chewing everything"),
    ]
    assert [e.dialogue_ids for e in conv.episodes()] == [
        ("D1:1", "D1:2"),
        ("D1:3",),
        ("D2:1", "D2:2"),
    ]


def test_a_caption_is_kept_only_for_a_turn_that_shared_an_image(tmp_path):
    first, second, third = load(_write(tmp_path, CONVERSATION)).episodes()
    assert (first.user_photo, first.ai_photo) == ("a photo of a painting of a sunset", "")
    assert (second.user_photo, second.ai_photo) == ("", "")
    # A caption without an image URL is the data set's note, not a shared photo.
    assert third.ai_photo == ""


def test_a_questions_evidence_is_the_episodes_its_dialogue_ids_fall_in(tmp_path):
    conv = load(_write(tmp_path, CONVERSATION))
    got = [(q.text, q.category, sorted(q.evidence)) for q in conv.questions]
    assert got == [
        ("Who painted a sunset?", 4, [0]),
        # Several ids packed into one string, across sessions.
        ("Which dog?", 1, [1, 2]),
        # The reply's id maps to its episode too; no category reads as 0.
        ("What did Bo say?", 0, [0]),
    ]


def test_questions_whose_evidence_maps_to_no_episode_are_skipped_and_counted(tmp_path):
    conv = load(_write(tmp_path, CONVERSATION))
    assert conv.skipped == 2
    assert "Never said" not in [q.text for q in conv.questions]


def test_sessions_are_read_in_number_order_until_the_first_missing_number(tmp_path):
    raw = {
        "speaker_a": "Ann",
        "qa": [],
        "session_1_date_time": DATE_1,  # a date and no turns: no session stored
        "session_2": [_turn("Ann", "D2:1", "second")],
        "session_4": [_turn("Ann", "D4:1", "never read: session_3 is missing")],
    }
    conv = load(_write(tmp_path, raw))
    assert [(s.date, len(s.episodes)) for s in conv.sessions] == [("", 1)]
    assert conv.speakers == ("Ann", "")


def test_a_file_that_is_not_a_conversation_is_refused_with_its_path(tmp_path):
    path = _write(tmp_path, {"speaker_a": "Ann"})
    with pytest.raises(DataError, match=r"conv-26.json: not a LoCoMo conversation"):
        load(path)
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken.json: "):
        load(broken)


def test_a_folder_gives_its_json_files_in_name_order(tmp_path):
    _write(tmp_path, CONVERSATION, "b.json")
    _write(tmp_path, CONVERSATION, "a.json")
    (tmp_path / "notes.txt").write_text("not a conversation", encoding="utf-8")
    assert [c.name for c in load_all([str(tmp_path)])] == ["a", "b"]


def test_a_missing_path_or_an_empty_folder_is_refused(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        load_all([str(tmp_path / "gone")])
    with pytest.raises(DataError, match="no conversation files under"):
        load_all([str(tmp_path)])
