"""The repositories' contract: the same cases on the unit tier's fakes
(tests/fakes.py) and on both real stores, through the unit of work each hands
a transaction (core/repositories.py). A fake that answers otherwise than the
store it stands for fails here, so the unit tier's rules are proven on what
the server really runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nexus_grpc.core import jobs, tenancy
from nexus_grpc.core.graph import ASSERT, END, HISTORY, Interval
from nexus_grpc.core.llm_usage import LLMCall, StageBucket
from nexus_grpc.core.models import (
    JobState,
    MemoryFormation,
    MemoryKind,
    MemoryScope,
    NewEpisode,
    Tier,
)
from nexus_grpc.core.records import (
    DELETE,
    EXTRACTION_DONE,
    EXTRACTION_FAILED,
    UPDATE,
    ChangedBy,
    EventFilter,
    SelectionAnswer,
    SelectionKey,
    SelectionPick,
    UsageOwner,
    UsageRecord,
)
from nexus_grpc.errors import AlreadyExists, NotFound
from nexus_grpc.store.postgres.database import PostgresDatabase
from nexus_grpc.store.sqlite.database import Database
from tests.fakes import FakeUnitOfWork
from tests.seam_walk import SEAM, called, declared

Case = Callable[[Any], Any]


def test_every_seam_method_a_fake_keeps_is_run_here_on_all_three():
    """A fake method no case here runs could answer otherwise than the store
    unseen: each one the fakes keep is called by a case of a contract file
    (test_repository_contract*.py, and so runs on the fake, SQLite and
    PostgreSQL)."""
    members = declared(SEAM.read_text())
    contract_files = sorted(Path(__file__).parent.glob("test_repository_contract*.py"))
    run_here = called([f.read_text() for f in contract_files], set(members))
    uow = FakeUnitOfWork()
    kept = {
        (member, method)
        for member, methods in members.items()
        for method in methods
        if hasattr(getattr(uow, member, None), method)
    }
    assert len(kept) > 100
    assert sorted(kept - run_here) == []


async def test_projects_keep_their_settings_and_their_tenant(run):
    def case(uow):
        plain = uow.projects.insert({"name": "plain"}, "t1")
        own = uow.projects.insert(
            {
                "name": "own",
                "memory_formation": int(MemoryFormation.OFF),
                "single_valued_labels": ["owns"],
                "retention": 3600.0,
            },
            "t2",
        )
        return [
            (p.name, p.tenant, uow.projects.memory_formation(p.id),
             uow.projects.single_valued_labels(p.id), uow.projects.retention_of(p.id),
             uow.projects.tenant_of(p.id), uow.projects.exists(p.id, "t1"))
            for p in (plain, own)
        ], uow.projects.exists(999, None), uow.projects.memory_formation(999)  # fmt: skip

    assert await run(case) == (
        [
            ("plain", "t1", None, None, None, "t1", True),
            ("own", "t2", int(MemoryFormation.OFF), ("owns",), 3600.0, "t2", False),
        ],
        False,
        None,
    )


async def test_a_project_name_is_taken_once_per_tenant_and_the_refusal_names_its_holder(run):
    def case(uow):
        first = uow.projects.insert({"name": "Atlas"}, "t1")
        elsewhere = uow.projects.insert({"name": "Atlas"}, "t2")
        other_case = uow.projects.insert({"name": "atlas"}, "t1")
        try:
            uow.projects.insert({"name": "Atlas"}, "t1")
        except AlreadyExists as exc:
            [held] = exc.details
            refused = (held.resource_type, held.resource_name, exc.message)
        # The transaction goes on after the refusal (on PostgreSQL too).
        later = uow.projects.insert({"name": "Borealis"}, "t1")
        return first.id, (elsewhere.tenant, other_case.name, later.name), refused

    first, made, (kind, holder, message) = await run(case)
    assert made == ("t2", "atlas", "Borealis")
    assert (kind, holder) == ("project", str(first))
    assert f"a project named 'Atlas' already exists in this tenant: project {first}" in message


async def test_projects_are_paged_per_tenant_changed_and_renamed_only_to_a_free_name(run):
    def case(uow):
        made = [
            uow.projects.insert({"name": name, "colour": "teal", "notes": "n"}, tenant)
            for name, tenant in (("a", "t1"), ("b", "t2"), ("c", "t1"), ("d", "t1"))
        ]
        a, b, c, d = (p.id for p in made)
        pages = [
            [p.name for p in uow.projects.list_page(None, 10, "t1")],
            [p.name for p in uow.projects.list_page(a, 1, "t1")],
            [p.name for p in uow.projects.list_page(None, 10)],
        ]
        changed = uow.projects.update(
            a,
            {"description": "about", "retention": 60.0, "single_valued_labels": ["owns"],
             "system_prompt": "be brief"},
            "t1",
        )  # fmt: skip
        cleared = uow.projects.update(a, {"single_valued_labels": [], "retention": None})
        renamed = uow.projects.update(c, {"name": "b"}, "t1").name  # t2's b is not t1's
        try:
            uow.projects.update(d, {"name": "a"}, "t1")
            refused: Any = None
        except AlreadyExists as exc:
            [held] = exc.details
            refused = (held.resource_name, exc.message)
        same_name = uow.projects.update(d, {"name": "d", "icon": "star"}).icon
        other_tenant = _missing(lambda: uow.projects.update(b, {"notes": "x"}, "t1"))
        return (
            (a, b, c, d), pages,
            (changed.description, changed.retention, changed.single_valued_labels,
             changed.system_prompt, changed.colour, changed.notes, changed.name,
             changed.updated_at >= made[0].updated_at, changed.created_at == made[0].created_at),
            (cleared.single_valued_labels, cleared.retention, cleared.description),
            renamed, refused, same_name, other_tenant,
        )  # fmt: skip

    ids, pages, changed, cleared, renamed, refused, same_name, other_tenant = await run(case)
    a = ids[0]
    assert pages == [["a", "c", "d"], ["c"], ["a", "b", "c", "d"]]
    assert changed == (
        "about", 60.0, ("owns",), "be brief", "teal", "n", "a", True, True,
    )  # fmt: skip
    assert cleared == (None, None, "about")
    assert renamed == "b"
    assert refused[0] == str(a)
    assert f"a project named 'a' already exists in this tenant: project {a}" in refused[1]
    assert (same_name, other_tenant) == ("star", True)


async def test_a_projects_users_are_counted_from_its_sessions_and_memories(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        other = uow.projects.insert({"name": "q"}, "t1").id
        sessions = [
            uow.sessions.insert(f"s{i}", "", pid, {}, "t1", user_id=user).id
            for i, (pid, user) in enumerate(
                ((project, "ann"), (project, "ann"), (project, "bob"), (project, ""),
                 (other, "ann"))
            )
        ]  # fmt: skip
        task = int(Tier.TASK)
        for values in (
            _memory(project_id=project, user_id="ann"),
            _memory(project_id=project, user_id="ann", tier=task, session_id=sessions[0]),
            _memory(project_id=project, user_id="carol", tier=task, session_id=sessions[0]),
            _memory(project_id=other, user_id="ann", tier=task, session_id=sessions[1]),
            _memory(kind=int(MemoryKind.PROJECT), user_id="", project_id=project, tier=task,
                    session_id=sessions[0]),
        ):  # fmt: skip
            uow.memories.insert(values, None, "t1")
        return (
            uow.projects.session_users(project),
            uow.projects.session_users(other),
            uow.projects.user_memory_owners(project),
            uow.projects.user_memory_owners(999),
            uow.sessions.task_memory_owners(sessions[0]),
            uow.sessions.task_memory_owners(sessions[1]),
            uow.sessions.task_memory_owners(sessions[2]),
        )

    assert await run(case) == (
        {"ann": 2, "bob": 1},  # a session with no user is no one's
        {"ann": 1},
        {"ann": 2, "carol": 1},  # PROJECT memories have no user
        {},
        {"ann": 1, "carol": 1},
        {"ann": 1},
        {},
    )


async def test_another_tenants_project_or_session_answers_as_a_missing_one(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        session = uow.sessions.insert("ext-1", "s", project.id, {"k": 1}, "t1", user_id="ann")
        refused = []
        for lookup in (
            lambda: uow.projects.get(project.id, "t2"),
            lambda: uow.sessions.get(session.id, "t2"),
            lambda: uow.sessions.get(session.id + 1000),
        ):
            try:
                lookup()
            except NotFound as exc:
                refused.append((exc.resource.resource_type, exc.message))
        got = uow.sessions.get(session.id, "t1")
        return refused, (got.external_id, got.project_id, got.metadata, got.user_id)

    refused, got = await run(case)
    assert [kind for kind, _ in refused] == ["project", "session", "session"]
    assert got == ("ext-1", 1, {"k": 1}, "ann")


async def test_an_external_id_is_one_session_per_tenant(run):
    def case(uow):
        uow.sessions.insert("ext-1", "", 0, {}, "t1")
        uow.sessions.insert("ext-1", "", 0, {}, "t2")
        with uow.savepoint("duplicate"):
            pass
        try:
            with uow.savepoint("duplicate"):
                uow.sessions.insert("ext-1", "", 0, {}, "t1")
        except AlreadyExists:
            return "refused"
        return "stored twice"

    assert await run(case) == "refused"


async def test_sessions_are_found_listed_moved_and_hidden_past_their_projects_retention(run):
    def case(uow):
        kept = uow.projects.insert({"name": "kept", "retention": 3600.0}, "t1")
        plain = uow.projects.insert({"name": "plain"}, "t1")
        now = time.time()
        recent = uow.sessions.insert("recent", "r", kept.id, {}, "t1", user_id="ann")
        stale = uow.sessions.insert("stale", "s", kept.id, {}, "t1", user_id="bob")
        other = uow.sessions.insert("other", "o", plain.id, {}, "t1", user_id="ann")
        loose = uow.sessions.insert("loose", "", 0, {}, "t2")
        uow.episodes.insert(recent.id, "soon", "", {}, None, now + 5000)
        uow.episodes.insert(stale.id, "long ago", "", {}, None, now - 7200)
        at = now + 7200  # the cutoff is an hour from now: only recent has an episode since

        def page(after_id=None, limit=10, project_id=0, tenant=None, **kw):
            found = uow.sessions.list_page(after_id, limit, project_id, tenant, **kw)
            return [s.external_id for s in found]

        def missing(lookup) -> str:
            try:
                lookup()
            except NotFound as exc:
                return exc.resource.resource_type
            return "found"

        pages = [
            page(project_id=kept.id),
            page(project_id=kept.id, retained_at=at),
            page(tenant="t1"),
            page(after_id=recent.id, limit=1),
            page(tenant="t2"),
        ]
        lookups = [
            missing(lambda: uow.sessions.get(stale.id, "t1", retained_at=at)),
            missing(lambda: uow.sessions.get_by_external_id("stale", "t1", retained_at=at)),
            missing(lambda: uow.sessions.get_by_external_id("loose", "t1")),
            uow.sessions.get_by_external_id("recent", "t1", retained_at=at).id == recent.id,
            uow.sessions.get(stale.id, "t1").id == stale.id,
        ]
        ids = (
            sorted(uow.sessions.project_session_ids(kept.id)),
            uow.sessions.project_session_ids(0),
            uow.sessions.past_retention(kept.id, now + 3600, 10),
            uow.sessions.past_retention(plain.id, now + 3600, 10),
        )
        moved = uow.sessions.update(
            other.id, {"project_id": kept.id, "name": "moved", "metadata": {"x": 1}}, "t1"
        )
        refused = missing(lambda: uow.sessions.update(loose.id, {"name": "x"}, "t1"))
        users = sorted(uow.sessions.user_session_ids(kept.id, "ann"))
        unfiled = uow.sessions.update(other.id, {"project_id": 0}).project_id
        return (
            pages, lookups, ids, (moved.project_id, moved.name, moved.metadata), refused,
            users, unfiled, (recent.id, stale.id, other.id, kept.id),
        )  # fmt: skip

    pages, lookups, ids, moved, refused, users, unfiled, made = await run(case)
    recent, stale, other, kept = made
    assert pages == [
        ["recent", "stale"],
        ["recent"],
        ["recent", "stale", "other"],
        ["stale"],
        ["loose"],
    ]
    assert lookups == ["session", "session", "session", True, True]
    # The sweep's cutoff is given: other has no episode since it, whatever its project keeps.
    assert ids == ([recent, stale], [], [stale], [other])
    assert moved == (kept, "moved", {"x": 1})
    assert refused == "session"
    assert users == [recent, other]
    assert unfiled == 0


async def test_summaries_are_read_in_their_sessions_project_and_hidden_past_its_retention(run):
    def case(uow):
        project = uow.projects.insert({"name": "p", "retention": 3600.0}, "t1")
        plain = uow.projects.insert({"name": "q"}, "t2")
        now = time.time()
        session = uow.sessions.insert("s", "", project.id, {}, "t1")
        old = uow.episodes.insert(session.id, "old", "a", {}, None, now - 7200)
        new = uow.episodes.insert(session.id, "new", "b", {}, None, now)

        def summary(session_id: int, project_id: int, first: int = 0, last: int = 0):
            return uow.summaries.insert(
                session_id=session_id, project_id=project_id, content=f"{first}-{last}",
                first_episode_id=first, last_episode_id=last, episode_count=last and 1,
            ).id  # fmt: skip

        stale = summary(session.id, 0, old.id, old.id)
        fresh = summary(session.id, project.id, old.id, new.id)
        whole = summary(session.id, 0)
        overview = summary(0, project.id)
        theirs = summary(0, plain.id)
        soon = now + 10  # the cutoff is before now: the old episode is past it
        later = now + 7200  # every summary was written before the cutoff

        def ids(found) -> list[int]:
            return [s.id for s in found]

        def missing(lookup) -> bool:
            try:
                lookup()
            except NotFound:
                return True
            return False

        lists = [
            ids(uow.summaries.list_for_project(project.id, None, 10)),
            ids(uow.summaries.list_for_project(project.id, None, 10, retained_at=soon)),
            ids(uow.summaries.list_for_project(project.id, None, 10, retained_at=later)),
            ids(uow.summaries.list_for_project(plain.id, None, 10, retained_at=later)),
            ids(uow.summaries.list_for_session(session.id, stale, 10)),
            ids(uow.summaries.list_for_session(session.id, None, 1, retained_at=soon)),
        ]
        reads = [
            uow.summaries.latest_for_session(session.id).id,
            uow.summaries.latest_for_session(session.id, retained_at=later),
            uow.summaries.overview(project.id).id,
            uow.summaries.overview(project.id, retained_at=later),
            uow.summaries.find(stale, "t1", retained_at=soon),
            uow.summaries.find(stale, "t2"),
            uow.summaries.find(theirs, "t2").project_id,
            uow.summaries.get(fresh, "t1").project_id,
            missing(lambda: uow.summaries.get(theirs, "t1")),
        ]
        past = (
            uow.summaries.past_retention(project.id, now - 3590, 10),
            uow.summaries.past_retention(project.id, now + 3600, 2),
        )
        refused = missing(lambda: uow.summaries.update(stale, {"content": "x"}, retained_at=soon))
        rewritten = uow.summaries.update(stale, {"content": "rewritten"}, "t1").content
        oldest_first = ids(uow.summaries.project_session_summaries(project.id))
        episodes = (
            uow.summaries.project_recent_episodes(project.id, 1),
            uow.summaries.project_recent_episodes(project.id, 10, since=now - 100),
            [e for e, _, _ in uow.summaries.project_recent_episodes(project.id, 10)],
        )
        refused_delete = missing(lambda: uow.summaries.delete(theirs, "t1"))
        uow.summaries.delete(whole, "t1")
        left = uow.summaries.ids_of_session(session.id)
        return (
            lists, reads, past, (refused, rewritten), oldest_first, episodes,
            refused_delete, left, (stale, fresh, whole, overview, theirs),
            (project.id, plain.id, old.id, new.id),
        )  # fmt: skip

    (
        lists,
        reads,
        past,
        update,
        oldest_first,
        episodes,
        refused_delete,
        left,
        made,
        more,
    ) = await run(case)
    stale, fresh, whole, overview, theirs = made
    project, plain, old, new = more
    assert lists == [
        [stale, fresh, whole, overview],
        [fresh, whole, overview],  # stale covers only an episode past the cutoff
        [],
        [theirs],  # a project with no retention keeps all
        [fresh, whole],
        [fresh],
    ]
    assert reads == [fresh, None, overview, None, None, None, plain, project, True]
    assert past == ([stale], [stale, fresh])
    assert update == (True, "rewritten")
    assert oldest_first == [fresh, whole, stale]  # the rewritten one is the newest material
    assert episodes == ([(new, "new", "b")], [(new, "new", "b")], [old, new])
    assert refused_delete is True
    assert left == [stale, fresh]


async def test_extraction_events_page_by_filter_in_their_sessions_tenant_and_ids_only_grow(run):
    def case(uow):
        one = uow.sessions.insert("a", "", 0, {}, "t1")
        two = uow.sessions.insert("b", "", 0, {}, "t2")
        made = [
            uow.events.insert(10, one.id, 5, EXTRACTION_DONE, payload={"entities": 2}),
            uow.events.insert(11, one.id, 5, EXTRACTION_FAILED, "x" * 3000),
            uow.events.insert(12, two.id, 6, EXTRACTION_DONE),
            uow.events.insert(13, 999, 0, EXTRACTION_DONE),  # its session is gone: no tenant
        ]

        def page(after_id: int = 0, limit: int = 10, **where) -> list[tuple]:
            return [
                (e.id, e.episode_id, e.session_id, e.project_id, e.status, len(e.error), e.payload)
                for e in uow.events.page_after(after_id, EventFilter(**where), limit)
            ]

        pages = [
            [e[0] for e in page()],
            page(made[0], tenant="t1"),
            page(project_id=5, limit=1),
            [e[0] for e in page(session_id=two.id)],
            [e[0] for e in page(episode_id=13, tenant="")],
            page(since=time.time() + 100),
        ]
        seen = [
            uow.events.any_for_episode(10),
            uow.events.any_for_episode(10, "t1"),
            uow.events.any_for_episode(10, "t2"),
            uow.events.any_for_episode(99),
        ]
        trimmed = uow.events.delete_before(time.time() + 1, 2)
        after_trim = [e[0] for e in page()]
        everything = uow.events.delete_before(time.time() + 1, 10)
        latest = uow.events.insert(14, one.id, 5, EXTRACTION_DONE)
        return made, one.id, two.id, pages, seen, (trimmed, after_trim, everything), latest

    made, one, two, pages, seen, trims, latest = await run(case)
    assert pages == [
        made,
        [(made[1], 11, one, 5, EXTRACTION_FAILED, 2000, {})],
        [(made[0], 10, one, 5, EXTRACTION_DONE, 0, {"entities": 2})],
        [made[2]],
        [made[3]],
        [],
    ]
    assert seen == [True, True, False, False]
    assert trims == (2, made[2:], 2)
    assert latest > made[-1]  # an id is never reused


async def test_the_database_keeps_facts_about_itself(run):
    def case(uow):
        before = uow.meta.get("contract.fact")
        uow.meta.put("contract.fact", "a")
        uow.meta.put("contract.fact", "b")
        uow.meta.touch(12.5)
        return before, uow.meta.get("contract.fact"), uow.meta.get("write_probe"), uow.meta.probe()

    before, fact, probe_row, schema = await run(case)
    assert (before, fact, probe_row) == (None, "b", "12.5")
    assert schema > 0


async def test_episodes_are_stored_as_given_and_found_by_request_id(run):
    def case(uow):
        session = uow.sessions.insert("s", "", 0, {}, "t1", user_id="ann")
        one = uow.episodes.insert(
            session.id, "hello", "hi", {"a": 1}, "r-1", 1_000.0, acts_for="ann"
        )
        ids = uow.episodes.insert_many(
            [
                NewEpisode(session.id, "two", "", {}, "r-2", 2_000.0, acts_for="ann"),
                NewEpisode(session.id, "three", "", {}, None, 3_000.0, acts_for=""),
            ],
            extracted=True,
        )
        found = uow.episodes.find_by_request_id(session.id, "r-2")
        many = uow.episodes.get_many([one.id, *ids, 999])
        return (
            (one.user_message, one.metadata, one.occur_at, one.acts_for, one.extract_state),
            [(many[i].user_message, many[i].extract_state, many[i].acts_for) for i in ids],
            found.id == ids[0],
            sorted(many) == sorted([one.id, *ids]),
            uow.episodes.find(999),
        )

    assert await run(case) == (
        ("hello", {"a": 1}, 1_000.0, "ann", JobState.PENDING),
        [("two", JobState.DONE, "ann"), ("three", JobState.DONE, "")],
        True,
        True,
        None,
    )


async def test_failed_extractions_are_listed_by_tenant_with_their_sessions_user(run):
    def case(uow):
        made = []
        for tenant, user in (("t1", "ann"), ("t1", ""), ("t2", "bob")):
            session = uow.sessions.insert(f"s-{tenant}-{user}", "", 0, {}, tenant, user_id=user)
            episode = uow.episodes.insert(session.id, "hi", "", {}, None)
            uow.episodes.set_extract_state(episode.id, JobState.FAILED, "model away")
            made.append(episode.id)
        uow.episodes.set_memory_pending([made[0]])
        uow.episodes.set_memory_state(made[1], JobState.FAILED, "no model")
        uow.episodes.set_memory_state(made[2], JobState.DONE)
        uow.episodes.set_memory_state(made[2], None)
        listed = uow.episodes.failed_extractions("t1")
        first, second, third = (uow.episodes.get(i) for i in made)
        return (
            listed == [(made[0], "ann"), (made[1], "")],
            (
                first.extract_state,
                first.extract_error,
                first.memory_state,
            ),
            (second.memory_state, second.memory_error, third.memory_state, third.memory_error),
        )

    assert await run(case) == (
        True,
        (JobState.FAILED, "model away", JobState.PENDING),
        (JobState.FAILED, "no model", None, ""),
    )


async def test_a_summary_reads_how_far_a_session_got(run):
    def case(uow):
        session = uow.sessions.insert("s", "", 0, {}, "t1")
        progress = []
        for text in ("a" * 10, "b" * 10, "c" * 10):
            uow.episodes.insert(session.id, text, "ok", {}, None)
            progress.append(uow.episodes.summary_progress(session.id, 2, 15))
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [session.id])
        progress.append(uow.episodes.summary_progress(session.id, 2, 15))
        return [(p.queued, p.new_episodes, p.chars) for p in progress]

    # New episodes counted no further than asked (2); characters summed over
    # no more first turns than characters asked (16: each has at least one).
    assert await run(case) == [(False, 1, 0), (False, 2, 24), (False, 2, 36), (True, 0, 0)]


async def test_a_job_is_queued_once_per_target_and_a_failed_one_requeued(run):
    def case(uow):
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [1, 2], priority=jobs.BULK)
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [2, 3])
        queued = sorted(uow.jobs.queued_targets(jobs.EXTRACT_EPISODE))
        return queued, uow.jobs.requeue_failed(jobs.EXTRACT_EPISODE, 2)

    assert await run(case) == ([1, 2, 3], 0)


async def test_a_job_sent_back_runs_again_later_with_an_attempt_spent_or_not(run):
    def case(uow):
        kind = jobs.EXTRACT_EPISODE
        uow.jobs.enqueue(kind, [1, 2, 3])
        taken = {j.target_id: j for j in uow.jobs.claim(kind, 10)}
        running = uow.jobs.pending_count(kind)
        uow.jobs.retry_later(taken[1].id, "boom", -1)  # due again, an attempt spent
        uow.jobs.postpone(taken[2].id, "model away", -1)  # due again, none spent
        uow.jobs.retry_later(taken[3].id, "later", 3600)  # waits an hour
        due = uow.jobs.next_run_after(kind) - time.time()
        claimed = uow.jobs.claim(kind, 10)
        again = sorted((j.target_id, j.attempts) for j in claimed)
        then = uow.jobs.next_run_after(kind) - time.time()
        uow.jobs.finish([j.id for j in claimed])
        left = sorted(uow.jobs.queued_targets(kind))
        return running, due, again, then, uow.jobs.next_run_after(jobs.INDEX_EPISODE), left

    running, due, again, then, none, left = await run(case)
    assert running == 3  # running jobs count as waiting work
    assert -5 < due < 0
    assert again == [(1, 1), (2, 0)]
    assert left == [3]
    assert 3500 < then <= 3600
    assert none is None


async def test_a_dead_letter_waits_for_a_requeue_and_work_queued_again_covers_a_sent_back_job(
    run,
):
    def case(uow):
        kind = jobs.EXTRACT_EPISODE
        uow.jobs.enqueue(kind, [1, 2, 3])
        one, two, three = sorted(uow.jobs.claim(kind, 10), key=lambda j: j.target_id)
        uow.jobs.enqueue(kind, [2])  # queued again while it runs
        dead = uow.jobs.dead_letter(one.id, "broken")
        covered = uow.jobs.dead_letter(two.id, "broken")
        uow.jobs.dead_letter(three.id, "broken")
        uow.jobs.enqueue(kind, [3])  # the failed target asked for again
        depth = {d.kind: d for d in uow.jobs.depths()}[kind]
        queued = sorted(uow.jobs.queued_targets(kind))
        one_back = uow.jobs.requeue_failed(kind, 1)
        rest_back = uow.jobs.requeue_failed(kind)
        claimed = sorted((j.target_id, j.attempts) for j in uow.jobs.claim(kind, 10))
        return dead, covered, (depth.pending, depth.failed), queued, one_back, rest_back, claimed

    dead, covered, depth, queued, one_back, rest_back, claimed = await run(case)
    assert (dead, covered) == (True, False)
    assert depth == (2, 2)  # 2 and 3 pending again; 1 and 3 failed
    assert queued == [2, 3]  # a failed job is not work on its way
    # 1 comes back with its attempts from zero; 3's failed row goes, its pending job stays.
    assert (one_back, rest_back) == (1, 0)
    assert claimed == [(1, 0), (2, 0), (3, 0)]


async def test_a_kind_waits_for_its_dependency_and_a_rebuild_drops_older_jobs(run):
    far = 4_000_000_000.0

    def case(uow):
        before = time.time()
        uow.jobs.enqueue(jobs.INDEX_EPISODE, [1, 2])
        uow.jobs.schedule(jobs.EXPIRE_MEMORY, 7, before - 50)
        uow.jobs.schedule(jobs.RETAIN_PROJECT, 8, far + 100)
        uow.jobs.postpone_pending(jobs.INDEX_EPISODE, "index away", far)
        uow.jobs.postpone_pending(jobs.RETAIN_PROJECT, "index away", far)
        waiting = [j.target_id for j in uow.usage.deferred_jobs(jobs.INDEX_EPISODE, "away", before)]
        due = (uow.jobs.next_run_after(jobs.INDEX_EPISODE),
               uow.jobs.next_run_after(jobs.RETAIN_PROJECT))  # fmt: skip
        ages = {d.kind: (d.pending, d.oldest_pending_age) for d in uow.jobs.depths()}
        dropped = uow.jobs.delete_created_before(jobs.INDEX_EPISODE, time.time())
        kept = uow.jobs.delete_created_before(jobs.EXPIRE_MEMORY, before - 1)
        left = (uow.jobs.pending_count(jobs.INDEX_EPISODE),
                uow.jobs.pending_count(jobs.EXPIRE_MEMORY))  # fmt: skip
        return waiting, due, ages, dropped, kept, left

    waiting, due, ages, dropped, kept, left = await run(case)
    assert sorted(waiting) == [1, 2]
    assert due == (far, far + 100)  # a later due time is kept
    # An index job's age is since it was queued, a scheduled one's since it was due.
    assert ages[jobs.INDEX_EPISODE][0] == 2 and ages[jobs.INDEX_EPISODE][1] < 30
    assert ages[jobs.EXPIRE_MEMORY][0] == 1 and ages[jobs.EXPIRE_MEMORY][1] >= 50
    assert ages[jobs.RETAIN_PROJECT] == (1, 0.0)
    assert ages[jobs.SUMMARIZE_SESSION] == (0, 0.0)
    assert (dropped, kept, left) == (2, 0, (0, 1))


async def test_a_restart_runs_running_jobs_again_where_no_lease_holds_them(run):
    def case(uow):
        kind = jobs.EXTRACT_EPISODE
        uow.jobs.enqueue(kind, [1, 2])
        taken = uow.jobs.claim(kind, 10)
        uow.jobs.renew([j.id for j in taken])
        uow.jobs.enqueue(kind, [1])  # queued again while it runs
        # A target's next job waits for its running one.
        waits = [j.target_id for j in uow.jobs.claim(kind, 10)]
        count = uow.jobs.pending_count(kind)
        reset = uow.jobs.reset_running()
        return waits, count, reset, sorted(j.target_id for j in uow.jobs.claim(kind, 10))

    waits, count, reset, after = await run(case)
    assert (waits, count) == ([], 3)
    if run.backend == "postgresql":
        # Running jobs may be another live instance's: they wait for their leases.
        assert (reset, after) == (0, [])
    else:
        # One process per file: the running ones run again, 1 once.
        assert (reset, after) == (1, [1, 2])


async def test_a_job_is_queued_in_its_targets_tenant(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t2")
        one = uow.sessions.insert("s1", "", 0, {}, "t1")
        two = uow.sessions.insert("s2", "", project.id, {}, "t2")
        mine = uow.episodes.insert(one.id, "a", "", {}, None)
        theirs = uow.episodes.insert(two.id, "b", "", {}, None)
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [mine.id, theirs.id, 999])
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [two.id])
        uow.jobs.enqueue(jobs.RETAIN_PROJECT, [project.id])
        memory = uow.memories.insert(_memory(), None, "t3").id
        uow.jobs.enqueue(jobs.INDEX_MEMORY, [memory, 999])
        summary = uow.summaries.insert(session_id=one.id, project_id=0, content="s").id
        overview = uow.summaries.insert(session_id=0, project_id=project.id, content="o").id
        uow.jobs.enqueue(jobs.INDEX_SUMMARY, [summary, overview])
        kinds = (jobs.EXTRACT_EPISODE, jobs.SUMMARIZE_SESSION, jobs.RETAIN_PROJECT,
                 jobs.INDEX_MEMORY, jobs.INDEX_SUMMARY)  # fmt: skip
        return {
            kind: sorted((j.target_id, j.tenant) for j in uow.jobs.claim(kind, 10))
            for kind in kinds
        }, (mine.id, theirs.id, two.id, project.id, memory, summary, overview)

    got, (mine, theirs, session, project, memory, summary, overview) = await run(case)
    assert got == {
        # A target that is gone has no tenant.
        jobs.EXTRACT_EPISODE: [(mine, "t1"), (theirs, "t2"), (999, "")],
        jobs.SUMMARIZE_SESSION: [(session, "t2")],
        jobs.RETAIN_PROJECT: [(project, "t2")],
        jobs.INDEX_MEMORY: sorted([(memory, "t3"), (999, "")]),
        # A summary is its session's tenant's, an overview its project's.
        jobs.INDEX_SUMMARY: sorted([(summary, "t1"), (overview, "t2")]),
    }


async def test_a_claim_takes_tenants_in_turn_each_ones_oldest_first(run):
    def case(uow):
        ids: dict[str, list[int]] = {}
        for tenant, n in (("atlas", 4), ("bravo", 1), ("cargo", 3)):
            session = uow.sessions.insert(f"s-{tenant}", "", 0, {}, tenant)
            ids[tenant] = [
                uow.episodes.insert(session.id, f"{tenant} {i}", "", {}, None).id for i in range(n)
            ]
        # Due in the order queued: atlas's backlog first, then bravo's, then cargo's.
        due = time.time() - 100
        for tenant in ("atlas", "bravo", "cargo"):
            for target in ids[tenant]:
                due += 1
                uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [target], run_after=due, priority=jobs.BULK)
        bravo_live = uow.episodes.insert(
            uow.sessions.insert("s-live", "", 0, {}, "bravo").id, "live", "", {}, None
        ).id
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [bravo_live])

        def claim(n: int, served: list[str]) -> list[int]:
            return [j.target_id for j in uow.jobs.claim(jobs.EXTRACT_EPISODE, n, served=served)]

        return (
            ids,
            bravo_live,
            [
                # Live before any bulk, whoever was served.
                claim(1, ["atlas", "cargo"]),
                # Never served: the oldest job first.
                claim(1, []),
                # atlas served: the others (never served) first, the older job first;
                # round by round: each tenant's oldest, then each one's next.
                claim(4, ["atlas"]),
                # cargo was served less recently than atlas: its job first.
                claim(2, ["cargo", "atlas"]),
            ],
        )

    ids, live, claims = await run(case)
    atlas, bravo, cargo = ids["atlas"], ids["bravo"], ids["cargo"]
    assert claims == [
        [live],
        [atlas[0]],
        [bravo[0], cargo[0], atlas[1], cargo[1]],
        [cargo[2], atlas[2]],
    ]


async def test_a_batch_fills_with_live_work_first_then_with_bulk_work_round_by_round(run):
    """A claim reads the lanes round by round and stops once it has a batch:
    what it takes is what the whole claim order would put first."""

    def case(uow):
        due = time.time() - 100
        ids: dict[str, list[int]] = {}
        for tenant, n, priority in (
            ("live", 3, jobs.LIVE),
            *((f"bulk{i}", 3, jobs.BULK) for i in range(5)),
        ):
            session = uow.sessions.insert(f"s-{tenant}", "", 0, {}, tenant)
            ids[tenant] = []
            for i in range(n):
                target = uow.episodes.insert(session.id, f"{tenant} {i}", "", {}, None).id
                due += 1
                uow.jobs.enqueue(jobs.EXTRACT_EPISODE, [target], run_after=due, priority=priority)
                ids[tenant].append(target)
        served = ["bulk4", "bulk3", "bulk2", "bulk1", "bulk0", "live"]
        taken = [j.target_id for j in uow.jobs.claim(jobs.EXTRACT_EPISODE, 5, served=served)]
        # A batch smaller than a round: the least recently served lanes' oldest.
        served = ["bulk2", "bulk1", "bulk0", "live", "bulk4", "bulk3"]
        then = [j.target_id for j in uow.jobs.claim(jobs.EXTRACT_EPISODE, 2, served=served)]
        return ids, taken, then

    ids, taken, then = await run(case)
    assert taken == [*ids["live"], ids["bulk4"][0], ids["bulk3"][0]]
    assert then == [ids["bulk2"][0], ids["bulk1"][0]]


async def test_intervals_are_written_exactly_and_a_surviving_one_keeps_its_id(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        graph = (project.id, 0)
        priya, porto, lisbon = (
            uow.graph.insert_entity(graph, name, etype, None, source="manual")
            for name, etype in (("Priya", "person"), ("Porto", "place"), ("Lisbon", "place"))
        )
        uow.graph.add_evidence(priya, porto, "lives_in", ASSERT, 100.0)
        uow.graph.add_evidence(priya, lisbon, "lives_in", END, 150.0)
        said = sorted((e.to_id, e.kind, e.at) for e in uow.graph.evidence_of(priya, "lives_in"))

        def held() -> list[tuple[int, int, float, float | None]]:
            rels = uow.graph.list_relationships(priya, False, when=HISTORY)
            return sorted((r.id, r.to_id, r.valid_at, r.invalid_at) for r in rels)

        uow.graph.write_intervals(
            priya, "lives_in",
            [Interval(porto, 100.0, None, mentions=1), Interval(lisbon, 200.0, None, mentions=1)],
        )  # fmt: skip
        first = held()
        # Porto now ends at 200; Lisbon's start moved: both keep their ids.
        uow.graph.write_intervals(
            priya, "lives_in",
            [Interval(porto, 100.0, 200.0, mentions=1),
             Interval(lisbon, 250.0, None, mentions=1)],
        )  # fmt: skip
        second = held()
        uow.graph.write_intervals(priya, "lives_in", [])
        return said, (priya, porto, lisbon), first, second, held()

    said, (priya, porto, lisbon), first, second, last = await run(case)
    assert said == sorted([(porto, ASSERT, 100.0), (lisbon, END, 150.0)])
    assert [(to, start, end) for _, to, start, end in first] == [
        (porto, 100.0, None), (lisbon, 200.0, None)
    ]  # fmt: skip
    assert [r[0] for r in second] == [r[0] for r in first]
    assert [(to, start, end) for _, to, start, end in second] == [
        (porto, 100.0, 200.0), (lisbon, 250.0, None)
    ]  # fmt: skip
    assert last == []


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
async def test_a_write_that_breaks_the_schema_is_a_conflict_on_both(store, tmp_path, request):
    """The store's error contract (core/storage.py): no sqlite3 or psycopg
    exception crosses the seam, on a write or on a read."""
    from nexus_grpc.core.storage import Conflict, StoreError

    db: Any = (
        Database(tmp_path / "contract.db")
        if store == "sqlite"
        else PostgresDatabase(request.getfixturevalue("pg_url"))
    )
    await db.open()
    try:
        await db.write_sql(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')"))
        with pytest.raises(Conflict) as taken:
            await db.write_sql(
                lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('k', 'w')")
            )
        with pytest.raises(StoreError) as broken:
            await db.read_sql(lambda c: c.execute("SELECT no_such_column FROM meta").fetchall())
    finally:
        await db.close()
    for err in (taken.value, broken.value):
        assert type(err).__module__ == "nexus_grpc.core.storage"
        assert err.__cause__ is not None  # the driver's own, kept for the log


def _call(tenant: str, project_id: int, stage: str, at: float, prompt: int, completion: int,
          outcome: str = "ok", estimated: bool = False) -> LLMCall:  # fmt: skip
    return LLMCall(stage, project_id, tenant, prompt, completion, 0.5, outcome, at, estimated)


async def test_the_llm_account_sums_by_tenant_and_buckets_by_project_or_tenant(run):
    hour = 3600.0
    base = 100 * hour  # the start of an hour

    def case(uow):
        uow.usage.insert(
            [
                _call("t1", 1, "extraction", base + 10, 100, 20),
                _call("t1", 1, "extraction", base + 20, 50, 0, outcome="cut_off"),
                _call("t1", 1, "resolution", base + hour + 5, 30, 3, estimated=True),
                _call("t1", 2, "summary", base + 30, 7, 7),
                _call("t2", 3, "extraction", base + 40, 1000, 1000),
            ]
        )
        uow.usage.insert([])
        return (
            uow.usage.spent(base),
            uow.usage.spent(base + hour, ["t1", "t2", "t3"]),
            uow.usage.spent(base, []),
            uow.usage.stage_buckets(base, base + 2 * hour, hour, project_id=1),
            uow.usage.stage_buckets(base, base + hour, hour, tenant="t1"),
            # The window's end is not in it.
            uow.usage.stage_buckets(base + 10, base + 20, hour, tenant="t1"),
        )

    spent, since, none, project, tenant, edge = await run(case)
    assert spent == {"t1": 217, "t2": 2000}
    assert since == {"t1": 33, "t2": 0, "t3": 0}
    assert none == {}
    b = int(base // hour)
    assert project == [
        StageBucket(b, "extraction", "cut_off", 1, 50, 0, 0.5, 0),
        StageBucket(b, "extraction", "ok", 1, 100, 20, 0.5, 0),
        StageBucket(b + 1, "resolution", "ok", 1, 30, 3, 0.5, 1),
    ]
    assert [(r.stage, r.outcome, r.calls) for r in tenant] == [
        ("extraction", "cut_off", 1),
        ("extraction", "ok", 1),
        ("summary", "ok", 1),
    ]
    assert [(r.stage, r.outcome) for r in edge] == [("extraction", "ok")]


async def test_a_budget_finds_the_tenant_of_each_llm_job_and_defers_only_that_tenants(run):
    far = 4_000_000_000.0

    def case(uow):
        mine = uow.sessions.insert("a", "", 0, {}, "t1", "alice")
        theirs = uow.sessions.insert("b", "", 0, {}, "t2")
        ids = [uow.episodes.insert(s.id, "hi", "", {}, None).id for s in (mine, mine, theirs)]
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids)
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [mine.id, theirs.id])
        owners = (
            uow.usage.job_owners(jobs.EXTRACT_EPISODE, [*ids, 999]),
            uow.usage.job_owners(jobs.SUMMARIZE_SESSION, [mine.id, theirs.id]),
            uow.usage.job_owners(jobs.INDEX_EPISODE, ids),
        )
        moved = uow.usage.defer_tenant_jobs(jobs.EXTRACT_EPISODE, "t1", far, "over budget")
        again = uow.usage.defer_tenant_jobs(jobs.EXTRACT_EPISODE, "t1", far, "over budget")
        summaries = uow.usage.defer_tenant_jobs(jobs.SUMMARIZE_SESSION, "t2", far, "over")
        return ids, mine.id, theirs.id, owners, moved, again, summaries

    ids, mine, theirs, owners, moved, again, summaries = await run(case)
    assert owners == (
        {ids[0]: ("t1", "alice"), ids[1]: ("t1", "alice"), ids[2]: ("t2", "")},
        {mine: ("t1", "alice"), theirs: ("t2", "")},
        {},
    )
    assert [(j.kind, j.target_id, j.attempts) for j in moved] == [
        (jobs.EXTRACT_EPISODE, ids[0], 0),
        (jobs.EXTRACT_EPISODE, ids[1], 0),
    ]
    assert again == []  # already waiting until then
    assert [(j.kind, j.target_id) for j in summaries] == [(jobs.SUMMARIZE_SESSION, theirs)]


async def test_the_account_keeps_whose_work_each_call_was_and_reads_by_user(run):
    hour = 3600.0
    base = 200 * hour

    def case(uow):
        uow.usage.insert(
            [
                LLMCall("extraction", 1, "t1", 100, 10, 0.5, "ok", base + 1, user_id="alice"),
                LLMCall("formation", 1, "t1", 20, 2, 0.5, "ok", base + 2, user_id="alice"),
                LLMCall("extraction", 1, "t1", 40, 4, 0.5, "ok", base + 3, user_id="carol"),
                LLMCall("overview", 1, "t1", 7, 7, 0.5, "ok", base + 4),
                LLMCall("extraction", 2, "t2", 9, 9, 0.5, "ok", base + 5, user_id="alice"),
            ]
        )
        return (
            uow.usage.spent_by_users(base, "t1"),
            uow.usage.spent_by_users(base, "t1", ["alice", "bob"]),
            uow.usage.spent_by_users(base + 3, "t1", ["alice", "carol"]),
            uow.usage.spent_by_users(base, "t1", []),
            uow.usage.stage_buckets(base, base + hour, hour, project_id=1, users=["alice"]),
            uow.usage.stage_buckets(base, base + hour, hour, tenant="t1", users=["carol"]),
            uow.usage.stage_buckets(base, base + hour, hour, tenant="t1", users=[]),
            uow.usage.spent(base, ["t1"]),
        )

    every, named, since, none, alice, carol, nobody, tenant = await run(case)
    # Work for no user (the overview) is no user's, and counts for the tenant.
    assert every == {"alice": 132, "carol": 44}
    assert named == {"alice": 132, "bob": 0}
    assert since == {"alice": 0, "carol": 44}
    assert none == {}
    assert [(r.stage, r.calls, r.prompt_tokens) for r in alice] == [
        ("extraction", 1, 100),
        ("formation", 1, 20),
    ]
    assert [(r.stage, r.calls) for r in carol] == [("extraction", 1)]
    assert nobody == []
    assert tenant == {"t1": 190}


async def test_a_users_share_defers_only_that_users_jobs_and_a_resume_frees_them(run):
    far = 4_000_000_000.0

    def case(uow):
        alice = uow.sessions.insert("a", "", 0, {}, "t1", "alice")
        carol = uow.sessions.insert("c", "", 0, {}, "t1", "carol")
        ids = [uow.episodes.insert(s.id, "hi", "", {}, None).id for s in (alice, carol, alice)]
        uow.jobs.enqueue(jobs.EXTRACT_EPISODE, ids)
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [alice.id, carol.id])
        moved = uow.usage.defer_tenant_jobs(
            jobs.EXTRACT_EPISODE, "t1", far, "waits (1 of 1 tokens, quota-x)", "alice"
        )
        summaries = uow.usage.defer_tenant_jobs(
            jobs.SUMMARIZE_SESSION, "t1", far, "waits (1 of 1 tokens, quota-x)", "carol"
        )
        # Names are no user's: a user's share never sweeps them.
        names = uow.usage.defer_tenant_jobs(jobs.RESOLVE_ENTITY, "t1", far, "x", "alice")
        now = time.time()
        found = uow.usage.deferred_jobs(jobs.EXTRACT_EPISODE, ", quota-x", now)
        later = uow.usage.deferred_jobs(jobs.EXTRACT_EPISODE, ", quota-x", now, found[0].id)
        other = uow.usage.deferred_jobs(jobs.EXTRACT_EPISODE, ", another", now)
        uow.usage.resume_jobs([found[0].id], now)
        after = uow.usage.deferred_jobs(jobs.EXTRACT_EPISODE, ", quota-x", now)
        return ids, alice.id, carol.id, moved, summaries, names, found, later, other, after

    ids, alice, carol, moved, summaries, names, found, later, other, after = await run(case)
    assert [j.target_id for j in moved] == [ids[0], ids[2]]
    assert [(j.kind, j.target_id) for j in summaries] == [(jobs.SUMMARIZE_SESSION, carol)]
    assert names == []
    assert [j.target_id for j in found] == [ids[0], ids[2]]
    assert [j.target_id for j in later] == [ids[2]]
    assert other == []
    assert [j.target_id for j in after] == [ids[2]]


def _memory(**given: Any) -> dict[str, Any]:
    """A memory's values as the domain hands them to ``memories.insert``."""
    values: dict[str, Any] = {
        "kind": int(MemoryKind.USER), "title": "t", "content": "c", "tier": int(Tier.LONGTERM),
        "project_id": 0, "agent_id": "", "user_id": "ann", "session_id": 0,
        "confidence": 0.9, "metadata": {"k": [1]},
    }  # fmt: skip
    values.update(given)
    return values


