"""RestoreProject's own rules (domain/restore.py), decided on the fakes of
tests/fakes.py: every record checked before anything is written, the first
bad one named by its index and kind; a record that collides with what the
server holds, found while writing, leaving nothing (the whole restore is one
write); a stream past its limits ended at once.

The stream restored is a project seeded through the domain's use cases,
worn as a used server's would be, and exported by domain/export.py on the
fakes, so its records are what ExportProject sends; what was restored is
read back by the same export.

Also here: a restore writes every record as it was exported, in new ids
(times, counters, history authors and sources kept; extraction not run
again), in the caller's tenant.

What a client sees of them (the status codes and messages over the wire, an
empty record refused by the wire's conversion, the admin key, the real
stores' transactions, the command's file) is
tests/e2e/service/test_restore_project.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import SOURCE_EXTRACTION, Entity, Relationship
from nexus_grpc.core.models import Episode, JobState, MemoryKind, Project, Session
from nexus_grpc.core.records import Memory, Revision, Summary
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import restore
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.export import ExportItem, ProjectExport
from nexus_grpc.domain.graph import Graph
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.restore import ProjectRestore, RestoreIntake
from nexus_grpc.domain.summaries import Summaries
from nexus_grpc.errors import AlreadyExists, InvalidArgument, NotFound
from tests.fakes import FakeDatabase, FakeUnitOfWork

BASE = 1_683_554_160  # 8 May 2023, 13:56 UTC


class OneTransaction(FakeDatabase):
    """``Database.write`` as the stores run it, one transaction: a write that
    raises leaves nothing of what it wrote."""

    async def write(self, fn: Any) -> Any:
        with self.uow.savepoint("write"):
            return fn(self.uow)


async def exported() -> list[ExportItem]:
    """A project with some of everything (sessions, episodes, a memory with
    its history, a user's memory, a graph, a summary), as ExportProject
    reads it."""
    uow = FakeUnitOfWork()
    db = FakeDatabase(uow)
    conversations = Conversations(db, JobSignals())
    # Memory and entity writes read neither the embedder nor the index.
    memories = Memories(db, JobSignals(), None, None)  # type: ignore[arg-type]
    graph = Graph(db, JobSignals(), None, None, None)  # type: ignore[arg-type]
    project = await conversations.create_project({"name": "MINE project"})
    sessions = [
        (await conversations.create_session("", f"s{i}", project.id, {"n": i})).id for i in range(2)
    ]
    episodes = [
        (
            await conversations.create_episode(
                sessions[i % 2], f"MINE question {i}", f"answer {i}", {}, "",
                occur_at=BASE + 60 * i,
            )
        ).id
        for i in range(4)
    ]  # fmt: skip
    edited = await memories.create(
        {"kind": int(MemoryKind.PROJECT), "project_id": project.id, "title": "deploy",
         "content": "friday"}
    )  # fmt: skip
    await memories.update(edited.id, {"title": "deploys"}, ["title"], "")
    await memories.create(
        {"kind": int(MemoryKind.USER), "user_id": "alice", "project_id": project.id,
         "title": "alice likes", "content": "tea"}
    )  # fmt: skip
    ada = await graph.upsert_entity("MINE Ada", "person", "", 0.0, project.id)
    db_ = await graph.upsert_entity("Postgres", "technology", "db", 0.0, project.id)
    await graph.upsert_relationship(ada.id, db_.id, "maintains", "since 2020")
    await Summaries(db, JobSignals(), None, "model").create(
        sessions[0], 0, "MINE they talked",
        {"first_episode_id": episodes[0], "last_episode_id": episodes[2], "episode_count": 2},
    )  # fmt: skip
    # Worn: server-assigned fields a fresh write would not give.
    rows = uow.memories.rows
    alice = next(m for m in rows.values() if m.title == "alice likes")
    rows[alice.id] = replace(alice, use_count=3, last_used_at=1_700_000_000.5)
    for i, revision in uow.memories.history.items():
        uow.memories.history[i] = replace(revision, principal="ops")
    entities = uow.graph.entities
    entities[ada.id] = replace(
        entities[ada.id], source=SOURCE_EXTRACTION, mention_count=4, last_seen_at=BASE + 100.5
    )
    return [item async for item in ProjectExport(db).records(project.id)]


@pytest.fixture
async def items() -> list[ExportItem]:
    return await exported()


@pytest.fixture
def target() -> FakeUnitOfWork:
    """The server restored into, holding a project of its own already."""
    uow = FakeUnitOfWork()
    project = uow.projects.insert({"name": "held"})
    uow.sessions.insert("held-session", "", project.id, {}, "default")
    return uow


def rows(uow: FakeUnitOfWork) -> dict[str, Any]:
    """Every row a restore writes, and the jobs it queues."""
    g = uow.graph
    return {
        "projects": dict(uow.projects.rows),
        "sessions": dict(uow.sessions.rows),
        "episodes": dict(uow.episodes.rows),
        "memories": dict(uow.memories.rows),
        "history": dict(uow.memories.history),
        "entities": dict(g.entities),
        "aliases": dict(g.aliases),
        "links": set(g.episode_links),
        "relationships": dict(g.relationships),
        "evidence": dict(g.evidence),
        "merges": dict(g.merges),
        "summaries": dict(uow.summaries.rows),
        "jobs": len(uow.jobs.rows),
    }


def of(items: list[ExportItem], kind: type) -> list:
    return [x for x in items if isinstance(x, kind)]


def _first(items: list[ExportItem], kind: type) -> int:
    return next(i for i, x in enumerate(items) if isinstance(x, kind))


def _edited(items: list[ExportItem], of: type, **changes: Any) -> list[ExportItem]:
    """The records with the first of type ``of`` changed."""
    at = _first(items, of)
    return [*items[:at], replace(items[at], **changes), *items[at + 1 :]]


def _cases() -> dict[str, Callable[[list[ExportItem]], tuple[list[ExportItem], str]]]:
    """Each bad stream, made from the export, and the words its refusal names it by."""

    def second_entity(items: list[ExportItem]) -> tuple[list[ExportItem], str]:
        at = _first(items, Entity)
        ada = items[at]
        assert isinstance(ada, Entity)
        twin = replace(ada, id=999999, name=ada.name.upper())
        return (
            [*items[: at + 1], twin, *items[at + 1 :]],
            f"record {at + 1} (entity): entity 'MINE ADA' (person) is a second entity",
        )

    def revision_alone(items: list[ExportItem]) -> tuple[list[ExportItem], str]:
        at = _first(items, Revision)
        # The revision moved before its memory.
        moved = [*items[: at - 1], items[at], items[at - 1], *items[at + 1 :]]
        return moved, f"record {at - 1} (memory_revision): memory_revision.memory_id"

    def episode(i: list[ExportItem]) -> int:
        return _first(i, Episode)

    return {
        "no project first": lambda i: (
            i[1:],
            "record 0 is a session; the first record must be the project",
        ),
        "a second project": lambda i: (
            [i[0], *i[1:3], i[0], *i[3:]],
            "record 3 (project): a second project record",
        ),
        "an unknown session": lambda i: (
            _edited(i, Episode, session_id=999999),
            f"record {episode(i)} (episode): episode.session_id 999999 names no session"
            " record earlier in the stream",
        ),
        "an unknown entity": lambda i: (
            _edited(i, Relationship, to_id=999999),
            f"record {_first(i, Relationship)} (relationship): relationship.to_id 999999"
            " names no entity",
        ),
        "a bad entity type": lambda i: (
            _edited(i, Entity, type="spaceship"),
            f"record {_first(i, Entity)} (entity): entity.type 'spaceship' is not an entity type",
        ),
        "a blank message": lambda i: (
            _edited(i, Episode, user_message=" "),
            f"record {episode(i)} (episode): episode.user_message is required",
        ),
        "an entity twice": second_entity,
        "a session of another project": lambda i: (
            _edited(i, Session, project_id=999999),
            "record 1 (session): session.project_id 999999 is not the project of this stream",
        ),
        "a session twice": lambda i: (
            [*i[:2], i[1], *i[2:]],
            f"record 2 (session): session.id {i[1].id} is a second session record",  # type: ignore[union-attr]
        ),
        "a revision before its memory": revision_alone,
        "a count past what a store keeps": lambda i: (
            _edited(i, Entity, mention_count=2**31),
            f"record {_first(i, Entity)} (entity): entity.mention_count must be a count from 0"
            " to 2147483647, got 2147483648",
        ),
        "a negative count": lambda i: (
            _edited(i, Summary, episode_count=-1),
            f"record {_first(i, Summary)} (summary): summary.episode_count must be a count from"
            " 0 to 2147483647, got -1",
        ),
        "a user memory without its user": lambda i: (
            _edited(i, Memory, kind=int(MemoryKind.USER)),
            f"record {_first(i, Memory)} (memory): memory.user_id is required for a USER memory",
        ),
    }


CASES = list(_cases())


#: References, by the type of record they name.
REFERENCES: dict[str, type] = {
    "project_id": Project,
    "session_id": Session,
    "memory_id": Memory,
    "episode_id": Episode,
    "source_episode_id": Episode,
    "asserted_by": Episode,
    "ended_by": Episode,
    "first_episode_id": Episode,
    "last_episode_id": Episode,
    "entity_id": Entity,
    "from_id": Entity,
    "to_id": Entity,
    "target_id": Entity,
}
#: Derived state the receiving server rebuilds rather than copies.
DERIVED = {"embed_state", "embed_error", "extract_state", "extract_error", "memory_state"}


def normalized(items: list[ExportItem]) -> list[tuple[str, dict[str, Any]]]:
    """Each record with every id replaced by the position of its row among
    the records of its type, and the derived fields left out."""
    order: dict[type, dict[int, int]] = {}
    for item in items:
        if hasattr(item, "id"):
            seen = order.setdefault(type(item), {})
            seen[item.id] = len(seen)

    def clean(item: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(item):
            value = getattr(item, f.name)
            if f.name in DERIVED:
                continue
            if f.name == "id":
                value = order[type(item)][value]
            elif f.name in REFERENCES and value:
                value = order[REFERENCES[f.name]][value]
            elif f.name == "previous":
                value = clean(value)
            out[f.name] = value
        return out

    return [(restore.kind_of(item), clean(item)) for item in items]


def test_the_export_passes_every_check(items):
    """The stream the cases below break is one a restore takes whole: each
    case breaks one record of it."""
    kinds = [restore.kind_of(x) for x in items]
    assert kinds == [
        "project", "session", "session", *["episode"] * 4, "memory", "memory_revision",
        "memory", "entity", "entity", "relationship", "entity_alias", "entity_alias",
        "relationship_evidence", "summary",
    ]  # fmt: skip
    plan = restore._plan(items, BASE)
    assert [x for _, x in plan.items] == items[1:]


async def test_a_restore_writes_every_record_as_it_was_exported_in_new_ids(items, target):
    restored = await ProjectRestore(OneTransaction(target), JobSignals()).restore(items)
    assert restored.counts == {
        "session": 2, "episode": 4, "memory": 2, "memory_revision": 1, "entity": 2,
        "relationship": 1, "entity_alias": 2, "entity_episode": 0,
        "relationship_evidence": 1, "entity_merge": 0, "summary": 1,
    }  # fmt: skip
    assert restored.erased == 0
    again = [x async for x in ProjectExport(FakeDatabase(target)).records(restored.project_id)]
    # Times, counters, history authors and sources came back as they were; only
    # the ids are new (the target held a project and a session already).
    assert normalized(again) == normalized(items)
    assert again[0].id != items[0].id and again[1].id != items[1].id
    used = next(m for m in of(again, Memory) if m.title == "alice likes")
    assert (used.use_count, used.last_used_at) == (3, 1_700_000_000.5)
    assert [r.principal for r in of(again, Revision)] == ["ops"]
    # Extraction is not run again: the graph came with the stream. The
    # episodes are indexed anew, behind live traffic.
    episodes = of(again, Episode)
    assert {e.extract_state for e in episodes} == {JobState.DONE}
    assert target.jobs.pending(jobs.EXTRACT_EPISODE) == []
    assert sorted(target.jobs.pending(jobs.INDEX_EPISODE)) == sorted(e.id for e in episodes)
    assert {j.priority for j in target.jobs.rows if j.kind == jobs.INDEX_EPISODE} == {jobs.BULK}


async def test_a_restore_goes_into_the_callers_own_tenant(items, target):
    """An admin key sees every tenant but restores into its own, as
    CreateProject creates there."""
    token = tenancy.bind(tenancy.Caller("acme", None, all_tenants=True))
    try:
        restored = await ProjectRestore(OneTransaction(target), JobSignals()).restore(items)
    finally:
        tenancy.reset(token)
    project = restored.project_id
    sessions = [s for s in target.sessions.rows.values() if s.project_id == project]
    assert target.projects.rows[project].tenant == "acme"
    assert {s.tenant for s in sessions} == {"acme"}
    assert {m.tenant for m in target.memories.rows.values() if m.project_id == project} == {"acme"}
    assert {e.tenant for e in target.graph.entities.values() if e.project_id == project} == {"acme"}
    # Another tenant's key does not see it; the tenant's own does.
    with pytest.raises(NotFound):
        target.projects.get(project, "globex")
    assert target.projects.get(project, "acme").name == "MINE project"


@pytest.mark.parametrize("case", CASES)
async def test_a_bad_record_is_named_and_nothing_is_restored(items, target, case):
    bad, message = _cases()[case](items)
    before = rows(target)
    with pytest.raises(InvalidArgument) as err:
        await ProjectRestore(OneTransaction(target), JobSignals()).restore(bad)
    assert message in err.value.message
    assert err.value.message.endswith("; nothing was restored")
    assert rows(target) == before


async def test_an_empty_stream_is_refused(target):
    before = rows(target)
    with pytest.raises(InvalidArgument, match="the first must be the project"):
        await ProjectRestore(OneTransaction(target), JobSignals()).restore([])
    assert rows(target) == before


async def test_a_collision_found_while_writing_rolls_back_everything(items, target):
    """The first session's external_id is held already: found when that
    session is written, after the project row was. Nothing stays, the
    project included: the restore is one write."""
    first = items[1]
    assert isinstance(first, Session)
    held = target.projects.insert({"name": "other"})
    target.sessions.insert(first.external_id, "", held.id, {}, "default")
    before = rows(target)
    with pytest.raises(AlreadyExists) as err:
        await ProjectRestore(OneTransaction(target), JobSignals()).restore(items)
    assert err.value.message.startswith(
        f"record 1 (session): a session with external_id {first.external_id!r}"
    )
    assert err.value.message.endswith("; nothing was restored")
    assert rows(target) == before


def test_too_many_records_end_the_stream_at_once(monkeypatch):
    monkeypatch.setattr(restore, "MAX_RESTORE_RECORDS", 5)
    intake = RestoreIntake()
    for _ in range(5):
        intake.next_record()
    with pytest.raises(InvalidArgument) as err:
        intake.next_record()
    assert err.value.message == "at most 5 records per RestoreProject call; nothing was restored"


def test_records_past_the_size_limit_end_the_stream_at_once(monkeypatch):
    monkeypatch.setattr(restore, "MAX_RESTORE_BYTES", 3 * 1024 * 1024)
    intake = RestoreIntake()
    intake.next_record()
    assert intake.weighs(2 * 1024 * 1024)
    intake.next_record()
    with pytest.raises(InvalidArgument) as err:
        intake.weighs(2 * 1024 * 1024)
    assert err.value.message == (
        "the records reach 3 MiB by record 1, the most one RestoreProject call takes;"
        " nothing was restored"
    )


def test_the_first_bad_record_is_named_once_the_stream_has_ended():
    """A record that does not convert (or decode) is named by its index and
    kind; the rest of the stream is read but no longer converted, and the
    first refusal is the one raised."""
    intake = RestoreIntake()
    intake.next_record()
    assert intake.weighs(10)
    intake.next_record()
    intake.failed("empty", InvalidArgument("record is empty"))
    intake.next_record()
    assert not intake.weighs(10)
    intake.failed("session", InvalidArgument("session.name is too long"))
    intake.next_record()
    intake.undecodable("not a record")
    with pytest.raises(InvalidArgument) as err:
        intake.items()
    assert err.value.message == "record 1 (empty): record is empty; nothing was restored"

    undecodable = RestoreIntake()
    undecodable.next_record()
    undecodable.undecodable("garbled")
    with pytest.raises(InvalidArgument, match="^record 0: garbled; nothing was restored$"):
        undecodable.items()
