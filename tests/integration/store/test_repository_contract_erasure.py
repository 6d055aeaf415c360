"""The erasure repository's contract, as far as the fakes keep it (receipts,
what a user or a project holds, what goes with episodes and memories, the
user's records; tests/fakes.py, FakeErasures): the same cases on the fake,
SQLite and PostgreSQL (the ``run`` fixture, tests/integration/store/conftest.py).
Where the store leaves an order to the database, a case compares sets."""

from __future__ import annotations

import time
from dataclasses import replace

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Counts, Target
from nexus_grpc.core.llm_usage import LLMCall
from nexus_grpc.core.models import MemoryKind, NewEpisode, Tier
from nexus_grpc.core.records import (
    UPDATE,
    ChangedBy,
    Memory,
    SelectionAnswer,
    SelectionKey,
    Summary,
    UsageOwner,
    UsageRecord,
)
from tests.integration.store.memory_values import memory_values


async def test_receipts_are_kept_paged_newest_first_and_a_finished_users_digest_remembered(run):
    def case(uow):
        store = uow.erasures
        ann = store.start(Target("t1", e.USER, "ann"), "d-ann", "key-a")
        project = store.start(Target("t1", e.PROJECT, project_id=7), "", "key-b")
        elsewhere = store.start(Target("t2", e.USER, "ann", 3), "d-ann", "key-c")
        again = store.start(Target("t1", e.USER, "ann", 3), "d-ann", "key-a")
        running = [r.id for r in store.running_for("t1", "d-ann")]
        store.save(
            replace(
                ann, state=e.DONE, phase=e.FINISHED, user_id="", finished_at=123.0,
                counts=Counts(sessions=2, episodes=0), planned=Counts(memories=1),
                carry={"overviews": {"7": 1.5}}, tenant="changed", principal="changed",
            )
        )  # fmt: skip
        store.save(replace(again, state=e.DONE))
        store.save(replace(elsewhere, state=e.DONE))
        store.save(replace(project, state=e.DONE))
        done = store.get(ann.id)
        pages = [
            [r.id for r in store.page(None, None, None, 10)],
            [r.id for r in store.page("t1", None, None, 10)],
            [r.id for r in store.page("t1", "d-ann", None, 10)],
            [r.id for r in store.page(None, None, again.id, 2)],
        ]
        return (
            (ann, project, elsewhere, again),
            running,
            store.running_for("t1", "d-ann"),
            (done.tenant, done.kind, done.state, done.phase, done.user_id, done.project_id,
             done.counts, done.planned, done.carry, done.principal,
             done.started_at == ann.started_at, done.finished_at),
            pages,
            store.forgotten("t1") == {"d-ann": max(ann.started_at, again.started_at)},
            store.forgotten("t3"),
            (store.digest_of(ann.id), store.digest_of(project.id), store.digest_of(999)),
            store.get(999),
        )  # fmt: skip

    (made, running, none_left, done, pages, forgotten, nobody, digests, missing) = await run(case)
    ann, project, elsewhere, again = made
    assert (ann.state, ann.phase, ann.user_id, ann.project_id, ann.principal) == (
        e.RUNNING, e.PLANNED, "ann", 0, "key-a",
    )  # fmt: skip
    assert (ann.counts, ann.finished_at) == (Counts(), None)
    assert running == [ann.id, again.id]
    assert none_left == []
    # A save changes what a step changes; who and when it began stay.
    assert done == (
        "t1", e.USER, e.DONE, e.FINISHED, "", 0, Counts(sessions=2), Counts(memories=1),
        {"overviews": {"7": 1.5}}, "key-a", True, 123.0,
    )  # fmt: skip
    assert pages == [
        [again.id, elsewhere.id, project.id, ann.id],
        [again.id, project.id, ann.id],
        [again.id, ann.id],
        [elsewhere.id, project.id],
    ]
    assert (forgotten, nobody) == (True, {})
    assert digests == ("d-ann", "", "")
    assert missing is None


async def test_a_buried_request_id_names_the_first_erasure_that_took_it(run):
    def case(uow):
        first = uow.erasures.start(Target("t1", e.USER, "ann"), "d", "").id
        second = uow.erasures.start(Target("t1", e.USER, "bob"), "d2", "").id
        uow.erasures.bury_requests(["r1", "r2"], first)
        uow.erasures.bury_requests(iter(["r2", "r3"]), second)
        return (first, second), [uow.erasures.buried(d) for d in ("r1", "r2", "r3", "r4")]

    (first, second), buried = await run(case)
    assert buried == [first, first, second, None]


