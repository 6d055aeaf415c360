"""The restore repository's contract (RestoreProject's writes, with the
times and counters the export carried): the same cases on the fake
(tests/fakes.py), SQLite and PostgreSQL (the ``run`` fixture,
tests/integration/store/conftest.py)."""

from __future__ import annotations

from dataclasses import replace

from nexus_grpc.core.graph import (
    ASSERT,
    END,
    HISTORY,
    METHOD_NEW,
    PENDING,
    Entity,
    EntityAlias,
    EntityMerge,
    Evidence,
    MergedSource,
    Relationship,
)
from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.names import name_key
from nexus_grpc.core.records import UPDATE, Memory, Revision, Summary
from nexus_grpc.errors import AlreadyExists

_PROJECT = {
    "name": "Atlas", "description": "maps", "colour": "teal", "icon": "globe", "notes": "n",
    "system_prompt": "be brief", "retention": 3600.0, "single_valued_labels": ["owns"],
    "memory_formation": 1,
}  # fmt: skip


def _refused(write) -> str | None:
    try:
        write()
    except AlreadyExists as exc:
        return exc.message
    return None


async def test_a_restored_project_keeps_its_times_and_name_refused_where_its_tenant_holds_it(
    run,
):
    def case(uow):
        made = uow.restore.insert_project(_PROJECT, 100.0, 200.0, "t1")
        elsewhere = uow.restore.insert_project(_PROJECT, 300.0, 300.0, "t2")
        plain = uow.restore.insert_project(
            {**_PROJECT, "name": "plain", "retention": None, "single_valued_labels": None,
             "memory_formation": None}, 1.0, 2.0, "t1",
        )  # fmt: skip
        refused = _refused(lambda: uow.restore.insert_project(_PROJECT, 1.0, 1.0, "t1"))
        # The transaction goes on after the refusal (on PostgreSQL too).
        later = uow.restore.insert_project({**_PROJECT, "name": "later"}, 1.0, 1.0, "t1")
        got = uow.projects.get(made, "t1")
        bare = uow.projects.get(plain)
        return (
            made,
            (got.name, got.description, got.colour, got.icon, got.notes, got.system_prompt,
             got.retention, got.single_valued_labels, got.memory_formation, got.created_at,
             got.updated_at, got.tenant),
            (bare.retention, bare.single_valued_labels, bare.memory_formation),
            uow.projects.get(elsewhere).tenant, refused, uow.projects.get(later).name,
        )  # fmt: skip

    made, got, bare, elsewhere, refused, later = await run(case)
    assert got == (
        "Atlas", "maps", "teal", "globe", "n", "be brief", 3600.0, ("owns",), 1, 100.0, 200.0,
        "t1",
    )  # fmt: skip
    assert bare == (None, None, None)
    assert (elsewhere, later) == ("t2", "later")
    assert refused.startswith(
        f"a project named 'Atlas' already exists in this tenant: project {made};"
    )
    assert "a restore keeps the project's name" in refused


