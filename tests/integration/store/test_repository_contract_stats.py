"""The contract of what GetProjectStats and GetUsage count in the store: a
project's figures (``ProjectRepository``'s counts, store/project_stats.py)
and what the LLM work was for (``UsageRepository.activity_buckets``), on the
fake (tests/fakes.py), SQLite and PostgreSQL with the same assertions (the
``run`` fixture, tests/integration/store/conftest.py). Where the store
leaves an order to the database (a GROUP BY), a case compares sets."""

from __future__ import annotations

from nexus_grpc.core.graph import Entity, Interval
from nexus_grpc.core.llm_usage import ActivityBucket
from nexus_grpc.core.models import JobState, MemoryKind, NewEpisode, Tier
from nexus_grpc.core.records import Memory
from tests.integration.store.memory_values import memory_values


async def test_a_projects_sessions_and_episodes_are_counted_as_its_retention_keeps_them(run):
    def case(uow):
        p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
        old = uow.restore.insert_session("old", "", p, {}, 100.0, "t1")
        revived = uow.restore.insert_session("revived", "", p, {}, 100.0, "t1")
        new = uow.restore.insert_session("new", "", p, {}, 1_000.0, "t1")
        uow.restore.insert_session("elsewhere", "", q, {}, 1_000.0, "t1")
        ids = uow.episodes.insert_many(
            [NewEpisode(old, "a", "", {}, None, 150.0),
             NewEpisode(revived, "b", "", {}, None, 150.0),
             NewEpisode(revived, "c", "", {}, None, 900.0),
             NewEpisode(new, "d", "", {}, None, 1_100.0)]
        )  # fmt: skip
        uow.episodes.set_embed_state(ids[:3], JobState.DONE)
        uow.episodes.set_extract_state(ids[2], JobState.FAILED)
        uow.episodes.set_extract_state(ids[3], JobState.DONE)
        uow.episodes.set_memory_state(ids[3], JobState.FAILED)
        uow.episodes.set_memory_state(ids[0], JobState.PENDING)
        projects = uow.projects
        return (
            [projects.count_sessions(x, c) for x, c in ((p, None), (p, 800.0), (p, 2_000.0),
                                                        (q, None), (999, None))],
            [projects.count_episodes(x, c) for x, c in ((p, None), (p, 800.0), (999, None))],
        )  # fmt: skip

    sessions, episodes = await run(case)
    # Since the cutoff: created since, or holding an episode that happened since.
    assert sessions == [3, 2, 0, 1, 0]
    # (episodes, pending work, failed work): embedding, extraction, formation.
    assert episodes == [(4, 4, 2), (2, 1, 2), (0, 0, 0)]


async def test_a_projects_live_memories_are_counted_by_kind_user_and_archive(run):
    def case(uow):
        p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
        for values in (
            memory_values(project_id=p), memory_values(project_id=p),
            memory_values(project_id=p, user_id="bob"),
            memory_values(project_id=p, tier=int(Tier.ARCHIVE)),
            memory_values(project_id=p, tier=int(Tier.SESSION)),
            memory_values(project_id=p, kind=int(MemoryKind.PROJECT), user_id=""),
            memory_values(project_id=p, expire_at=500.0), memory_values(project_id=q),
        ):  # fmt: skip
            uow.memories.insert(values, None, "t1")
        expired = Memory(0, int(MemoryKind.USER), "t", "c", int(Tier.LONGTERM), p,
                         user_id="ann", expire_at=100.0)  # fmt: skip
        uow.restore.insert_memory(expired, "t1")
        return (
            sorted(uow.projects.count_memories(p, 200.0)),
            sorted(uow.projects.count_memories(p, 600.0)),
            uow.projects.count_memories(999, 0.0),
        )

    at_200, at_600, none = await run(case)
    user, project = int(MemoryKind.USER), int(MemoryKind.PROJECT)
    # A group per tier: ann's LONGTERM and SESSION memories are two rows.
    assert at_200 == sorted(
        [(project, "", False, 1), (user, "ann", False, 3), (user, "ann", False, 1),
         (user, "ann", True, 1), (user, "bob", False, 1)]
    )  # fmt: skip
    assert at_600 == sorted(
        [(project, "", False, 1), (user, "ann", False, 2), (user, "ann", False, 1),
         (user, "ann", True, 1), (user, "bob", False, 1)]
    )  # fmt: skip
    assert none == []