def _people(uow, now: float):
    """Tenant t1's projects p and q, and t2's r. ann has a session in p (an
    hour old) and in q; bob has one in p, where an episode was written acting
    for ann (an hour old) and one for himself; t2 has its own ann."""
    p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
    r = uow.projects.insert({"name": "r"}, "t2").id
    ann_p = uow.restore.insert_session("ann-p", "", p, {}, now - 3600, "t1", user_id="ann")
    ann_q = uow.sessions.insert("ann-q", "", q, {}, "t1", user_id="ann").id
    bob_p = uow.sessions.insert("bob-p", "", p, {}, "t1", user_id="bob").id
    ann_r = uow.sessions.insert("ann-r", "", r, {}, "t2", user_id="ann").id
    episodes = {
        "ann-p": [uow.episodes.insert(ann_p, f"a{i}", "", {}, f"req-{i}").id for i in range(3)],
        "ann-q": [uow.episodes.insert(ann_q, "q", "", {}, None).id],
        "bob-p": uow.episodes.insert_many(
            [
                NewEpisode(
                    bob_p, "for ann", "", {}, "req-b", created_at=now - 3600, acts_for="ann"
                ),
                NewEpisode(bob_p, "for bob", "", {}, None, acts_for="bob"),
            ]
        ),  # fmt: skip
        "ann-r": [uow.episodes.insert(ann_r, "r", "", {}, "req-r", acts_for="ann").id],
    }
    sessions = {"ann-p": ann_p, "ann-q": ann_q, "bob-p": bob_p, "ann-r": ann_r}
    return (p, q, r), sessions, episodes


