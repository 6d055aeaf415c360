"""The keyword index's contract (episodes' and memories' ``keyword_search``,
``keyword_matching`` and ``snippets``): the same cases on the fake
(tests/fakes.py), SQLite and PostgreSQL (the ``run`` fixture,
tests/integration/store/conftest.py).

Each store ranks with its own engine (FTS5 with the scope's BM25,
PostgreSQL's ts_rank), so no case compares a score: they pin what all three
agree on, which rows a query's words match (an episode's own turns and its
neighbouring turns, a memory's title and content), every scope and visibility
filter, the limit, a clear-cut order (a row holding more of the words first, a
word in an episode's own turn before one only in its neighbours', the newest
first among equal rows) and what a snippet shows. The words are plain ones
that no stemmer changes and the texts hold no inflected form of a query word:
the stores stem (and SQLite folds diacritics), the fake does not."""

from __future__ import annotations

import time
from typing import Any

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind, MemoryScope, Tier, TimeWindow

BOTH = '"zebra" OR "violin"'


def _fillers(uow, project: int, n: int) -> list[int]:
    """``n`` sessions of one episode each holding no query word."""
    made = []
    for i in range(n):
        s = uow.sessions.insert(f"filler{i}", "", project, {}, "t1", user_id="ann").id
        uow.episodes.insert(s, f"quiet morning {i}", "nothing happened", {}, None, 500.0 + i)
        made.append(s)
    return made


def _scoped_episodes(uow):
    """Project p's sessions of one episode each (one per occur_at), and one
    session of another project; the episode ids by name, the searched
    sessions, the other session."""
    p = uow.projects.insert({"name": "p"}, "t1").id
    q = uow.projects.insert({"name": "q"}, "t1").id
    texts = {
        "both": ("zebra violin concert", "it was loud", 1_000.0),
        "zebra": ("zebra stripes today", "black and white", 2_000.0),
        "violin": ("violin strings today", "made of gut", 3_000.0),
        "both_again": ("zebra violin concert", "it was loud", 6_000.0),
    }
    ids, sessions = {}, []
    for name, (user, answer, at) in texts.items():
        s = uow.sessions.insert(name, "", p, {}, "t1", user_id="ann").id
        ids[name] = uow.episodes.insert(s, user, answer, {}, None, at).id
        sessions.append(s)
    sessions += _fillers(uow, p, 5)
    other = uow.sessions.insert("other", "", q, {}, "t1", user_id="ann").id
    ids["other"] = uow.episodes.insert(other, "zebra violin", "elsewhere", {}, None, 1_500.0).id
    return ids, sessions, other


async def test_episodes_match_the_query_words_in_the_searched_sessions_more_words_first(run):
    def case(uow):
        ids, sessions, other = _scoped_episodes(uow)
        name = {i: n for n, i in ids.items()}
        e = uow.episodes

        def found(*args: Any, **kw: Any) -> list[str]:
            return [name[i] for i, _ in e.keyword_search(*args, **kw)]

        scores = [s for _, s in e.keyword_search(BOTH, sessions, 10)]
        return (
            found(BOTH, sessions, 10),
            found(BOTH, sessions, 3),
            found('"zebra"', sessions, 10),
            sorted(found(BOTH, None, 10)),
            found(BOTH, [other], 10),
            found(BOTH, [], 10),
            found(BOTH, sessions[4:], 10),
            found('"unheard"', sessions, 10),
            all(s > 0 for s in scores),
        )

    (every, three, zebra, everywhere, other, none, fillers, unheard, positive) = await run(case)
    # Holding both words ranks first; two equal rows: the newer first.
    assert every[:2] == ["both_again", "both"]
    assert sorted(every[2:]) == ["violin", "zebra"]
    assert three[:2] == ["both_again", "both"] and len(three) == 3
    assert three[2] in ("violin", "zebra")
    assert sorted(zebra) == ["both", "both_again", "zebra"]
    # None searches every session; an empty list none.
    assert everywhere == ["both", "both_again", "other", "violin", "zebra"]
    assert (other, none, fillers, unheard) == (["other"], [], [], [])
    assert positive