async def test_a_restored_session_keeps_its_time_and_external_id_refused_where_held(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        theirs = uow.projects.insert({"name": "p"}, "t2").id
        made = uow.restore.insert_session(
            "ext-1", "first", project, {"k": [1]}, 50.0, "t1", user_id="ann", agent_id="bot"
        )
        elsewhere = uow.restore.insert_session("ext-1", "", theirs, {}, 60.0, "t2")
        refused = _refused(
            lambda: uow.restore.insert_session("ext-1", "again", project, {}, 70.0, "t1")
        )
        live = uow.sessions.insert("ext-2", "", 0, {}, "t1").id
        also_refused = _refused(
            lambda: uow.restore.insert_session("ext-2", "", project, {}, 1.0, "t1")
        )
        got = uow.sessions.get(made, "t1")
        return (
            made, live,
            (got.external_id, got.name, got.project_id, got.metadata, got.created_at,
             got.tenant, got.user_id, got.agent_id),
            uow.sessions.get_by_external_id("ext-1", "t2").id == elsewhere,
            refused, also_refused,
        )  # fmt: skip

    made, live, got, elsewhere, refused, also_refused = await run(case)
    assert got == ("ext-1", "first", 1, {"k": [1]}, 50.0, "t1", "ann", "bot")
    assert elsewhere is True
    assert refused.startswith(f"a session with external_id 'ext-1' already exists (session {made})")
    assert also_refused.startswith(
        f"a session with external_id 'ext-2' already exists (session {live})"
    )


async def test_a_restored_memory_and_its_history_keep_the_exported_times_without_a_retry_key(
    run,
):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        session = uow.sessions.insert("s", "", project, {}, "t1", user_id="ann").id
        episode = uow.episodes.insert(session, "hi", "", {}, None).id
        exported = Memory(
            id=777, kind=int(MemoryKind.USER), title="Tea", content="green", tier=int(Tier.TASK),
            project_id=project, agent_id="bot", user_id="ann", session_id=session,
            confidence=0.5, metadata={"k": [1]}, created_at=10.0, updated_at=20.0,
            last_used_at=30.0, use_count=4, request_id="r-old", tenant="elsewhere",
            expire_at=4_000_000_000.0, source="formation", source_episode_id=episode,
        )  # fmt: skip
        made = uow.restore.insert_memory(exported, "t1")
        before = replace(exported, id=made, content="black", request_id=None, tenant="t1")
        uow.restore.insert_revision(
            Revision(0, made, UPDATE, ["content"], before, "r-9", "key-a", 15.0, None,
                     episode, "user said so")
        )  # fmt: skip
        got = uow.memories.get(made)
        [revision] = uow.memories.page(made, None, 10)
        return (
            made != 777, episode,
            (got.kind, got.title, got.content, got.tier, got.project_id == project,
             got.agent_id, got.user_id, got.session_id == session, got.confidence,
             got.metadata, got.created_at, got.updated_at, got.last_used_at, got.use_count,
             got.request_id, got.tenant, got.expire_at, got.source),
            got.source_episode_id == episode,
            (revision.memory_id == made, revision.action, revision.changed,
             revision.previous.content, revision.request_id, revision.principal,
             revision.changed_at, revision.purge_after, revision.episode_id == episode,
             revision.reason),
        )  # fmt: skip

    new_id, _, got, from_episode, revision = await run(case)
    assert new_id is True
    assert got == (
        int(MemoryKind.USER), "Tea", "green", int(Tier.TASK), True, "bot", "ann", True, 0.5,
        {"k": [1]}, 10.0, 20.0, 30.0, 4, None, "t1", 4_000_000_000.0, "formation",
    )  # fmt: skip
    assert from_episode is True
    assert revision == (
        True, UPDATE, ["content"], "black", "r-9", "key-a", 15.0, None, True, "user said so",
    )  # fmt: skip


async def test_a_restored_summary_keeps_its_times_and_reads_in_its_sessions_project(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        other = uow.projects.insert({"name": "q"}, "t1").id
        session = uow.sessions.insert("s", "", project, {}, "t1").id
        first, last = (uow.episodes.insert(session, x, "", {}, None).id for x in "ab")
        # A session summary's project is its session's, whatever the export said.
        of_session = uow.restore.insert_summary(
            Summary(0, session, other, "they met", first, last, 2, 10.0, 20.0)
        )
        overview = uow.restore.insert_summary(Summary(0, 0, other, "all of q", 0, 0, 0, 5.0, 6.0))
        got = [uow.summaries.find(i) for i in (of_session, overview)]
        return (project, other, session, first, last), [
            (s.session_id, s.project_id, s.content, s.first_episode_id, s.last_episode_id,
             s.episode_count, s.created_at, s.updated_at) for s in got
        ]  # fmt: skip

    (project, other, session, first, last), got = await run(case)
    assert got == [
        (session, project, "they met", first, last, 2, 10.0, 20.0),
        (0, other, "all of q", 0, 0, 0, 5.0, 6.0),
    ]


async def test_restored_relationships_and_evidence_keep_their_times_and_episodes(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        session = uow.sessions.insert("s", "", project, {}, "t1").id
        said, ended = (uow.episodes.insert(session, x, "", {}, None).id for x in "ab")
        graph = (project, 0)
        priya, porto, lisbon = (
            uow.graph.insert_entity(graph, name, etype, None, source="manual")
            for name, etype in (("Priya", "person"), ("Porto", "place"), ("Lisbon", "place"))
        )
        old = uow.restore.insert_relationship(
            Relationship(0, priya, porto, "lives_in", "n", 3, 100.0, 110.0, 200.0, said, ended)
        )
        # No start exported (an older export): it held from its creation.
        new = uow.restore.insert_relationship(
            Relationship(0, priya, lisbon, "lives_in", None, 1, 300.0)
        )
        evidence = [
            uow.restore.insert_evidence(
                Evidence(0, priya, porto, "lives_in", ASSERT, 110.0, said, 2, "n", 50.0)
            ),
            uow.restore.insert_evidence(
                Evidence(0, priya, porto, "lives_in", END, 200.0, None, 1, None, 60.0)
            ),
        ]
        rels = uow.graph.list_relationships(priya, False, when=HISTORY)
        return (
            (old, new, said, ended, porto, lisbon, evidence),
            sorted((r.id, r.to_id, r.notes, r.mention_count, r.created_at, r.valid_at,
                    r.invalid_at, r.asserted_by, r.ended_by) for r in rels),
            sorted((e.id, e.to_id, e.kind, e.at, e.episode_id, e.mentions, e.notes,
                    e.created_at) for e in uow.graph.evidence_of(priya, "lives_in")),
        )  # fmt: skip

    (old, new, said, ended, porto, lisbon, evidence), rels, kept = await run(case)
    assert rels == [
        (old, porto, "n", 3, 100.0, 110.0, 200.0, said, ended),
        (new, lisbon, None, 1, 300.0, 300.0, None, None, None),
    ]
    assert kept == [
        (evidence[0], porto, ASSERT, 110.0, said, 2, "n", 50.0),
        (evidence[1], porto, END, 200.0, None, 1, None, 60.0),
    ]


async def test_restored_entities_keep_their_counters_with_their_aliases_links_and_merges(run):
    """An entity is written as exported (times, counters, source, resolution;
    its graph the project's, its tenant the restore's); its aliases keep how
    each was resolved and are indexed; an entity that came without any is
    known by its name; episode links and merges are kept as they were."""

    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        session = uow.sessions.insert("s", "", project, {}, "t1").id
        said = uow.episodes.insert(session, "hi", "", {}, None).id
        ada = uow.restore.insert_entity(
            Entity(777, "Ada", "person", "n", 4, 0.5, "extraction", 30.0, 10.0, project, 9,
                   "elsewhere", ("x",), PENDING), "t1",
        )  # fmt: skip
        hal = uow.restore.insert_entity(
            Entity(778, "HAL", "technology", None, 1, 1.0, "manual", None, 20.0, project), "t1"
        )
        uow.restore.insert_alias(EntityAlias(0, ada, "Ada", "", "exact", 1.0, None, 12.0))
        uow.restore.insert_alias(EntityAlias(0, ada, "Ada Lovelace", "", "llm", 0.8, said, 15.0))
        uow.restore.insert_episode_link(ada, said)
        uow.restore.ensure_own_alias([ada, hal])
        was = Entity(0, "Countess", "person", None, 2, 1.0, "extraction", 5.0, 5.0, project, 0,
                     "t1")  # fmt: skip
        merge = uow.restore.insert_merge(
            EntityMerge(0, project, 0, "t1", ada, (), "llm", "same person", 40.0,
                        principal="ops", target_notes="old",
                        sources=(MergedSource(was, ("Countess",), (said,)),))
        )  # fmt: skip
        e = uow.graph.get_entity(ada, "t1")
        m = uow.graph.get_merge(merge, "t1")
        own = uow.graph.list_aliases(hal, None, 10)
        return (
            (e.name, e.type, e.notes, e.mention_count, e.confidence, e.source, e.last_seen_at,
             e.created_at, e.project_id == project, e.session_id, e.tenant, e.aliases,
             e.resolution, ada != 777),
            [(a.name, a.norm, a.method, a.score, a.episode_id == said, a.created_at)
             for a in uow.graph.list_aliases(ada, None, 10)],
            [(a.name, a.method, a.created_at > 0) for a in own],
            uow.graph.entities_with_key((project, 0), name_key("Ada Lovelace", "person"),
                                        ["person"]) == [ada],
            uow.graph.episode_links_in_project(project, None, 10) == [(ada, said)],
            (m.target_id == ada, m.method, m.reason, m.created_at, m.principal, m.target_notes,
             m.sources == (MergedSource(was, ("Countess",), (said,)),)),
        )  # fmt: skip

    entity, aliases, own, indexed, linked, merge = await run(case)
    assert entity == (
        "Ada", "person", "n", 4, 0.5, "extraction", 30.0, 10.0, True, 0, "t1",
        ("Ada", "Ada Lovelace"), PENDING, True,
    )  # fmt: skip
    assert aliases == [
        ("Ada", name_key("Ada", "person"), "exact", 1.0, False, 12.0),
        ("Ada Lovelace", name_key("Ada Lovelace", "person"), "llm", 0.8, True, 15.0),
    ]
    assert own == [("HAL", METHOD_NEW, True)]
    assert (indexed, linked) == (True, True)
    assert merge == (True, "llm", "same person", 40.0, "ops", "old", True)
