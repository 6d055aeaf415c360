"""The erasure repository's contract for what a removal reads of the graph
and deletes (tests/fakes.py, FakeErasures): the graph an episode touched
(its links, aliases, evidence and facts), the aliases it may leave behind,
the bulk deletes of episodes, sessions, memories and entities with what the
store's foreign keys take with them, and a project being deleted. The same
cases on the fake, SQLite and PostgreSQL (the ``run`` fixture,
tests/integration/store/conftest.py); where the store leaves an order to the
database, a case compares sets."""

from __future__ import annotations

import math

from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Alias, Counts
from nexus_grpc.core.graph import ASSERT, EntityMerge, Interval
from nexus_grpc.core.models import JobState, MemoryKind, NewEpisode, Tier
from nexus_grpc.core.records import (
    UPDATE,
    ChangedBy,
    EventFilter,
    SelectionAnswer,
    SelectionKey,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.errors import NotFound
from tests.integration.store.memory_values import memory_values


def _queued(uow, kind: str) -> list[int]:
    return sorted(uow.jobs.queued_targets(kind))


def _talk(uow):
    """Project p's session s (episodes e1 and e2, made at 100 and 200) and a
    loose session (e3, at 300). Priya (extraction, from e1, mentioned again
    by e2) lives in Porto (from e1, linked to e3 too); e1 gave Priya the
    alias "Raman" and the fact, which it asserted."""
    p = uow.projects.insert({"name": "p"}, "t1").id
    s = uow.sessions.insert("s", "", p, {}, "t1").id
    loose = uow.sessions.insert("loose", "", 0, {}, "t1").id
    e1, e2 = uow.episodes.insert_many(
        [NewEpisode(s, "met Priya in Porto", "", {}, "r1", 100.0, created_at=100.0),
         NewEpisode(s, "Priya called", "", {}, None, 200.0, created_at=200.0)]
    )  # fmt: skip
    [e3] = uow.episodes.insert_many([NewEpisode(loose, "the city", "", {}, None, 300.0,
                                                created_at=300.0)])  # fmt: skip
    graph = (p, 0)
    priya = uow.graph.insert_entity(
        graph, "Priya", "person", "a chemist", source="extraction", episode_id=e1
    )
    porto = uow.graph.insert_entity(graph, "Porto", "place", None, source="extraction",
                                    episode_id=e1)  # fmt: skip
    uow.graph.mention(priya, None, episode_id=e2)
    uow.graph.mention(porto, None, episode_id=e3)
    uow.graph.add_alias(priya, "Raman", method="exact", episode_id=e1)
    evidence = uow.graph.add_evidence(priya, porto, "lives_in", ASSERT, 100.0, episode_id=e1)
    uow.graph.write_intervals(
        priya, "lives_in", [Interval(porto, 100.0, asserted_by=e1, mentions=1)]
    )
    return (p, s, loose), (e1, e2, e3), (priya, porto), evidence


async def test_the_graph_an_episode_touched_is_read_before_it_goes(run):
    def case(uow):
        (p, s, loose), (e1, e2, e3), (priya, porto), evidence = _talk(uow)
        store = uow.erasures
        mentions, aliases, said, facts = store.graph_of_episodes([e1, 999])
        fallout = store.episode_fallout([e1, e3])
        return (
            (p, s, loose, e1, e2, e3, priya, porto, evidence),
            ([(m.entity_id, m.episode_id) for m in mentions],
             [(a.entity_id, a.name, a.episode_id) for a in aliases],
             [(v.id, v.from_id, v.to_id, v.label, v.episode_id) for v in said],
             len(facts)),
            (fallout.groups, fallout.linked,
             [(a.entity_id, a.name) for a in fallout.aliases], fallout.first_seen),
            store.graph_of_episodes([e3])[1:],
            store.episode_fallout([]),
        )  # fmt: skip

    made, of_e1, fallout, of_e3, none = await run(case)
    p, s, loose, e1, e2, e3, priya, porto, evidence = made
    assert of_e1 == (
        [(priya, e1), (porto, e1)],
        [(priya, "Priya", e1), (porto, "Porto", e1), (priya, "Raman", e1)],
        [(evidence, priya, porto, "lives_in", e1)],
        1,
    )
    groups, linked, aliases, first_seen = fallout
    assert groups == {(priya, "lives_in")}
    assert linked == {priya: 1, porto: 2}
    assert aliases == [(priya, "Priya"), (porto, "Porto"), (priya, "Raman")]
    # Each session's project (0: none) and its earliest erased episode's time.
    assert first_seen == {s: (p, 100.0), loose: (0, 300.0)}
    assert of_e3 == ([], [], [])
    assert (none.groups, none.linked, none.aliases, none.first_seen) == (set(), {}, [], {})


async def test_an_alias_an_erased_episode_gave_is_kept_where_others_still_name_it(run):
    def case(uow):
        _, (e1, e2, e3), (priya, porto), _ = _talk(uow)
        store = uow.erasures
        by_name = {a.name: a for x in (priya, porto) for a in uow.graph.list_aliases(x, None, 9)}
        given = [Alias(a.id, a.entity_id, a.name) for a in by_name.values()]
        still = store.aliases_still_given(given, [e1])
        unclaimed = [a for a in given if a.id not in still]
        last = store.last_names(unclaimed, [e1])
        none_left = store.last_names(unclaimed, [e1, e3])
        store.give_alias(by_name["Porto"].id, e3)
        gone = (store.delete_aliases([by_name["Raman"].id, 999]), store.delete_aliases([]))
        left = {a.name: a.episode_id for x in (priya, porto)
                for a in uow.graph.list_aliases(x, None, 9)}  # fmt: skip
        ids = {name: a.id for name, a in by_name.items()}
        return (e1, e2, e3), ids, still, last, none_left, gone, left

    (e1, e2, e3), ids, still, last, none_left, gone, left = await run(case)
    # e2 says "Priya"; nobody else says "Raman" or "Porto".
    assert still == {ids["Priya"]: e2}
    # Porto would be left with no name while e3 still mentions it: its name stays.
    assert last == {ids["Porto"]: e3}
    assert none_left == {}
    assert gone == (1, 0)
    assert left == {"Priya": e1, "Porto": e3}


async def test_facts_and_entities_nothing_holds_up_any_more_are_found(run):
    def case(uow):
        (p, _, _), _, (priya, porto), _ = _talk(uow)
        graph = (p, 0)
        ghost = uow.graph.insert_entity(graph, "Ghost", "person", "n", source="extraction")
        kept = uow.graph.insert_entity(graph, "Kept", "person", None, source="manual")
        ended = uow.graph.insert_entity(graph, "Lisbon", "place", None, source="extraction")
        uow.graph.add_evidence(kept, ended, "visited", ASSERT, 5.0)
        uow.graph.write_intervals(priya, "knows", [Interval(kept, 1.0), Interval(ghost, 2.0)])
        store = uow.erasures
        counted = (
            store.count_facts({(priya, "lives_in"), (priya, "knows"), (porto, "lives_in")}),
            store.count_facts([]),
        )
        unsupported = sorted(store.unsupported_entities([priya, porto, ghost, kept, ended, 999]))
        store.clear_entity_notes([priya, ghost])
        store.clear_entity_notes([])
        notes = [uow.graph.get_entity(i).notes for i in (priya, ghost, porto)]
        return (ghost,), counted, unsupported, notes, store.unsupported_entities([])

    (ghost,), counted, unsupported, notes, none = await run(case)
    assert counted == (3, 0)
    # Made by hand, or held up by evidence at either end: not unsupported.
    assert unsupported == [ghost]
    assert notes == [None, None, None]
    assert none == []


async def test_merges_touching_an_entity_are_forgotten_and_entities_go_with_their_rows(run):
    def case(uow):
        (p, _, _), (e1, _, _), (priya, porto), _ = _talk(uow)
        graph = (p, 0)
        a, b, c = (uow.graph.insert_entity(graph, n, "thing", None, source="manual")
                   for n in ("A", "B", "C"))  # fmt: skip
        uow.graph.add_distinction(priya, a, e1)
        merges = [
            uow.graph.insert_merge(EntityMerge(0, p, 0, "t1", a, (b,), "manual", "", 1.0)),
            uow.graph.insert_merge(EntityMerge(0, p, 0, "t1", c, (b, porto), "manual", "", 2.0)),
            uow.graph.insert_merge(EntityMerge(0, p, 0, "t1", porto, (), "manual", "", 3.0)),
            uow.graph.insert_merge(EntityMerge(0, p, 0, "t1", c, (a,), "manual", "", 4.0)),
        ]
        uow.jobs.enqueue(jobs.RESOLVE_ENTITY, [priya, a])
        store = uow.erasures
        dropped = (store.drop_merges_touching([porto]), store.drop_merges_touching([]))
        left = [m.id for m in uow.graph.list_merges(graph, 0, None, 10, "t1")]
        counts = store.delete_entities([priya, 999])
        after = (
            sorted(uow.graph.get_entities([priya, porto, a])),
            uow.graph.list_relationships(porto, True),
            uow.graph.evidence_of(priya, "lives_in"),
            sorted(uow.graph.candidate_rows([a])[0].distinct_from),
            uow.jobs.pending_count(jobs.RESOLVE_ENTITY),
            store.delete_entities([]),
        )
        return (porto, a, merges), dropped, left, counts, after

    (porto, a, merges), dropped, left, counts, after = await run(case)
    assert dropped == (2, 0)
    assert left == [merges[0], merges[3]]
    assert counts == Counts(entities=1, aliases=2, facts=1, evidence=1, vectors=1,
                            jobs_cancelled=1)  # fmt: skip
    assert after == ([porto, a], [], [], [], 1, Counts())


def _link_everything(uow, e1, e2, priya, porto, p, s):
    """What hangs on e1: an event, formation candidates, a distinction, a
    memory it formed and one it changed, its pending extraction and
    formation (its index job is not cancelled), and it is indexed."""
    uow.events.insert(e1, s, p, 1)
    uow.events.insert(e2, s, p, 1)
    uow.memories.put_candidates(e1, [{"content": "x"}])
    uow.graph.add_distinction(priya, porto, e1)
    formed = uow.memories.insert(
        memory_values(source="formation", source_episode_id=e1), None, "t1"
    )
    changed = uow.memories.insert(memory_values(), None, "t1")
    uow.memories.record(changed, UPDATE, ["content"], ChangedBy(episode_id=e1))
    uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [e1, e2])
    uow.jobs.enqueue(jobs.FORM_MEMORIES, [e1])
    uow.jobs.enqueue(jobs.INDEX_EPISODE, [e1])
    uow.episodes.set_embed_state([e1], JobState.DONE)
    return formed.id, changed.id