async def test_an_episode_search_keeps_only_episodes_inside_its_window(run):
    def case(uow):
        ids, sessions, _ = _scoped_episodes(uow)
        name = {i: n for n, i in ids.items()}

        def found(window: TimeWindow) -> list[str]:
            return sorted(
                name[i] for i, _ in uow.episodes.keyword_search(BOTH, sessions, 10, window)
            )

        return (
            found(TimeWindow(1_500.0, 6_000.0)),
            found(TimeWindow(start=6_000.0)),
            found(TimeWindow(end=1_000.0)),
            found(TimeWindow(end=1_000.5)),
            found(TimeWindow()),
        )

    assert await run(case) == (
        ["violin", "zebra"],
        ["both_again"],
        [],
        ["both"],
        ["both", "both_again", "violin", "zebra"],
    )


def _conversation(uow) -> tuple[int, list[int]]:
    """One session of three exchanges: each word below is in one turn only."""
    p = uow.projects.insert({"name": "p"}, "t1").id
    s = uow.sessions.insert("s", "", p, {}, "t1", user_id="ann").id
    turns = [
        ("Where is the harbor?", "North of town."),
        ("Tell me more", "Ferries leave hourly."),
        ("What about copper?", "Mined nearby, since 1850."),
    ]
    return s, [
        uow.episodes.insert(s, u, a, {}, None, 1_000.0 + n).id for n, (u, a) in enumerate(turns)
    ]


async def test_an_episode_is_found_by_its_neighbouring_turns_after_its_own_matches(run):
    def case(uow):
        s, (first, middle, last) = _conversation(uow)
        e = uow.episodes
        every = [first, middle, last, 999]
        return (
            (first, middle, last),
            [i for i, _ in e.keyword_search('"copper"', [s], 10)],
            [i for i, _ in e.keyword_search('"ferries"', [s], 10)],
            [i for i, _ in e.keyword_search('"harbor"', [s], 10)],
            e.keyword_matching('"copper"', every),
            e.keyword_matching('"ferries" OR "harbor"', every),
            e.keyword_matching('"copper"', [first]),
            e.keyword_matching('"unheard"', every),
            e.keyword_matching('"copper"', []),
        )

    (first, middle, last), *found = await run(case)
    # The next question's words and the previous answer's are the episode's
    # context: found, after the episode whose own turn holds them.
    assert found[0] == [last, middle]
    assert found[1] == [middle, last]
    assert found[2] == [first]
    assert found[3:] == [{middle, last}, {first, middle, last}, set(), set(), set()]


async def test_a_snippet_shows_the_matching_turn_with_its_hits_bracketed(run):
    def case(uow):
        _, (first, middle, last) = _conversation(uow)
        e = uow.episodes
        every = [first, middle, last]
        return (
            (first, middle, last),
            e.snippets('"copper"', [last]),
            e.snippets('"mined"', every),
            e.snippets('"harbor" OR "north"', [first]),
            e.snippets('"ferries"', [middle]),
            e.snippets('"unheard"', every),
            e.snippets('"copper"', []),
        )

    (first, middle, last), *shown = await run(case)
    assert shown == [
        {last: "What about [copper]?"},
        # An answer's words: the answer, the one episode holding them.
        {last: "[Mined] nearby, since 1850."},
        # Hits in both turns: the user's message.
        {first: "Where is the [harbor]?"},
        {middle: "[Ferries] leave hourly."},
        {},
        {},
    ]


async def test_a_long_turns_snippet_is_cut_around_its_hit(run):
    def case(uow):
        p = uow.projects.insert({"name": "p"}, "t1").id
        s = uow.sessions.insert("s", "", p, {}, "t1").id
        words = [f"w{n}x" for n in range(60)]
        text = " ".join(words[:30] + ["harbor"] + words[30:])
        i = uow.episodes.insert(s, text, "ok", {}, None, 1_000.0).id
        return text, uow.episodes.snippets('"harbor"', [i])[i]

    text, snippet = await run(case)
    assert "[harbor]" in snippet
    assert len(snippet) < len(text) / 2
    # Cut at its start too: the first words are not shown.
    assert "w0x " not in snippet


def _memory(**given: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": int(MemoryKind.USER), "title": "note", "content": "c", "tier": int(Tier.LONGTERM),
        "project_id": 0, "agent_id": "", "user_id": "ann", "session_id": 0,
        "confidence": 0.9, "metadata": {},
    }  # fmt: skip
    values.update(given)
    return values


