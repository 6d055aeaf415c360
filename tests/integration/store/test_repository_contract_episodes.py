"""The episode repository's contract: the same cases on the fake
(tests/fakes.py), SQLite and PostgreSQL (the ``run`` fixture,
tests/integration/store/conftest.py). The keyword index has its own
contract file (test_repository_contract_keyword.py)."""

from __future__ import annotations

import time

from nexus_grpc.core import jobs
from nexus_grpc.core.models import Backlog, JobState, NewEpisode
from nexus_grpc.errors import NotFound


def _two_projects(uow):
    """Tenant t1's project p (retention an hour) and t2's project q (none),
    a session in each and one in no project; ids of (p, q), the sessions."""
    p = uow.projects.insert({"name": "p", "retention": 3600.0}, "t1").id
    q = uow.projects.insert({"name": "q"}, "t2").id
    ours = uow.sessions.insert("ours", "", p, {}, "t1", user_id="ann").id
    theirs = uow.sessions.insert("theirs", "", q, {}, "t2", user_id="bob").id
    loose = uow.sessions.insert("loose", "", 0, {}, "t1").id
    return (p, q), (ours, theirs, loose)


async def test_a_sessions_episodes_are_listed_oldest_first_and_paged_newest_first(run):
    def case(uow):
        _, (ours, theirs, _) = _two_projects(uow)
        mine = [
            uow.episodes.insert(ours, f"m{i}", "", {}, None, 1_000.0 + i * 100).id for i in range(5)
        ]
        uow.episodes.insert(theirs, "other", "", {}, None, 1_050.0)
        e = uow.episodes

        def texts(found) -> list[str]:
            return [x.user_message for x in found]

        return (
            texts(e.list_for_session(ours)),
            texts(e.list_for_session(ours, mine[1], 2)),
            texts(e.list_for_session(ours, since=1_200.0)),
            texts(e.list_page(ours, None, 2)),
            texts(e.list_page(ours, mine[3], 2)),
            texts(e.list_page(ours, None, 10, since=1_250.0)),
            texts(e.list_for_session(999)),
        )

    assert await run(case) == (
        ["m0", "m1", "m2", "m3", "m4"],
        ["m2", "m3"],
        ["m2", "m3", "m4"],
        ["m4", "m3"],
        ["m2", "m1"],
        ["m4", "m3"],
        [],
    )


async def test_an_episodes_session_project_and_time_are_read_and_a_missing_one_is_none(run):
    def case(uow):
        (p, q), (ours, theirs, loose) = _two_projects(uow)
        a = uow.episodes.insert(ours, "a", "", {}, None, 5_000.0).id
        b = uow.episodes.insert(theirs, "b", "", {}, None, 6_000.0).id
        c = uow.episodes.insert(loose, "c", "", {}, None, 7_000.0).id
        try:
            uow.episodes.get(a, "t2")
            other_tenant = None
        except NotFound as exc:
            other_tenant = (exc.resource.resource_type, exc.message)
        return (
            uow.episodes.sessions_of([a, c, 999]) == {a: ours, c: loose},
            [uow.episodes.scope_of(i) for i in (a, b, c)] == [(ours, p), (theirs, q), (loose, 0)],
            uow.episodes.scope_of(999),
            [uow.episodes.occur_at_of(i) for i in (a, c, 999)],
            uow.episodes.get(a, "t1").user_message,
            other_tenant,
        )

    ids_ok, scopes_ok, missing, times, mine, other_tenant = await run(case)
    assert (ids_ok, scopes_ok, missing) == (True, True, None)
    assert times == [5_000.0, 7_000.0, None]
    assert mine == "a"
    assert other_tenant[0] == "episode"
    assert "does not exist" in other_tenant[1]