def _missing(lookup: Callable[[], Any]) -> bool:
    try:
        lookup()
    except NotFound:
        return True
    return False


async def test_memories_are_stored_found_by_their_owners_retry_key_changed_and_deleted(run):
    def case(uow):
        mine = uow.memories.insert(_memory(), "r-1", "t1")
        shared = uow.memories.insert(
            _memory(kind=int(MemoryKind.PROJECT), user_id="", project_id=5), "r-1", "t1"
        )
        elsewhere = uow.memories.insert(_memory(), "r-1", "t2")
        keyless = uow.memories.insert(_memory(source="formation"), "", "t1")
        found = [
            uow.memories.find_by_request_id(tenant, user, "r-1")
            for tenant, user in (("t1", "ann"), ("t1", ""), ("t2", "ann"), ("t1", "bob"))
        ]
        got = uow.memories.get(mine.id)
        changed = uow.memories.update(
            mine.id, {"content": "new", "metadata": {"x": 2}, "tier": int(Tier.SESSION)}
        )
        same = uow.memories.update(mine.id, {})
        uow.memories.delete(shared.id)
        return (
            (mine.id, shared.id, elsewhere.id),
            [None if f is None else f.id for f in found],
            (got.kind, got.title, got.content, got.tier, got.project_id, got.agent_id,
             got.user_id, got.session_id, got.confidence, got.metadata, got.request_id,
             got.tenant, got.source, got.use_count, got.last_used_at, got.expire_at),
            (keyless.request_id, keyless.source),
            (changed.content, changed.metadata, changed.tier, changed.updated_at >= got.updated_at,
             changed.created_at == got.created_at, same.updated_at == changed.updated_at),
            (uow.memories.find(shared.id), sorted(uow.memories.get_many([mine.id, shared.id, 999])),
             _missing(lambda: uow.memories.get(shared.id)),
             _missing(lambda: uow.memories.delete(shared.id)),
             _missing(lambda: uow.memories.update(999, {"content": "x"}))),
        )  # fmt: skip

    ids, found, got, keyless, changed, gone = await run(case)
    mine, shared, elsewhere = ids
    # A retry key is its owner's: a PROJECT memory's owner has no user.
    assert found == [mine, shared, elsewhere, None]
    assert got == (
        int(MemoryKind.USER), "t", "c", int(Tier.LONGTERM), 0, "", "ann", 0, 0.9, {"k": [1]},
        "r-1", "t1", "client", 0, None, None,
    )  # fmt: skip
    assert keyless == (None, "formation")
    assert changed == ("new", {"x": 2}, int(Tier.SESSION), True, True, True)
    assert gone == (None, [mine], True, True, True)