async def test_a_projects_graph_is_counted_and_its_most_connected_entities_ranked(run):
    def case(uow):
        p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
        s = uow.sessions.insert("s", "", p, {}, "t1").id
        a, b, c, d = (uow.graph.insert_entity((p, 0), n, "person", None, source="manual")
                      for n in ("Ann", "Bo", "Cy", "Di"))  # fmt: skip
        own = uow.graph.insert_entity((0, s), "Own", "person", None, source="manual")
        other = uow.graph.insert_entity((q, 0), "Far", "person", None, source="manual")
        uow.graph.write_intervals(a, "knows", [Interval(b, 1.0), Interval(c, 2.0, 3.0)])
        uow.graph.write_intervals(c, "knows", [Interval(b, 1.0)])
        uow.graph.write_intervals(d, "likes", [Interval(b, 1.0, 2.0)])
        uow.graph.write_intervals(other, "knows", [Interval(other, 1.0)])
        uow.graph.write_intervals(own, "knows", [Interval(own, 1.0)])
        projects = uow.projects
        return (a, b, c, d), (
            projects.count_graph(p), projects.count_graph(q), projects.count_graph(999),
            projects.most_connected(p, 10), projects.most_connected(p, 2),
            projects.most_connected(999, 5),
        )  # fmt: skip

    (a, b, c, d), (graph, far, none, ranked, top, nobody) = await run(case)
    # Facts that hold now, from the project's own entities.
    assert (graph, far, none) == ((4, 2), (1, 1), (0, 0))
    # Every interval counts, at either end; ties by id.
    assert ranked == [b, a, c, d]
    assert top == [b, a]
    assert nobody == []


async def test_activity_is_bucketed_by_project_or_tenant_and_for_named_users(run):
    def case(uow):
        p, q = (uow.projects.insert({"name": n}, "t1").id for n in "pq")
        r = uow.projects.insert({"name": "r"}, "t2").id
        ann = uow.sessions.insert("ann", "", p, {}, "t1", user_id="ann").id
        bob = uow.sessions.insert("bob", "", q, {}, "t1", user_id="bob").id
        theirs = uow.sessions.insert("r", "", r, {}, "t2", user_id="ann").id
        e_ann = uow.episodes.insert_many(
            [NewEpisode(ann, "x", "", {}, None, created_at=100.0),
             NewEpisode(ann, "y", "", {}, None, created_at=3_700.0)]
        )  # fmt: skip
        [e_bob] = uow.episodes.insert_many([NewEpisode(bob, "z", "", {}, None, created_at=150.0)])
        uow.episodes.insert_many([NewEpisode(theirs, "w", "", {}, None, created_at=100.0)])
        for values, at in (
            (memory_values(project_id=p, source="formation", source_episode_id=e_ann[0]), 200.0),
            (memory_values(project_id=p, kind=int(MemoryKind.PROJECT), user_id="",
                           source="formation", source_episode_id=e_ann[1]), 3_800.0),
            (memory_values(project_id=q, kind=int(MemoryKind.PROJECT), user_id="",
                           source="formation", source_episode_id=e_bob), 300.0),
            (memory_values(project_id=q, user_id="bob", source="client"), 300.0),
            (memory_values(project_id=r, source="formation"), 300.0),
        ):  # fmt: skip
            m = Memory(0, values["kind"], "t", "c", values["tier"], values["project_id"],
                       user_id=values["user_id"], created_at=at, updated_at=at,
                       source=values["source"],
                       source_episode_id=values.get("source_episode_id"))  # fmt: skip
            uow.restore.insert_memory(m, "t2" if values["project_id"] == r else "t1")
        for project, session, name, at, said in (
            (p, 0, "Ann", 250.0, e_ann[0]), (q, 0, "Bo", 3_650.0, e_bob),
            (q, 0, "Cy", 260.0, None), (0, theirs, "Di", 250.0, None),
        ):  # fmt: skip
            entity = Entity(0, name, "person", None, 1, 1.0, "extraction", at, at, project,
                            session)  # fmt: skip
            made = uow.restore.insert_entity(entity, "t2" if session else "t1")
            if said is not None:
                uow.restore.insert_episode_link(made, said)
        usage = uow.usage
        return (
            usage.activity_buckets(0.0, 7_200.0, 3_600.0, project_id=p),
            usage.activity_buckets(0.0, 7_200.0, 3_600.0, tenant="t1"),
            usage.activity_buckets(0.0, 3_600.0, 3_600.0, tenant="t1", users=["bob"]),
            usage.activity_buckets(0.0, 7_200.0, 3_600.0, tenant="t1", users=[]),
            usage.activity_buckets(0.0, 7_200.0, 3_600.0, tenant="t2"),
        )

    project, tenant, bob, nobody, other = await run(case)
    assert project == [ActivityBucket(0, 1, 1, 1), ActivityBucket(1, 1, 1, 0)]
    assert tenant == [ActivityBucket(0, 2, 2, 2), ActivityBucket(1, 1, 1, 1)]
    # bob's session's episode and the PROJECT memory formed from it, not the
    # memory the client wrote; no entity his episodes mention in this hour.
    assert bob == [ActivityBucket(0, 1, 1, 0)]
    assert nobody == []
    assert other == [ActivityBucket(0, 1, 1, 1)]