async def test_retention_reads_the_projects_oldest_and_past_episodes_and_its_cutoff(run):
    def case(uow):
        (p, q), (ours, theirs, loose) = _two_projects(uow)
        empty = uow.projects.insert({"name": "empty"}, "t1").id
        made = [
            uow.episodes.insert(ours, f"m{i}", "", {}, None, at).id
            for i, at in enumerate((3_000.0, 1_000.0, 2_000.0, 4_000.0))
        ]
        uow.episodes.insert(theirs, "older elsewhere", "", {}, None, 500.0)
        return (
            made,
            uow.episodes.oldest_in_project(p),
            uow.episodes.oldest_in_project(q),
            uow.episodes.oldest_in_project(empty),
            uow.episodes.past_retention(p, 3_500.0, 10),
            uow.episodes.past_retention(p, 3_500.0, 2),
            uow.episodes.past_retention(p, 500.0, 10),
            [uow.episodes.retention_cutoff(s, 10_000.0) for s in (ours, theirs, loose, 999)],
        )

    made, oldest, theirs, empty, past, first_two, none, cutoffs = await run(case)
    assert (oldest, theirs, empty) == (1_000.0, 500.0, None)
    assert past == made[:3]  # by id, not by time
    assert first_two == made[:2]
    assert none == []
    # The project keeps an hour; the other keeps all; no project, or no session: all.
    assert cutoffs == [10_000.0 - 3600.0, None, None, None]


async def test_a_backlog_counts_what_each_job_still_waits_for_and_a_rebuild_marks_all_indexed(
    run,
):
    def case(uow):
        _, (ours, theirs, loose) = _two_projects(uow)
        a, b, c = (uow.episodes.insert(ours, x, "", {}, None).id for x in "abc")
        uow.episodes.insert_many(
            [NewEpisode(theirs, "d", "", {}, None, created_at=time.time() + 3600)]
        )
        done = uow.episodes.insert(loose, "e", "", {}, None, embedded=True).id
        uow.episodes.set_embed_state([a, b], JobState.FAILED, "x" * 3000)
        uow.episodes.set_extract_state(a, JobState.DONE)
        uow.episodes.set_extract_state(b, JobState.FAILED, "y" * 3000)
        uow.episodes.set_memory_pending([a, c])
        before = (
            uow.episodes.backlog([ours]),
            uow.episodes.backlog([ours, theirs, loose]),
            uow.episodes.backlog([]),
        )
        errors = (len(uow.episodes.get(a).embed_error), len(uow.episodes.get(b).extract_error))
        # A rebuild that began now covers every episode made by now, failed or
        # not, and not the one made later (an hour ahead).
        uow.episodes.mark_indexed_before(time.time() + 1)
        after = uow.episodes.backlog([ours, theirs, loose])
        states = [(uow.episodes.get(i).embed_state, uow.episodes.get(i).embed_error)
                  for i in (a, c, done)]  # fmt: skip
        return before, errors, after, states

    before, errors, after, states = await run(case)
    assert before == (Backlog(3, 1, 1, 2), Backlog(5, 2, 3, 2), Backlog(0, 0, 0, 0))
    assert errors == (2000, 2000)
    assert after == Backlog(5, 1, 3, 2)
    assert states == [(JobState.DONE, "")] * 3


async def test_failed_extractions_are_reset_to_pending_and_named(run):
    def case(uow):
        _, (ours, theirs, _) = _two_projects(uow)
        ids = [uow.episodes.insert(s, "x", "", {}, None).id for s in (ours, theirs, ours, ours)]
        for i in (ids[2], ids[1]):
            uow.episodes.set_extract_state(i, JobState.FAILED, "model away")
        uow.episodes.set_extract_state(ids[3], JobState.DONE)
        reset = uow.episodes.reset_failed_extractions()
        again = uow.episodes.reset_failed_extractions()
        states = [(uow.episodes.get(i).extract_state, uow.episodes.get(i).extract_error)
                  for i in ids]  # fmt: skip
        return ids, reset, again, states

    ids, reset, again, states = await run(case)
    assert reset == [ids[1], ids[2]]
    assert again == []
    assert states == [(JobState.PENDING, "")] * 3 + [(JobState.DONE, "")]