async def test_a_scope_sees_its_project_its_user_and_its_session_in_its_tenant_until_expiry(run):
    P, U = int(MemoryKind.PROJECT), int(MemoryKind.USER)
    TASK, SESSION, ARCHIVE = int(Tier.TASK), int(Tier.SESSION), int(Tier.ARCHIVE)

    def case(uow):
        now = time.time()
        rows = [
            (_memory(kind=P, user_id="", project_id=5, agent_id="a"), "t1"),  # 1
            (_memory(kind=P, user_id="", project_id=6), "t1"),  # 2: another project
            (_memory(project_id=0), "t1"),  # 3: ann's own, everywhere
            (_memory(project_id=5, agent_id="b"), "t1"),  # 4
            (_memory(project_id=6), "t1"),  # 5: ann's in another project
            (_memory(project_id=5, user_id="bob"), "t1"),  # 6
            (_memory(project_id=5, tier=TASK, session_id=7, content="Seven STARS"), "t1"),  # 7
            (_memory(project_id=5, tier=TASK, session_id=8), "t1"),  # 8: another session
            (_memory(project_id=5, tier=SESSION, session_id=0), "t1"),  # 9: outside a session
            (_memory(project_id=5, tier=ARCHIVE), "t1"),  # 10
            (_memory(project_id=5, expire_at=now + 50), "t1"),  # 11: expires soon
            (_memory(project_id=5), "t2"),  # 12: another tenant's ann
            (_memory(project_id=5, expire_at=now - 10), "t1"),  # 13: expired
        ]
        ids = [
            uow.memories.insert({**v, "title": f"t{n}"}, None, tenant).id
            for n, (v, tenant) in enumerate(rows, 1)
        ]
        number = {memory_id: n for n, memory_id in enumerate(ids, 1)}

        def seen(found) -> list[int]:
            return [number[m.id] for m in found]

        scope = MemoryScope(project_id=5, user_id="ann", session_id=7)
        later = now + 100
        every_tenant = seen(uow.memories.list_visible(scope))
        token = tenancy.bind(tenancy.Caller("t1"))
        try:
            lists = [
                seen(uow.memories.list_visible(scope)),
                seen(
                    uow.memories.list_visible(
                        MemoryScope(
                            project_id=5, user_id="ann", session_id=7, include_archived=True
                        )
                    )
                ),
                seen(
                    uow.memories.list_visible(
                        MemoryScope(project_id=5, user_id="ann", agent_id="a")
                    )
                ),
                seen(uow.memories.list_visible(scope, at=later)),
                seen(uow.memories.list_visible(scope, kind=U)),
                seen(uow.memories.list_visible(scope, newest_first=True, limit=2)),
                seen(uow.memories.list_visible(scope, newest_first=True, after_id=ids[8])),
                seen(uow.memories.list_visible(scope, after_id=ids[2], limit=2)),
                seen(uow.memories.list_visible(MemoryScope(user_id="ann"))),
                seen(uow.memories.list_visible(MemoryScope(project_id=5))),
                # An empty scope sees nothing (on PostgreSQL too: a query, not an error).
                seen(uow.memories.list_visible(MemoryScope())),
            ]
            asked = [ids[n - 1] for n in (1, 2, 6, 8, 10, 11)] + [999]
            picked = [
                sorted(number[i] for i in uow.memories.get_visible(asked, scope)),
                sorted(number[i] for i in uow.memories.get_visible(asked, scope, at=later)),
                uow.memories.get_visible([], scope),
            ]
            sample = uow.memories.scope_sample(scope, 2)
        finally:
            tenancy.reset(token)
        owners = [
            uow.memories.count_in_cap_scope(P, 5, "a", "", "t1"),
            uow.memories.count_in_cap_scope(U, 5, "", "ann", "t1"),
            uow.memories.count_in_cap_scope(U, 5, "", "ann", "t2"),
            seen(uow.memories.list_in_project(5, "t1", None, 20, now)),
            seen(uow.memories.list_in_project(5, None, None, 20, later)),
            seen(uow.memories.list_in_project(5, "t1", ids[6], 2, now)),
        ]
        texts = [
            [number[i] for i, _, _ in uow.memories.texts_of_owner(
                kind=U, project_id=5, agent_id="", user_id="ann", tier=TASK,
                session_id=session, tenant="t1", containing=words)]
            for session, words in ((None, ()), (8, ()), (None, ("seven", "stars")), (None, ("x",)))
        ]  # fmt: skip
        return every_tenant, lists, picked, sample, owners, texts

    every_tenant, lists, picked, sample, owners, texts = await run(case)
    assert every_tenant == [1, 3, 4, 7, 9, 11, 12]  # a caller who sees every tenant
    assert lists == [
        [1, 3, 4, 7, 9, 11],
        [1, 3, 4, 7, 9, 10, 11],
        [1],
        [1, 3, 4, 7, 9],
        [3, 4, 7, 9, 11],
        [11, 9],
        [7, 4, 3, 1],
        [4, 7],
        [3],
        [1],
        [],
    ]
    assert picked == [[1, 11], [1], {}]
    assert sample == ["t11\nc", "t9\nc"]
    assert owners == [
        1,
        4,  # 7, 8, 9 and 11: not 4 (another agent), 10 (archived), 12 (another tenant), 13
        1,  # 12: another tenant's ann is another user
        [1, 4, 6, 7, 8, 9, 10, 11],
        [1, 4, 6, 7, 8, 9, 10, 12],
        [8, 9],
    ]
    assert texts == [[7, 8], [8], [7], []]