async def test_what_a_user_holds_is_read_in_their_tenant_whole_or_in_one_project(run):
    def case(uow):
        now = time.time()
        (p, q, r), sessions, episodes = _people(uow, now)
        old = Memory(0, int(MemoryKind.USER), "old", "c", int(Tier.LONGTERM), p,
                     user_id="ann", created_at=now - 3600, updated_at=now - 3600)  # fmt: skip
        memories = {
            "p-old": uow.restore.insert_memory(old, "t1"),
            "p": uow.memories.insert(memory_values(project_id=p), "m-1", "t1").id,
            "q": uow.memories.insert(memory_values(project_id=q), None, "t1").id,
            "r": uow.memories.insert(memory_values(project_id=r), None, "t2").id,
            "bob": uow.memories.insert(memory_values(project_id=p, user_id="bob"), None, "t1").id,
            "of p": uow.memories.insert(
                memory_values(project_id=p, kind=int(MemoryKind.PROJECT), user_id="carol"),
                None,
                "t1",
            ).id,
        }
        used = [UsageRecord(memories[k], 0.5, 1) for k in ("p", "q", "bob")]
        uow.memories.record_usage("th", UsageOwner("ann", p, "t1"), "x", used)
        uow.memories.record_usage("th", UsageOwner("ann", q, "t1"), "x", used[1:2])
        uow.memories.record_usage(
            "th", UsageOwner("ann", r, "t2"), "x", [UsageRecord(memories["r"], 0.5, 1)]
        )
        answer = SelectionAnswer([], "llm", "", 0)
        for key in (("t1", "ann", p, "s1"), ("t1", "ann", q, "s2"), ("t2", "ann", r, "s3")):
            uow.memories.insert_selection(SelectionKey(*key), "digest", answer)
        store = uow.erasures
        reads = {
            "sessions": [store.user_sessions("t1", "ann", 0, 10),
                         store.user_sessions("t1", "ann", p, 10),
                         store.user_sessions("t1", "ann", 0, 1, after=sessions["ann-p"]),
                         store.user_sessions("t2", "ann", 0, 10)],
            "episodes": [store.episodes_in_sessions([sessions["ann-p"], sessions["ann-q"]], 10),
                         store.episodes_in_sessions([sessions["ann-p"]], 2,
                                                    after=episodes["ann-p"][0]),
                         store.episodes_in_sessions([], 10)],
            "elsewhere": [store.user_episodes_elsewhere("t1", "ann", 0, 10),
                          store.user_episodes_elsewhere("t1", "ann", q, 10),
                          store.user_episodes_elsewhere("t1", "bob", 0, 10),
                          store.user_episodes_elsewhere("t2", "ann", 0, 10)],
            "memories": [store.user_memories("t1", "ann", 0, 10),
                         store.user_memories("t1", "ann", q, 10),
                         store.user_memories("t1", "ann", 0, 1, after=memories["p-old"])],
            "usage": [[(u.memory_id, u.thread_id) for u in store.user_usage("t1", "ann", 0, 10)],
                      [u.memory_id for u in store.user_usage("t1", "ann", q, 10)],
                      [u.memory_id for u in store.user_usage("t2", "ann", 0, 10)]],
        }  # fmt: skip
        first = store.user_usage("t1", "ann", 0, 1)
        reads["usage"].append(
            [u.memory_id for u in store.user_usage("t1", "ann", 0, 10, first[0].id)]
        )
        holds = [store.user_holds("t1", "ann", 0), store.user_holds("t1", "ann", p),
                 store.user_holds("t2", "ann", 0), store.user_holds("t1", "nobody", 0)]  # fmt: skip
        return (p, q, r), sessions, episodes, memories, reads, holds

    (p, q, r), sessions, episodes, memories, reads, holds = await run(case)
    assert reads["sessions"] == [
        [sessions["ann-p"], sessions["ann-q"]], [sessions["ann-p"]], [sessions["ann-q"]],
        [sessions["ann-r"]],
    ]  # fmt: skip
    assert reads["episodes"] == [
        episodes["ann-p"] + episodes["ann-q"], episodes["ann-p"][1:], [],
    ]  # fmt: skip
    # Written acting for ann in bob's session; ann's own, and t2's, are not elsewhere.
    assert reads["elsewhere"] == [[episodes["bob-p"][0]], [], [], []]
    assert reads["memories"] == [
        [memories["p-old"], memories["p"], memories["q"]], [memories["q"]], [memories["p"]],
    ]  # fmt: skip
    # A use is the tenant's through its memory, in the project it was made in.
    assert reads["usage"] == [
        [(memories["p"], "th"), (memories["q"], "th"), (memories["bob"], "th"),
         (memories["q"], "th")],
        [memories["q"]], [memories["r"]], [memories["q"], memories["bob"], memories["q"]],
    ]  # fmt: skip
    assert holds == [
        Counts(sessions=2, episodes=5, memories=3, memory_usage=4, selections=2),
        Counts(sessions=1, episodes=4, memories=2, memory_usage=3, selections=1),
        Counts(sessions=1, episodes=1, memories=1, memory_usage=1, selections=1),
        Counts(),
    ]


async def test_a_projects_users_and_what_each_held_before_a_time_are_found(run):
    def case(uow):
        now = time.time()
        (p, q, r), sessions, episodes = _people(uow, now)
        old = Memory(0, int(MemoryKind.USER), "old", "c", int(Tier.LONGTERM), p,
                     user_id="dan", created_at=now - 3600, updated_at=now - 3600)  # fmt: skip
        dan_old = uow.restore.insert_memory(old, "t1")
        dan_new = uow.memories.insert(memory_values(project_id=p, user_id="dan"), None, "t1").id
        uow.memories.insert(
            memory_values(project_id=p, kind=int(MemoryKind.PROJECT), user_id="erin"), None, "t1"
        )
        store = uow.erasures
        return (
            (sessions, episodes, dan_old, dan_new),
            [sorted(store.users_in_project(x)) for x in (p, q, r, 999)],
            store.user_rows_before(p, "ann", now - 60),
            store.user_rows_before(p, "ann", now + 60),
            store.user_rows_before(p, "dan", now - 60),
            store.user_rows_before(q, "ann", now - 60),
        )

    made, users, ann_early, ann_late, dan, ann_in_q = await run(case)
    sessions, episodes, dan_old, dan_new = made
    # A session's user, a USER memory's, an episode's acting-for: a PROJECT
    # memory's user is no one the project holds.
    assert users == [["ann", "bob", "dan"], ["ann"], ["ann"], []]
    assert ann_early == ([sessions["ann-p"]], [episodes["bob-p"][0]], [])
    assert ann_late == ([sessions["ann-p"]], [episodes["bob-p"][0]], [])
    assert dan == ([], [], [dan_old])
    assert ann_in_q == ([], [], [])
    assert dan_new not in dan[2]


