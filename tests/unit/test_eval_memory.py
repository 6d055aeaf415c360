"""``nexus-grpc eval memories`` without a server: its scoring (kept, stale,
duplicate, unexpected and leaked memories; archived told from absent) on
memories made by hand, and its set checks on bad files and on the committed
dev set (bench/eval/memory-dev.json).

The dev set against issue 27's bar, through a real server with the careful
stand-in and the real embedder, stays in tests/e2e/service/test_memory_eval.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus_grpc.evaluation.memory_eval import DataError, Fact, MemorySet, load, score
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

DEV = Path(__file__).resolve().parents[2] / "bench" / "eval" / "memory-dev.json"


def test_the_report_counts_kept_stale_duplicate_unexpected_and_leaked_memories():
    facts = {
        "a-home-new": Fact("a-home-new", "alice", ("The user lives in Porto.",)),
        "a-home-old": Fact("a-home-old", "alice", ("The user lives in Lisbon.",)),
        "a-cat": Fact("a-cat", "alice", ("The user has a cat called Miso.",)),
        "b-dog": Fact("b-dog", "bob", ("The user has a dog called Rex.",)),
    }
    data = MemorySet("t", [], facts, 4)
    project = {
        "expected": {
            "live": [{"fact": "a-home-new"}, {"fact": "a-cat"}, {"fact": "b-dog"}],
            "archived": [{"fact": "a-home-old"}],
        }
    }

    def m(i: int, user: str, content: str) -> memory_pb2.Memory:
        return memory_pb2.Memory(id=i, user_id=user, content=content)

    live = [
        m(1, "alice", "The user lives in Porto."),
        m(2, "alice", "the user lives in porto"),  # a duplicate, case aside
        m(3, "alice", "The user lives in Lisbon."),  # stale
        m(4, "alice", "The user has a dog called Rex."),  # bob's fact: a leak
        m(5, "alice", "The user greeted the assistant warmly today."),  # junk
    ]
    r = score(data, [(project, live)])
    assert r["facts"] == 3 and r["facts_kept"] == pytest.approx(1 / 3)  # only Porto
    assert (r["stale_live"], r["duplicates"], r["unexpected"], r["leaks"]) == (1, 1, 1, 1)
    assert any("a-cat is not live" in miss for miss in r["misses"])


def test_archived_is_told_from_absent():
    """A superseded fact stays, archived; a fact that should never have formed
    must not be stored at all: "not live" is not enough for either."""
    facts = {
        "home-new": Fact("home-new", "alice", ("The user lives in Porto.",)),
        "home-old": Fact("home-old", "alice", ("The user lives in Lisbon.",)),
        "old-news": Fact("old-news", "alice", ("The user works at Acme.",)),
    }
    data = MemorySet("t", [], facts, 3)
    project = {
        "expected": {
            "live": [{"fact": "home-new"}],
            "archived": [{"fact": "home-old"}],
            "absent": [{"fact": "old-news"}],
        }
    }
    archive = memory_pb2.TIER_ARCHIVE
    porto = memory_pb2.Memory(id=1, user_id="alice", content="The user lives in Porto.")
    lisbon = memory_pb2.Memory(
        id=2, user_id="alice", content="The user lives in Lisbon.", tier=archive
    )
    acme = memory_pb2.Memory(id=3, user_id="alice", content="The user works at Acme.", tier=archive)
    right = score(data, [(project, [porto, lisbon])])
    assert (right["archived_lost"], right["absent_formed"], right["stale_live"]) == (0, 0, 0)
    # The old home deleted rather than archived; the old news stored, then archived.
    wrong = score(data, [(project, [porto, acme])])
    assert (wrong["archived_lost"], wrong["absent_formed"], wrong["stale_live"]) == (1, 1, 0)
    assert "home-old should be archived and is gone" in wrong["misses"]


def test_a_bad_set_names_the_place(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"projects": [{"memory_formation": "SOMETIMES", "sessions": []}]}))
    with pytest.raises(DataError, match=r"projects\[0\].memory_formation"):
        load([str(bad)])
    bad.write_text(
        json.dumps({"projects": [{"sessions": [], "expected": {"live": [{"fact": "nowhere"}]}}]})
    )
    with pytest.raises(DataError, match="no fact 'nowhere'"):
        load([str(bad)])
    # A fact the episodes propose but "expected" does not place is refused:
    # it would be neither counted nor missed.
    episode = {
        "user": "I have a cat.",
        "assistant": "Nice.",
        "occur_time": "2024-03-01T10:00:00",
        "memories": [{"fact": "cat", "topic": "pet", "content": "The user has a cat."}],
    }
    bad.write_text(json.dumps({"projects": [
        {"sessions": [{"user_id": "u", "episodes": [episode]}], "expected": {"live": []}}
    ]}))  # fmt: skip
    with pytest.raises(DataError, match="does not say what becomes of 'cat'"):
        load([str(bad)])


def test_the_dev_set_is_what_issue_27_asks_for():
    data = load([str(DEV)])
    assert data.episodes >= 40
    users = {s.get("user_id") for p in data.projects for s in p["sessions"] if s.get("user_id")}
    assert len(users) >= 2
    kinds = {m.get("about") for p in data.projects for s in p["sessions"]
             for e in s["episodes"] for m in e["memories"]}  # fmt: skip
    assert kinds == {"user", "project"}
    chatter = [e for p in data.projects for s in p["sessions"] for e in s["episodes"]
               if not e["memories"]]  # fmt: skip
    assert len(chatter) >= 10