async def test_usage_is_recorded_per_owner_in_its_memorys_tenant_and_goes_with_the_memory(run):
    def case(uow):
        a, b = (uow.memories.insert(_memory(project_id=5), None, "t1").id for _ in range(2))
        gone = uow.memories.insert(_memory(expire_at=time.time() - 1), None, "t1").id
        owner = UsageOwner("ann", 5, "t1")
        first = uow.memories.record_usage(
            "th-1", owner, "prompt",
            [UsageRecord(a, 0.9, 1), UsageRecord(b, 0.5, 2), UsageRecord(gone, 0.1, 1),
             UsageRecord(999, 0.1, 1)],
        )  # fmt: skip
        second = uow.memories.record_usage("th-2", owner, "again", [UsageRecord(a, 0.7, 1)])
        uow.memories.record_usage("th-1", UsageOwner("bob", 5, "t1"), "x", [UsageRecord(b, 0.3, 1)])
        empty = uow.memories.record_usage("th-3", owner, "none", [])

        def rows(found) -> list[tuple]:
            return [(u.memory_id, u.thread_id, u.context, u.relevance, u.category) for u in found]

        by_owner = uow.memories.usage_by_owner(owner, None, 10)
        reads = [
            rows(uow.memories.usage_by_thread("th-1", owner, None, 10)),
            rows(uow.memories.usage_by_memory(a, owner, None, 10)),
            rows(uow.memories.usage_by_memory(b, owner, None, 10)),
            rows(uow.memories.usage_by_owner(owner, by_owner[0].id, 1)),
            len(uow.memories.usage_by_owner(UsageOwner("ann", 5), None, 10)),
            rows(uow.memories.usage_by_owner(UsageOwner("ann", 5, "t2"), None, 10)),
            sorted(uow.memories.used_in_thread("th-1", owner, [a, b, 999])),
            sorted(uow.memories.used_in_thread("th-2", owner, [b])),
            sorted(uow.memories.used_in_thread("", owner, [a])),
            sorted(uow.memories.used_in_thread("th-1", owner, [])),
        ]
        uow.memories.delete(a)
        left = rows(uow.memories.usage_by_owner(owner, None, 10))
        return (a, b), (sorted(first), first[a].use_count, first[a].last_used_at is not None,
                        second[a].use_count, empty), reads, left  # fmt: skip

    (a, b), recorded, reads, left = await run(case)
    assert recorded == ([a, b], 1, True, 2, {})
    assert reads == [
        [(a, "th-1", "prompt", 0.9, 1), (b, "th-1", "prompt", 0.5, 2)],
        [(a, "th-1", "prompt", 0.9, 1), (a, "th-2", "again", 0.7, 1)],
        [(b, "th-1", "prompt", 0.5, 2)],  # bob's use is bob's
        [(b, "th-1", "prompt", 0.5, 2)],
        3,
        [],
        [a, b],
        [],
        [],
        [],
    ]
    assert left == [(b, "th-1", "prompt", 0.5, 2)]