async def test_an_episode_goes_with_what_hangs_on_it_and_names_of_it_are_cleared(run):
    def case(uow):
        (p, s, _), (e1, e2, e3), (priya, porto), _ = _talk(uow)
        formed, changed = _link_everything(uow, e1, e2, priya, porto, p, s)
        counts = uow.erasures.delete_episodes([e1], whole_sessions=False)
        graph = uow.graph
        aliases = sorted((a.name, a.episode_id) for x in (priya, porto)
                         for a in graph.list_aliases(x, None, 9))  # fmt: skip
        fact = graph.list_relationships(priya, False)[0]
        left = (
            sorted(uow.episodes.get_many([e1, e2, e3])),
            [graph.get_entity(i).mention_count for i in (priya, porto)],
            aliases,
            (fact.asserted_by, graph.evidence_of(priya, "lives_in")),
            graph.candidate_rows([priya])[0].distinct_from,
            uow.memories.get(formed).source_episode_id,
            uow.memories.last(changed).episode_id,
            uow.memories.candidates_of(e1),
            [ev.episode_id for ev in uow.events.page_after(0, EventFilter(), 10)],
            (_queued(uow, jobs.EXTRACT_EPISODE), _queued(uow, jobs.FORM_MEMORIES),
             _queued(uow, jobs.INDEX_EPISODE)),
            uow.erasures.delete_episodes([], whole_sessions=True),
        )  # fmt: skip
        return (e1, e2, e3), counts, left

    (e1, e2, e3), counts, left = await run(case)
    assert counts == Counts(
        episodes=1, extraction_events=1, formation_candidates=1, evidence=1, mentions=2,
        vectors=1, jobs_cancelled=2,
    )  # fmt: skip
    (episodes, mentioned, aliases, fact, distinct, formed_from, changed_by, candidates, events,
     pending, none) = left  # fmt: skip
    assert episodes == [e2, e3]
    assert mentioned == [1, 1]
    # A row that named the episode keeps its row without it (the history's is a plain id).
    assert aliases == [("Porto", None), ("Priya", None), ("Raman", None)]
    assert fact == (None, [])
    assert distinct == frozenset()
    assert (formed_from, changed_by, candidates) == (None, e1, None)
    assert events == [e2]
    assert pending == ([e2], [], [e1])
    assert none == Counts()