async def test_formation_waits_for_an_earlier_episode_of_its_session_still_pending(run):
    def case(uow):
        _, (ours, theirs, _) = _two_projects(uow)
        first = uow.episodes.insert(ours, "first", "", {}, None, 2_000.0)
        same_time = uow.episodes.insert(ours, "same time", "", {}, None, 2_000.0)
        earlier = uow.episodes.insert(ours, "earlier, stored later", "", {}, None, 1_000.0)
        elsewhere = uow.episodes.insert(theirs, "elsewhere", "", {}, None, 500.0)
        get = uow.episodes.get
        uow.episodes.set_memory_pending([elsewhere.id, same_time.id])
        # Only an episode of the same session, earlier or stored first at the
        # same time, holds one back.
        ahead = [uow.episodes.formation_ahead(get(e.id)) for e in (first, same_time, earlier)]
        uow.episodes.set_memory_state(same_time.id, JobState.DONE)
        uow.episodes.set_memory_pending([first.id])
        after = [uow.episodes.formation_ahead(get(e.id)) for e in (first, same_time, earlier)]
        return (first.id, same_time.id), ahead, after

    (first, same_time), ahead, after = await run(case)
    assert ahead == [None, None, None]
    assert after == [None, first, None]


async def test_a_scope_sample_is_its_sessions_newest_texts(run):
    def case(uow):
        _, (ours, theirs, loose) = _two_projects(uow)
        for session, text in ((ours, "a"), (loose, "b"), (theirs, "c"), (ours, "d")):
            uow.episodes.insert(session, text, f"{text}!", {}, None)
        return (
            uow.episodes.scope_sample([ours, loose], 10),
            uow.episodes.scope_sample([ours, loose], 2),
            uow.episodes.scope_sample([theirs], 10),
            uow.episodes.scope_sample([999], 10),
        )

    assert await run(case) == (
        ["d\nd!", "b\nb!", "a\na!"],
        ["d\nd!", "b\nb!"],
        ["c\nc!"],
        [],
    )


async def test_a_summarys_progress_counts_only_the_episodes_after_the_last_it_covers(run):
    def case(uow):
        _, (ours, theirs, _) = _two_projects(uow)
        ids = [uow.episodes.insert(ours, "x" * 10, "ok", {}, None).id for _ in range(4)]
        uow.episodes.insert(theirs, "y", "", {}, None)
        progress = [uow.episodes.summary_progress(ours, 3, 100)]
        uow.summaries.insert(
            session_id=ours, project_id=0, content="s",
            first_episode_id=ids[0], last_episode_id=ids[1], episode_count=2,
        )  # fmt: skip
        progress.append(uow.episodes.summary_progress(ours, 3, 100))
        progress.append(uow.episodes.summary_progress(ours, 2, 100))
        progress.append(uow.episodes.summary_progress(theirs, 1, 100))
        uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, [theirs])
        progress.append(uow.episodes.summary_progress(theirs, 1, 100))
        return [(p.queued, p.new_episodes, p.chars) for p in progress]

    # Three new of four; two after the summary; the characters are the
    # session's first turns', summary or not.
    assert await run(case) == [
        (False, 3, 48),
        (False, 2, 0),
        (False, 2, 48),
        (False, 1, 1),
        (True, 0, 0),
    ]


async def test_a_blank_request_id_is_no_request_id(run):
    def case(uow):
        _, (ours, _, _) = _two_projects(uow)
        uow.episodes.insert(ours, "a", "", {}, "", None)
        kept = uow.episodes.insert(ours, "b", "", {}, "r-1", None).id
        return uow.episodes.find_by_request_id(ours, ""), uow.episodes.find_by_request_id(
            ours, "r-1"
        ).id == kept

    assert await run(case) == (None, True)