async def test_a_memorys_history_keeps_each_version_and_a_deletions_purge_time(run):
    def case(uow):
        mine = uow.memories.insert(_memory(), None, "t1")
        other = uow.memories.insert(_memory(), None, "t1")
        uow.memories.record(mine, UPDATE, ["content"], ChangedBy("r-1", "key-a"))
        second = uow.memories.update(mine.id, {"content": "v2"})
        uow.memories.record(second, UPDATE, ["tier"], ChangedBy(reason="merged"), at=123.0)
        uow.memories.record(other, UPDATE, ["title"], ChangedBy())
        uow.memories.record_deletion(second, ChangedBy("r-2"), 1000.0)
        uow.memories.delete(mine.id)
        history = uow.memories.page(mine.id, None, 10)
        return (
            mine, second,
            [(r.action, r.changed, r.previous.content, r.request_id, r.principal,
              r.purge_after, r.reason) for r in history],
            history[0].previous, history[1].changed_at,
            [r.id for r in uow.memories.page(mine.id, history[0].id, 1)] == [history[1].id],
            uow.memories.last(mine.id).action, uow.memories.last(999),
            uow.memories.purge([mine.id, other.id], 999.0),
            uow.memories.purge([mine.id, other.id], 1000.0),
            uow.memories.page(mine.id, None, 10), len(uow.memories.page(other.id, None, 10)),
        )  # fmt: skip

    (
        mine,
        second,
        history,
        first_kept,
        at,
        paged,
        last,
        none,
        early,
        purged,
        left,
        other,
    ) = await run(case)
    assert history == [
        (UPDATE, ["content"], "c", "r-1", "key-a", 1000.0, ""),
        (UPDATE, ["tier"], "v2", "", "", 1000.0, "merged"),
        (DELETE, [], "v2", "r-2", "", 1000.0, ""),
    ]
    assert first_kept == mine  # the whole version, as it was
    assert (at, paged, last, none) == (123.0, True, DELETE, None)
    # Only a deleted memory's history is purged, and not before its time.
    assert (early, purged, left, other) == (0, 3, [], 1)