async def test_sessions_go_with_their_summaries_task_memories_own_graph_and_records(run):
    def case(uow):
        (p, s, loose), (e1, e2, e3), _, _ = _talk(uow)
        own = uow.graph.insert_entity((0, loose), "Mine", "thing", None, source="manual")
        uow.graph.insert_entity((0, s), "Not loose", "thing", None, source="manual")
        for session in (s, loose):
            uow.summaries.insert(session_id=session, project_id=p, content="sum")
        overview = uow.summaries.insert(session_id=0, project_id=p, content="all").id
        task = uow.memories.insert(memory_values(tier=int(Tier.TASK), session_id=loose), None, "t1")
        uow.memories.insert(
            memory_values(tier=int(Tier.TASK), session_id=loose, kind=int(MemoryKind.PROJECT)),
            None, "t1",
        )  # fmt: skip
        uow.memories.insert(memory_values(tier=int(Tier.LONGTERM), session_id=loose), None, "t1")
        uow.memories.record(task, UPDATE, ["content"], ChangedBy())
        uow.memories.record_usage("th", UsageOwner("ann", 0, "t1"), "x",
                                  [UsageRecord(task.id, 0.5, 1)])  # fmt: skip
        uow.events.insert(e3, loose, 0, 1)
        uow.events.insert(0, loose, 0, 2)
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [loose, s])
        uow.jobs.enqueue(jobs.EXPIRE_MEMORY, [task.id])
        store = uow.erasures
        store.delete_episodes([e3], whole_sessions=True)
        counts = store.delete_sessions([loose, 999])
        left = (
            sorted(s_.id for s_ in uow.sessions.list_page(None, 10, 0)),
            uow.graph.entity_graph(own),
            sorted(
                r.session_id for r in uow.summaries.list_for_project(p, None, 10) if r.session_id
            ),
            uow.summaries.find(overview) is not None,
            len(uow.memories.list_in_project(0, None, None, 10, 0.0)),
            uow.memories.page(task.id, None, 10),
            _queued(uow, jobs.SUMMARIZE_SESSION),
            uow.events.page_after(0, EventFilter(), 10),
            store.delete_sessions([]),
        )
        return (s,), counts, left

    (s,), counts, left = await run(case)
    assert counts == Counts(
        sessions=1, summaries_removed=1, entities=1, memories=2, memory_history=1,
        memory_usage=1, vectors=2, jobs_cancelled=2, extraction_events=1,
    )  # fmt: skip
    sessions, own, summarised, overview, memories, history, pending, events, none = left
    assert sessions == [s]
    assert own is None
    assert summarised == [s]
    assert overview
    # The loose session's LONGTERM memory stays: only its TASK tier goes.
    assert memories == 1
    assert history == []
    assert pending == [s]
    assert events == []
    assert none == Counts()