def _memories(uow, now: float) -> dict[str, int]:
    """Ann's view of project 5 in tenant t1: who sees which of these is the
    visibility rule's; ten plain project notes besides."""
    P, S, A = int(MemoryKind.PROJECT), int(Tier.SESSION), int(Tier.ARCHIVE)
    rows = {
        "both": ("t1", _memory(kind=P, project_id=5, user_id="", title="music",
                               content="zebra violin")),
        "zebra": ("t1", _memory(kind=P, project_id=5, user_id="", content="zebra only here")),
        "violin": ("t1", _memory(content="violin practice daily")),
        "bobs": ("t1", _memory(project_id=5, user_id="bob", content="zebra bob")),
        "elsewhere": ("t1", _memory(kind=P, project_id=6, user_id="", content="zebra elsewhere")),
        "session": ("t1", _memory(project_id=5, tier=S, session_id=7, content="zebra session")),
        "archived": ("t1", _memory(project_id=5, tier=A, content="zebra archived note")),
        "expiring": ("t1", _memory(project_id=5, expire_at=now + 50, content="zebra expiring")),
        "theirs": ("t2", _memory(content="zebra other tenant")),
        "agents": ("t1", _memory(kind=P, project_id=5, user_id="", agent_id="a",
                                 content="zebra agent note")),
    }  # fmt: skip
    ids = {n: uow.memories.insert(values, None, tenant).id for n, (tenant, values) in rows.items()}
    for n in range(10):
        uow.memories.insert(
            _memory(kind=P, project_id=5, user_id="", content=f"plain {n}"), None, "t1"
        )
    return ids


async def test_memories_match_in_the_scope_they_are_visible_in_more_words_first(run):
    def case(uow):
        now = time.time()
        ids = _memories(uow, now)
        name = {i: n for n, i in ids.items()}

        def found(scope: MemoryScope, limit: int = 20, **kw: Any) -> list[str]:
            return [name[m.id] for m, _ in uow.memories.keyword_search(BOTH, scope, limit, **kw)]

        ann = MemoryScope(project_id=5, user_id="ann", session_id=7)
        unbound = sorted(found(ann))
        token = tenancy.bind(tenancy.Caller("t1"))
        try:
            return unbound, [
                found(ann),
                found(ann, 2),
                sorted(found(MemoryScope(project_id=5, user_id="ann", session_id=8))),
                sorted(found(MemoryScope(project_id=5, user_id="ann", include_archived=True))),
                sorted(found(ann, at=now + 100)),
                sorted(found(MemoryScope(project_id=5, user_id="ann", agent_id="a"))),
                sorted(found(MemoryScope(user_id="ann"))),
                sorted(found(MemoryScope(project_id=5))),
                found(MemoryScope()),
                all(score > 0 for _, score in uow.memories.keyword_search(BOTH, ann, 20)),
            ]
        finally:
            tenancy.reset(token)

    (
        unbound,
        (ann, two, other_session, archived, later, agent, user, project, nobody, positive),
    ) = await run(case)
    seen = ["agents", "expiring", "session", "violin", "zebra"]
    assert ann[0] == "both" and sorted(ann[1:]) == seen
    assert two[0] == "both" and len(two) == 2
    # Another tenant's memory of ann's: seen only with no tenant bound.
    assert unbound == sorted(["both", "theirs", *seen])
    assert other_session == ["agents", "both", "expiring", "violin", "zebra"]
    assert archived == ["agents", "archived", "both", "expiring", "violin", "zebra"]
    assert later == ["agents", "both", "session", "violin", "zebra"]
    assert agent == ["agents"]
    assert user == ["violin"]
    assert project == ["agents", "both", "zebra"]
    assert (nobody, positive) == ([], True)


async def test_a_memorys_title_and_content_match_whatever_its_scope(run):
    def case(uow):
        ids = _memories(uow, time.time())
        name = {i: n for n, i in ids.items()}
        every = [*ids.values(), 999]

        def matching(match: str, among=every) -> list[str]:
            return sorted(name[i] for i in uow.memories.keyword_matching(match, among))

        return (
            matching('"violin"'),
            matching('"music"'),
            matching('"bob" OR "tenant"'),
            matching('"zebra"', [ids["both"], ids["violin"]]),
            matching('"unheard"'),
            matching('"zebra"', []),
        )

    assert await run(case) == (
        ["both", "violin"],
        ["both"],
        ["bobs", "theirs"],
        ["both"],
        [],
        [],
    )