async def test_formations_candidates_and_a_selections_answer_are_kept_for_their_retry(run):
    def case(uow):
        session = uow.sessions.insert("s", "", 0, {}, "t1")
        episode = uow.episodes.insert(session.id, "hi", "", {}, None).id
        before = uow.memories.candidates_of(episode)
        uow.memories.put_candidates(episode, [{"title": "x", "n": 1}])
        uow.memories.put_candidates(episode, [{"title": "y", "tags": ["a"]}])
        key = SelectionKey("t1", "ann", 5, "req-1")
        answer = SelectionAnswer([SelectionPick(3, 0.5, 1, False)], "llm", "", 2)
        unanswered = uow.memories.find_selection(key)
        uow.memories.insert_selection(key, "abc", answer)
        return (
            before,
            uow.memories.candidates_of(episode),
            unanswered,
            uow.memories.find_selection(key) == ("abc", answer),
            [uow.memories.find_selection(SelectionKey(*k))
             for k in (("t2", "ann", 5, "req-1"), ("t1", "bob", 5, "req-1"),
                       ("t1", "ann", 6, "req-1"), ("t1", "ann", 5, "req-2"))],
        )  # fmt: skip

    assert await run(case) == (
        None, [{"title": "y", "tags": ["a"]}], None, True, [None, None, None, None],
    )  # fmt: skip