async def test_memories_go_with_their_history_uses_and_pending_upkeep(run):
    def case(uow):
        gone, kept = (
            uow.memories.insert(memory_values(project_id=5), None, "t1") for _ in range(2)
        )
        for m in (gone, kept):
            uow.memories.record(m, UPDATE, ["content"], ChangedBy())
            uow.memories.record_usage("th", UsageOwner("ann", 5, "t1"), "x",
                                      [UsageRecord(m.id, 0.5, 1)])  # fmt: skip
        uow.memories.record(gone, UPDATE, ["title"], ChangedBy())
        uow.jobs.enqueue(jobs.EXPIRE_MEMORY, [gone.id, kept.id])
        uow.jobs.enqueue(jobs.PURGE_MEMORY_HISTORY, [gone.id])
        uow.jobs.enqueue(jobs.INDEX_MEMORY, [gone.id])
        store = uow.erasures
        counts = store.delete_memories([gone.id, 999])
        left = (
            sorted(uow.memories.get_many([gone.id, kept.id])),
            (len(uow.memories.page(gone.id, None, 9)), len(uow.memories.page(kept.id, None, 9))),
            [u.memory_id for u in store.user_usage("t1", "ann", 0, 10)],
            (_queued(uow, jobs.EXPIRE_MEMORY), _queued(uow, jobs.PURGE_MEMORY_HISTORY),
             _queued(uow, jobs.INDEX_MEMORY)),
            store.delete_memories([]),
        )  # fmt: skip
        return (gone.id, kept.id), counts, left

    (gone, kept), counts, left = await run(case)
    assert counts == Counts(
        memories=1, memory_history=2, memory_usage=1, vectors=1, jobs_cancelled=2
    )
    # Its index job is the caller's, to take its point out of the index.
    assert left == ([kept], (0, 1), [kept], ([kept], [], [gone]), Counts())