async def test_what_a_project_holds_is_counted_and_listed_by_id(run):
    def case(uow):
        p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
        mine = [uow.sessions.insert(f"s{i}", "", p, {}, "t1").id for i in range(3)]
        theirs = uow.sessions.insert("other", "", q, {}, "t1").id
        for s in (*mine, mine[0], theirs):
            uow.episodes.insert(s, "x", "", {}, None)
        memories = [
            uow.memories.insert(memory_values(project_id=p), None, "t1").id for _ in range(2)
        ]
        uow.memories.insert(memory_values(project_id=q), None, "t1")
        entities = [
            uow.graph.insert_entity((p, 0), n, "person", None, source="manual")
            for n in ("Ann", "Bo")
        ]
        uow.graph.insert_entity((q, 0), "Cy", "person", None, source="manual")
        store = uow.erasures
        return (
            (mine, memories, entities),
            (store.project_sessions(p, 10), store.project_sessions(p, 2),
             store.project_memories(p, 10), store.project_memories(p, 1),
             store.project_entities(p, 10), store.project_entities(p, 1),
             store.project_sessions(999, 10)),
            store.project_holds(p), store.project_holds(999),
        )  # fmt: skip

    (mine, memories, entities), listed, holds, none = await run(case)
    assert listed == (mine, mine[:2], memories, memories[:1], entities, entities[:1], [])
    assert holds == Counts(sessions=3, episodes=4, memories=2, entities=2)
    assert none == Counts()


async def test_the_request_ids_and_formed_memories_of_what_goes_are_found(run):
    def case(uow):
        now = time.time()
        _, sessions, episodes = _people(uow, now)
        said = episodes["ann-p"]
        formed = uow.memories.insert(
            memory_values(source="formation", source_episode_id=said[0]), "m-1", "t1"
        )
        changed = uow.memories.insert(memory_values(), None, "t1")
        uow.memories.record(changed, UPDATE, ["content"], ChangedBy(episode_id=said[1]))
        gone = uow.memories.insert(memory_values(), None, "t1")
        uow.memories.record(gone, UPDATE, ["content"], ChangedBy(episode_id=said[1]))
        uow.memories.delete(gone.id)
        other = uow.memories.insert(memory_values(), "m-2", "t2")
        store = uow.erasures
        return (
            (sessions, episodes, formed.id, changed.id, other.id),
            sorted(store.episode_requests([*said, *episodes["bob-p"], *episodes["ann-q"], 999])),
            sorted(store.episode_requests(episodes["ann-r"])),
            sorted(store.memories_formed_from(said)),
            sorted(store.memories_formed_from([said[2], 999])),
            sorted(store.memory_request_ids([formed.id, changed.id, other.id, 999])),
        )

    made, requests, theirs, formed, none, memory_requests = await run(case)
    sessions, episodes, formed_id, changed_id, _ = made
    ann_p, bob_p = sessions["ann-p"], sessions["bob-p"]
    assert requests == [
        ("t1", ann_p, "req-0"), ("t1", ann_p, "req-1"), ("t1", ann_p, "req-2"),
        ("t1", bob_p, "req-b"),
    ]  # fmt: skip
    assert theirs == [("t2", sessions["ann-r"], "req-r")]
    # Formed by one, or changed by one; a deleted memory's history names none.
    assert formed == [formed_id, changed_id]
    assert none == []
    assert memory_requests == [("t1", "ann", "m-1"), ("t2", "ann", "m-2")]


async def test_a_summary_written_since_an_episode_is_found_per_session(run):
    def case(uow):
        now = time.time()
        p = uow.projects.insert({"name": "p"}, "t1").id
        a, b, c = (uow.sessions.insert(x, "", p, {}, "t1").id for x in "abc")
        for session, at in ((a, now - 100), (b, now - 10_000), (a, now - 5_000)):
            uow.restore.insert_summary(Summary(0, session, 0, "s", 0, 0, 0, at, at))
        uow.restore.insert_summary(Summary(0, 0, p, "overview", 0, 0, 0, now, now))
        since = {a: (p, now - 200), b: (p, now - 200), c: (p, 0.0)}
        return (a, b, c), (
            uow.erasures.sessions_summarised_since(since),
            uow.erasures.sessions_summarised_since({b: (p, now - 20_000), a: (p, now)}),
            uow.erasures.sessions_summarised_since({}),
        )

    (a, b, c), found = await run(case)
    assert found == ([a], [b], [])