async def test_a_deleted_memorys_words_are_found_in_the_formation_events_that_name_it(run):
    def case(uow):
        session = uow.sessions.insert("s", "", 0, {}, "t1")
        formed_in, changed_in, elsewhere = (
            uow.episodes.insert(session.id, f"e{i}", "", {}, None).id for i in range(3)
        )
        memory = uow.memories.insert(
            _memory(source="formation", source_episode_id=formed_in), None, "t1"
        )
        other = uow.memories.insert(_memory(content="other"), None, "t1")
        uow.memories.record(memory, UPDATE, ["content"], ChangedBy(episode_id=changed_in))
        uow.memories.record(other, UPDATE, ["content"], ChangedBy(episode_id=elsewhere))
        said = {"formation": {"operations": [{"memory_id": memory.id, "content": "secret"}]}}
        events = [
            uow.events.insert(episode, session.id, 0, EXTRACTION_DONE, payload=said)
            for episode in (formed_in, changed_in, elsewhere)
        ]
        named = sorted(uow.erasures.events_naming_memories([memory.id]))
        none = uow.erasures.events_naming_memories([999])
        uow.erasures.rewrite_event(events[0], {"formation": {"operations": []}})
        after = [e.payload for e in uow.events.page_after(0, EventFilter(), 10)]
        return events, named, none, after, said

    events, named, none, after, said = await run(case)
    assert named == [(events[0], said), (events[1], said)]
    assert none == []
    assert after == [{"formation": {"operations": []}}, said, said]