async def test_a_project_being_deleted_is_hidden_then_its_records_and_row_go(run):
    def case(uow):
        (p, s, _), (e1, e2, _), _, _ = _talk(uow)
        other = uow.projects.insert({"name": "q"}, "t1").id
        overview = uow.summaries.insert(session_id=0, project_id=p, content="all").id
        memory = uow.memories.insert(memory_values(project_id=p), None, "t1")
        uow.memories.record_usage("th", UsageOwner("ann", p, "t1"), "x",
                                  [UsageRecord(memory.id, 0.5, 1)])  # fmt: skip
        uow.memories.record_usage("th", UsageOwner("ann", other, "t1"), "x",
                                  [UsageRecord(memory.id, 0.5, 1)])  # fmt: skip
        answer = SelectionAnswer([], "llm", "", 0)
        for project in (p, other):
            uow.memories.insert_selection(SelectionKey("t1", "ann", project, "d"), "x", answer)
        uow.events.insert(e1, s, p, 1)
        uow.events.insert(0, 0, other, 1)
        uow.jobs.enqueue(jobs.RETAIN_PROJECT, [p, other])
        store = uow.erasures
        store.mark_project_deleting(p, 42)

        def hidden(read, *args, **kwargs) -> bool:
            try:
                read(*args, **kwargs)
            except NotFound:
                return True
            return False

        seen = (
            hidden(uow.projects.get, p), uow.projects.exists(p), uow.projects.tenant_of(p),
            [x.id for x in uow.projects.list_page(None, 10, "t1")],
            hidden(uow.sessions.get, s), hidden(uow.sessions.get, s, "t1"),
            [x.id for x in uow.sessions.list_page(None, 10, p)],
            hidden(uow.episodes.get, e2, "t1"), uow.episodes.retention_cutoff(s, 1000.0),
            uow.projects.insert({"name": "p"}, "t1").name,
        )  # fmt: skip
        records = store.delete_project_records(p)
        store.delete_episodes([e1, e2], whole_sessions=True)
        store.delete_sessions([s])
        store.delete_memories([memory.id])
        rows = (store.delete_project_row(p), store.delete_project_row(p))
        return (
            other,
            seen,
            records,
            rows,
            (
                uow.summaries.find(overview),
                [ev.project_id for ev in uow.events.page_after(0, EventFilter(), 10)],
                _queued(uow, jobs.RETAIN_PROJECT),
                uow.erasures.delete_project_records(p),
            ),
        )

    other, seen, records, rows, after = await run(case)
    assert seen[:8] == (True, False, None, [other], True, True, [], True)
    assert seen[8] == math.inf
    # Its name is the tenant's to take again at once.
    assert seen[9] == "p"
    assert records == Counts(extraction_events=1, selections=1, memory_usage=1, jobs_cancelled=1)
    assert rows == (1, 0)
    # Its overviews go with its row.
    assert after == (None, [other], [other], Counts())