async def test_a_users_records_go_in_their_scope_and_their_llm_calls_lose_the_link(run):
    def case(uow):
        mine = uow.memories.insert(memory_values(project_id=5), None, "t1").id
        theirs = uow.memories.insert(memory_values(project_id=5), None, "t2").id
        for owner, used in (
            (UsageOwner("ann", 5, "t1"), mine), (UsageOwner("ann", 6, "t1"), mine),
            (UsageOwner("bob", 5, "t1"), mine), (UsageOwner("ann", 5, "t2"), theirs),
        ):  # fmt: skip
            uow.memories.record_usage("th", owner, "x", [UsageRecord(used, 0.5, 1)])
        answer = SelectionAnswer([], "llm", "", 0)
        for key in (("t1", "ann", 5, "a"), ("t1", "ann", 6, "b"), ("t1", "bob", 5, "c"),
                    ("t2", "ann", 5, "d")):  # fmt: skip
            uow.memories.insert_selection(SelectionKey(*key), "digest", answer)
        uow.usage.insert(
            [LLMCall("extraction", project, tenant, 10, 1, 0.5, "ok", 100.0 + n, user_id=user)
             for n, (project, tenant, user) in enumerate(
                 ((5, "t1", "ann"), (6, "t1", "ann"), (5, "t1", "bob"), (5, "t2", "ann")))]
        )  # fmt: skip
        store = uow.erasures
        in_project = (
            store.delete_user_usage("t1", "ann", 5),
            store.delete_user_selections("t1", "ann", 5),
            store.unlink_llm_calls("t1", "ann", 5),
            store.user_holds("t1", "ann", 0),
            uow.usage.spent_by_users(0.0, "t1"),
        )
        everywhere = (
            store.delete_user_usage("t1", "ann", 0),
            store.delete_user_selections("t1", "ann", 0),
            store.unlink_llm_calls("t1", "ann", 0),
            store.user_holds("t1", "ann", 0),
            uow.usage.spent_by_users(0.0, "t1"),
        )
        return in_project, everywhere, (
            store.user_holds("t1", "bob", 0), store.user_holds("t2", "ann", 0),
            uow.usage.spent_by_users(0.0, "t2"), uow.usage.spent(0.0, ["t1"]),
        )  # fmt: skip

    in_project, everywhere, others = await run(case)
    assert in_project == (
        1, 1, 1, Counts(memories=1, memory_usage=1, selections=1), {"ann": 11, "bob": 11},
    )  # fmt: skip
    assert everywhere == (1, 1, 1, Counts(memories=1), {"bob": 11})
    # Another user's, and another tenant's, are left; the tenant's spend is kept.
    assert others == (
        Counts(memory_usage=1, selections=1),
        Counts(memory_usage=1, selections=1, memories=1),
        {"ann": 11},
        {"t1": 33},
    )


async def test_index_work_still_to_run_is_counted_up_to_a_time(run):
    def case(uow):
        session = uow.sessions.insert("s", "", 0, {}, "t1").id
        episodes = [uow.episodes.insert(session, "x", "", {}, None).id for _ in range(3)]
        memory = uow.memories.insert(memory_values(), None, "t1").id
        uow.jobs.enqueue(jobs.INDEX_EPISODE, episodes)
        uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory])
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, episodes)  # not index work
        before = time.time() - 3600
        after = time.time() + 3600
        counted = [uow.erasures.index_work_before(before), uow.erasures.index_work_before(after)]
        [claimed] = uow.jobs.claim(jobs.INDEX_EPISODE, 1)
        counted.append(uow.erasures.index_work_before(after))  # a running job is still to run
        uow.jobs.finish([claimed.id])
        counted.append(uow.erasures.index_work_before(after))
        uow.jobs.dead_letter(uow.jobs.claim(jobs.INDEX_MEMORY, 1)[0].id, "gave up")
        counted.append(uow.erasures.index_work_before(after))
        return counted

    assert await run(case) == [0, 4, 4, 3, 2]
