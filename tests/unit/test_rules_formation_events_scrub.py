"""A removed memory's words leave the formation events that told how it
formed (domain/erasure.py's ``scrub_formation_events``), on the fakes: the
event of the episode that formed it and of each that changed it keeps its
operations but not their words (``(erased)``, no reason); an operation that
only names it as the related memory loses its words too; another memory's
operation, and an event with no formation, are left as they were.

That a replay from event 0 after DeleteMemory holds none of its words, on
each store, is the whole-server tier's:
tests/e2e/service/test_deletes_leave_nothing.py.
"""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.records import UPDATE, ChangedBy
from nexus_grpc.domain.erasure import ERASED, scrub_formation_events
from tests.fakes import FakeUnitOfWork


def _op(memory_id: int, content: str, related: int | None = None) -> dict:
    op = {"action": "ADD", "memory_id": memory_id, "content": content, "reason": "said so"}
    if related is not None:
        op["related_memory_id"] = related
    return op


@pytest.fixture
def world():
    uow = FakeUnitOfWork()
    session = uow.sessions.insert("s", "", 0, {}, "t1").id
    formed_in, changed_in, elsewhere = (
        uow.episodes.insert(session, text, "", {}, None).id for text in ("a", "b", "c")
    )

    def memory(content: str, source: int | None) -> int:
        values = {
            "kind": int(MemoryKind.USER), "title": "t", "content": content,
            "tier": int(Tier.LONGTERM), "project_id": 0, "agent_id": "", "user_id": "ann",
            "session_id": 0, "confidence": 0.9, "metadata": {}, "source_episode_id": source,
        }  # fmt: skip
        return uow.memories.insert(values, None, "t1").id

    gone, kept = memory("ann is allergic to nuts", formed_in), memory("ann likes tea", elsewhere)
    # A later episode changed the memory: its history names that episode.
    uow.memories.record(
        uow.memories.get(gone), UPDATE, ["content"], ChangedBy(episode_id=changed_in)
    )
    return uow, session, (formed_in, changed_in, elsewhere), (gone, kept)


def _event(uow, session, episode_id, operations=None, **payload) -> int:
    if operations is not None:
        payload["formation"] = {"user_id": "ann", "operations": operations}
    return uow.events.insert(episode_id, session, 0, 1, payload=payload)


def _payload(uow, event_id) -> dict:
    return uow.events.rows[event_id][0].payload


def test_the_events_that_formed_or_changed_a_memory_keep_its_operation_without_its_words(world):
    uow, session, (formed_in, changed_in, _), (gone, kept) = world
    formed = _event(
        uow, session, formed_in, [_op(gone, "ann is allergic to nuts"), _op(kept, "tea")]
    )
    changed = _event(uow, session, changed_in, [_op(gone, "allergic to peanuts")], entities=[3])
    scrub_formation_events(uow, [gone])
    ops = _payload(uow, formed)["formation"]["operations"]
    assert ops[0] == {**_op(gone, ERASED), "reason": ""}
    assert ops[1] == _op(kept, "tea")  # another memory's words stay
    assert _payload(uow, changed)["formation"]["operations"] == [
        {**_op(gone, ERASED), "reason": ""}
    ]
    assert _payload(uow, changed)["entities"] == [3]  # the rest of the event is kept
    assert _payload(uow, formed)["formation"]["user_id"] == "ann"


def test_an_operation_naming_it_only_as_the_related_memory_loses_its_words_too(world):
    uow, session, (formed_in, _, _), (gone, kept) = world
    event = _event(uow, session, formed_in, [_op(kept, "merged with the nut one", related=gone)])
    scrub_formation_events(uow, [gone])
    [op] = _payload(uow, event)["formation"]["operations"]
    assert (op["content"], op["reason"], op["related_memory_id"]) == (ERASED, "", gone)


def test_an_event_with_no_formation_or_not_naming_it_is_left_as_it_was(world):
    uow, session, (formed_in, _, elsewhere), (gone, kept) = world
    plain = _event(uow, session, formed_in, entities=[1, 2])
    odd = _event(uow, session, formed_in, formation="not a dict")
    other = _event(uow, session, elsewhere, [_op(kept, "ann likes tea")])
    before = {e: _payload(uow, e) for e in (plain, odd, other)}
    scrub_formation_events(uow, [gone])
    assert {e: _payload(uow, e) for e in (plain, odd, other)} == before
