"""The graph repository's contract (core/repositories.py ``GraphRepository``):
the same cases on the unit tier's FakeGraph (tests/fakes.py), SQLite and
PostgreSQL, through the ``run`` fixture (tests/integration/store/conftest.py).

Each case builds two graphs (or two tenants) so that a read that leaks across
them fails, and asserts orders and tie-breaks, not only membership: the unit
tier's graph rules stand on these answers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from nexus_grpc.core.graph import (
    ASSERT,
    CURRENT,
    END,
    HISTORY,
    METHOD_EXACT,
    PENDING,
    RESOLVED,
    EntityMerge,
    Interval,
    MergedSource,
    When,
)
from nexus_grpc.core.names import name_key
from nexus_grpc.errors import NotFound


def _people(uow, graph, *names, etype="person"):
    return [uow.graph.insert_entity(graph, n, etype, None, source="manual") for n in names]


def _refused(fn, *args, **kwargs) -> str:
    try:
        fn(*args, **kwargs)
    except NotFound as exc:
        return exc.message
    return "answered"


async def test_an_entity_takes_its_graphs_tenant_a_display_name_and_its_first_alias(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        loose = uow.sessions.insert("loose", "", 0, {}, "t2")
        session = uow.sessions.insert("s", "", project.id, {}, "t1")
        episode = uow.episodes.insert(session.id, "met Priya", "", {}, None, 1_000.0)
        priya = uow.graph.insert_entity(
            (project.id, 0), "Dr. Priya Raman's", "person", "a chemist", source="extraction",
            method=METHOD_EXACT, episode_id=episode.id, confidence=0.5, resolution=PENDING,
        )  # fmt: skip
        porto = uow.graph.insert_entity((0, loose.id), "  Porto ", "place", None, source="manual")
        legacy = uow.graph.insert_entity(
            (0, 0), "Old", "thing", None, source="manual", fallback_tenant="t9"
        )
        e = uow.graph.get_entity(priya, "t1")
        shown = (e.name, e.type, e.notes, e.mention_count, e.confidence, e.source,
                 e.project_id, e.session_id, e.tenant, e.aliases, e.resolution,
                 e.created_at == e.last_seen_at)  # fmt: skip
        [alias] = uow.graph.list_aliases(priya, None, 10)
        return (
            shown,
            (alias.name, alias.norm, alias.method, alias.score, alias.episode_id == episode.id),
            [
                (g.name, g.tenant, g.confidence, g.resolution, g.aliases)
                for g in uow.graph.get_entities([legacy, porto, 999, porto]).values()
            ],
            list(uow.graph.get_entities([priya, porto, legacy], "t2")),
            (
                uow.graph.entity_graph(priya),
                uow.graph.entity_graph(porto, "t2"),
                uow.graph.entity_graph(porto, "t1"),
                uow.graph.entity_graph(999),
            ),  # fmt: skip
            (
                uow.graph.entity_id_of(name_key("Priya Raman", "person"), "person", project.id, 0),
                uow.graph.entity_id_of(name_key("Priya Raman", "person"), "place", project.id, 0),
                uow.graph.entity_id_of("porto", "place", 0, loose.id),
                uow.graph.entity_id_of("porto", "place", project.id, 0),
            ),  # fmt: skip
            (_refused(uow.graph.get_entity, priya, "t2"), _refused(uow.graph.get_entity, 999)),
            (project.id, loose.id, priya, porto, legacy),
        )

    shown, alias, many, t2, graphs, ids, refusals, made = await run(case)
    pid, loose, priya, porto, legacy = made
    assert shown == (
        "Priya Raman", "person", "a chemist", 1, 0.5, "extraction", pid, 0, "t1",
        ("Priya Raman",), PENDING, True,
    )  # fmt: skip
    assert alias == ("Priya Raman", name_key("Priya Raman", "person"), METHOD_EXACT, 1.0, True)
    assert (
        many
        == [
            ("Porto", "t2", 1.0, RESOLVED, ("Porto",)),
            ("Old", "t9", 1.0, RESOLVED, ("Old",)),
        ][:: 1 if porto < legacy else -1]
    )
    assert t2 == [porto]
    assert graphs == ((pid, 0), (0, loose), None, None)
    assert ids == (priya, None, porto, None)
    assert refusals == (f"entity {priya} does not exist", "entity 999 does not exist")


async def test_a_new_alias_is_one_per_name_whatever_its_case_and_the_best_name_shows(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        graph = (project.id, 0)
        priya, other = _people(uow, graph, "Priya", "Priya Raman Jr")
        added = [
            uow.graph.add_alias(priya, "Priya Raman", method=METHOD_EXACT, score=0.8, at=50.0),
            uow.graph.add_alias(priya, "PRIYA RAMAN", method=METHOD_EXACT),
            uow.graph.add_alias(priya, "P. Raman", method=METHOD_EXACT, refresh=False),
        ]
        after_first = uow.graph.get_entity(priya)
        # The best name is one another entity of the graph already holds: kept.
        uow.graph.add_alias(priya, "Priya Raman Jr", method=METHOD_EXACT)
        kept = uow.graph.get_entity(priya).name
        aliases = uow.graph.list_aliases(priya, None, 10)
        page = uow.graph.list_aliases(priya, aliases[0].id, 2)
        return (
            added,
            (after_first.name, after_first.aliases),
            kept,
            [(a.name, a.method, a.score) for a in aliases],
            aliases[1].created_at,
            [a.name for a in page],
            uow.graph.get_entity(other).aliases,
        )

    added, first, kept, aliases, at, page, other = await run(case)
    assert added == [True, False, True]
    assert first == ("Priya Raman", ("Priya", "Priya Raman", "P. Raman"))
    assert kept == "Priya Raman"
    assert aliases == [
        ("Priya", "new", 1.0), ("Priya Raman", "exact", 0.8), ("P. Raman", "exact", 1.0),
        ("Priya Raman Jr", "exact", 1.0),
    ]  # fmt: skip
    assert at == 50.0
    assert page == ["Priya Raman", "P. Raman"]
    assert other == ("Priya Raman Jr",)


async def test_a_name_added_quietly_shows_when_refreshed_and_a_projects_aliases_page(run):
    def case(uow):
        p1 = uow.projects.insert({"name": "p1"}, "t1")
        p2 = uow.projects.insert({"name": "p2"}, "t1")
        loose = uow.sessions.insert("loose", "", p1.id, {}, "t1")
        ann, bob = _people(uow, (p1.id, 0), "Ann", "Bob")
        _people(uow, (p2.id, 0), "Cy")
        _people(uow, (0, loose.id), "Dee")
        uow.graph.add_alias(ann, "Ann Lee", method=METHOD_EXACT, refresh=False)
        quiet = uow.graph.get_entity(ann).name
        uow.graph.refresh_display_name(ann)
        uow.graph.refresh_display_name(999)
        shown = uow.graph.get_entity(ann).name
        aliases = uow.graph.aliases_in_project(p1.id, None, 10)
        return (
            quiet,
            shown,
            uow.graph.entity_id_of(name_key("Ann Lee", "person"), "person", p1.id, 0) == ann,
            [(a.entity_id, a.name) for a in aliases],
            [a.name for a in uow.graph.aliases_in_project(p1.id, aliases[0].id, 1)],
            (ann, bob),
        )

    quiet, shown, keyed, aliases, page, (ann, bob) = await run(case)
    assert (quiet, shown, keyed) == ("Ann", "Ann Lee", True)
    assert aliases == [(ann, "Ann"), (bob, "Bob"), (ann, "Ann Lee")]
    assert page == ["Bob"]


async def test_entities_are_found_by_key_in_their_own_graph_only(run):
    def case(uow):
        p1 = uow.projects.insert({"name": "p1"}, "t1")
        p2 = uow.projects.insert({"name": "p2"}, "t2")
        loose = uow.sessions.insert("loose", "", 0, {}, "t1")
        g1, g2, g3 = (p1.id, 0), (p2.id, 0), (0, loose.id)
        ann = _people(uow, g1, "Ann")[0]
        acme = uow.graph.insert_entity(g1, "Ann", "org", None, source="manual")
        bob = _people(uow, g1, "Bob")[0]
        uow.graph.add_alias(bob, "Ann", method=METHOD_EXACT)
        uow.graph.mention(bob, None)
        elsewhere = _people(uow, g2, "Ann")[0]
        session_ann = _people(uow, g3, "Ann")[0]
        key = name_key("Ann", "person")
        named = uow.graph.entities_named(p1.id, 0, [key, "nobody"], 10)
        return (
            (ann, acme, bob, elsewhere, session_ann),
            uow.graph.entities_with_key(g1, key, ["person", "org"]),
            uow.graph.entities_with_key(g1, key, ["org"]),
            uow.graph.entities_with_key(g3, key, ["person"]),
            [(e.id, e.mention_count) for e in named],
            [e.id for e in uow.graph.entities_named(p1.id, 0, [key], 1)],
            uow.graph.entities_named(p1.id, 0, [], 10),
            [e.id for e in uow.graph.entities_named(0, loose.id, [key], 10)],
        )

    ids, both, orgs, loose, named, first, empty, session = await run(case)
    ann, acme, bob, elsewhere, session_ann = ids
    assert both == sorted([ann, acme, bob])
    assert orgs == [acme]
    assert loose == [session_ann]
    # Most mentioned first, then by id.
    assert named == [(bob, 2), (ann, 1), (acme, 1)]
    assert first == [bob]
    assert empty == []
    assert session == [session_ann]


async def test_entities_are_listed_by_type_graph_tenant_and_name_oldest_first(run):
    def case(uow):
        p1 = uow.projects.insert({"name": "p1"}, "t1")
        p2 = uow.projects.insert({"name": "p2"}, "t2")
        loose = uow.sessions.insert("loose", "", 0, {}, "t1")
        ann, bob = _people(uow, (p1.id, 0), "Ann", "Bob")
        oslo = uow.graph.insert_entity((p1.id, 0), "Oslo", "place", None, source="manual")
        cy = _people(uow, (p2.id, 0), "Cy")[0]
        dee = _people(uow, (0, loose.id), "Dee")[0]
        uow.graph.add_alias(dee, "Annie", method=METHOD_EXACT)

        def listed(*args, **kwargs):
            return [e.id for e in uow.graph.list_entities(*args, **kwargs)]

        return (ann, bob, oslo, cy, dee), [
            listed("", 0, None, 100),
            listed("person", 0, None, 100),
            listed("", p1.id, None, 100),
            listed("", p1.id, ann, 1),
            listed("", 0, None, 100, session_id=loose.id),
            listed("", p1.id, None, 100, session_id=loose.id),
            listed("", 0, None, 100, tenant="t2"),
            listed("", 0, None, 100, keys=[name_key("Annie", "person"), name_key("Bob", "person")]),
            listed("place", p1.id, None, 100, tenant="t1"),
        ]

    (ann, bob, oslo, cy, dee), pages = await run(case)
    assert pages == [
        [ann, bob, oslo, cy, dee],
        [ann, bob, cy, dee],
        [ann, bob, oslo],
        [bob],
        [dee],
        [],
        [cy],
        [bob, dee],
        [oslo],
    ]


async def test_mentions_count_once_an_episode_and_the_last_seen_come_last(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        other = uow.projects.insert({"name": "q"}, "t1")
        session = uow.sessions.insert("s", "", project.id, {}, "t1")
        early = uow.episodes.insert(session.id, "early words", "", {}, None, 100.0)
        late = uow.episodes.insert(session.id, "late words", "", {}, None, 300.0)
        middle = uow.episodes.insert(session.id, "middle words", "", {}, None, 200.0)
        graph = (project.id, 0)
        ann, bob, cy = _people(uow, graph, "Ann", "Bob", "Cy")
        elsewhere = _people(uow, (other.id, 0), "Elsewhere")[0]
        uow.graph.mention(elsewhere, None, episode_id=early.id)
        for episode in (early, late, late, middle):
            uow.graph.mention(ann, None, episode_id=episode.id)
        uow.graph.mention(ann, "a dancer", confidence=0.25)
        uow.graph.mention(ann, None)
        first = uow.graph.get_entity(ann)
        uow.graph.add_mentions(ann, -10, "ignored: she has notes")
        uow.graph.add_mentions(bob, 3, "a painter")
        uow.graph.set_notes(cy, "a sculptor")
        uow.graph.set_resolution(cy, PENDING)
        uow.graph.mention(bob, None)  # seen last
        after = uow.graph.get_entities([ann, bob, cy])
        links = uow.graph.episode_links_in_project(project.id, None, 100)
        return (
            (ann, bob, cy),
            (early.id, middle.id, late.id),
            (first.mention_count, first.notes, first.confidence),
            [(e.mention_count, e.notes, e.resolution) for e in after.values()],
            uow.graph.recent_mentions(ann, 2),
            [e.id for e in uow.graph.recent_entities(project.id, 2)],
            links,
            uow.graph.episode_links_in_project(project.id, links[1], 1),
            uow.graph.episode_links_in_project(other.id, None, 100) == [(elsewhere, early.id)],
        )

    ids, episodes, first, after, recent, seen, links, page, other = await run(case)
    ann, bob, cy = ids
    early, middle, late = episodes
    assert first == (6, "a dancer", 0.25)
    assert after == [(0, "a dancer", "resolved"), (5, "a painter", "resolved"),
                     (1, "a sculptor", PENDING)]  # fmt: skip
    assert recent == ["late words", "middle words"]
    assert seen == [ann, bob]
    assert links == [(ann, early), (ann, late), (ann, middle)]
    assert page == [(ann, middle)]
    assert other is True


async def test_resolution_reads_keys_words_and_blocks_of_one_graph(run):
    def case(uow):
        p1 = uow.projects.insert({"name": "p1"}, "t1")
        p2 = uow.projects.insert({"name": "p2"}, "t1")
        graph = (p1.id, 0)
        priya, raman, ravi = _people(uow, graph, "Priya Raman", "Raman Kumar", "Ravi")
        acme = uow.graph.insert_entity(graph, "Acme Labs", "org", "a lab", source="manual")
        _people(uow, (p2.id, 0), "Priya Raman")
        uow.graph.add_distinction(raman, priya, None)
        uow.graph.add_distinction(priya, raman, None)
        key = name_key("Priya Raman", "person")

        def ids(rows):
            return [r.id for r in rows]

        [row] = uow.graph.candidate_rows([priya, 999])
        return (priya, raman, ravi, acme), (
            (row.name, row.name_key, row.type, row.notes, row.resolution, row.keys,
             row.distinct_from),
            ids(uow.graph.resolution_candidates(graph, [key], [], word_limit=10)),
            ids(uow.graph.resolution_candidates(graph, [], ["raman", "labs"], word_limit=10)),
            len(uow.graph.resolution_candidates(graph, [], ["raman"], word_limit=1)),
            ids(uow.graph.resolution_candidates(graph, ["nobody"], ["nobody"], word_limit=5)),
            ids(uow.graph.block_candidates(graph, ["ra"], ["person"], limit=2)),
            ids(uow.graph.block_candidates(graph, ["ra"], ["person"], limit=3)),
            ids(uow.graph.block_candidates(graph, ["lab", "rav"], ["org"], limit=5)),
            ids(uow.graph.block_candidates(graph, ["rav"], ["person", "org"], limit=5)),
            uow.graph.candidate_rows([]),
            uow.graph.candidate_rows([raman])[0].distinct_from,
        )  # fmt: skip

    (priya, raman, ravi, acme), got = await run(case)
    assert got[0] == (
        "Priya Raman", name_key("Priya Raman", "person"), "person", None, RESOLVED,
        frozenset({name_key("Priya Raman", "person")}), frozenset({raman}),
    )  # fmt: skip
    assert got[1:] == (
        [priya],
        [priya, raman, acme],
        1,
        [],
        # "ra" starts "raman" twice (Priya Raman's, Raman Kumar's) and "ravi"
        # once: three rows, too many for a block of two.
        [],
        [priya, raman, ravi],
        [acme],
        [ravi],
        [],
        frozenset({priya}),
    )


async def test_a_block_holding_at_most_its_limit_is_read(run):
    def case(uow):
        graph = (uow.projects.insert({"name": "p"}, "t1").id, 0)
        ada, ava = _people(uow, graph, "Ada", "Ava")
        _people(uow, graph, "Bo")
        return (ada, ava), [
            [r.id for r in uow.graph.block_candidates(graph, ["a"], ["person"], limit=limit)]
            for limit in (1, 2)
        ]

    (ada, ava), found = await run(case)
    assert found == [[], [ada, ava]]


async def test_tokens_follow_the_aliases_when_rebuilt(run):
    def case(uow):
        graph = (uow.projects.insert({"name": "p"}, "t1").id, 0)
        ann, bob = _people(uow, graph, "Ann Lee", "Bob")

        def by_word(word):
            return [r.id for r in uow.graph.resolution_candidates(graph, [], [word], word_limit=9)]

        moved = uow.graph.move_aliases(ann, bob)
        before = by_word("lee")
        uow.graph.rebuild_tokens(ann)
        uow.graph.rebuild_tokens(bob)
        uow.graph.rebuild_tokens(999)
        return (ann, bob), moved, before, by_word("lee"), by_word("bob")

    (ann, bob), moved, before, after, bob_word = await run(case)
    assert moved == ["Ann Lee"]
    assert before == [ann]
    assert after == [bob]
    assert bob_word == [bob]


PLACES = ("priya", "porto", "lisbon", "oslo", "acme")


def _two_graphs_of_facts(uow):
    """Priya lived in Porto [100, 200), lives in Lisbon from 200 and works at
    Acme; Lisbon is twinned with Oslo. Another project has its own Priya."""
    p1 = uow.projects.insert({"name": "p1"}, "t1")
    p2 = uow.projects.insert({"name": "p2"}, "t2")
    graph = (p1.id, 0)
    priya = _people(uow, graph, "Priya")[0]
    porto, lisbon, oslo = (
        uow.graph.insert_entity(graph, n, "place", None, source="manual")
        for n in ("Porto", "Lisbon", "Oslo")
    )
    acme = uow.graph.insert_entity(graph, "Acme", "org", None, source="manual")
    uow.graph.write_intervals(
        priya, "lives_in",
        [Interval(porto, 100.0, 200.0, mentions=2, notes="flat"),
         Interval(lisbon, 200.0, None, mentions=1)],
    )  # fmt: skip
    uow.graph.write_intervals(priya, "works_at", [Interval(acme, 150.0, None, mentions=1)])
    uow.graph.write_intervals(lisbon, "twinned_with", [Interval(oslo, 50.0, None, mentions=1)])
    far = _people(uow, (p2.id, 0), "Priya", "Far")
    uow.graph.write_intervals(far[0], "knows", [Interval(far[1], 10.0, None, mentions=1)])
    ids = {"priya": priya, "porto": porto, "lisbon": lisbon, "oslo": oslo, "acme": acme,
           "far": far[0], "far2": far[1], "p1": p1.id, "p2": p2.id}  # fmt: skip
    rel = {
        (r.from_id, r.label, r.to_id): r.id
        for e in (priya, lisbon, far[0])
        for r in uow.graph.list_relationships(e, False, when=HISTORY)
    }
    return ids, rel


async def test_relationships_are_read_as_of_a_time_in_id_order_and_by_page(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, lisbon = ids["priya"], ids["lisbon"]

        def listed(entity_id, inbound, *, after=None, limit=-1, when=CURRENT):
            found = uow.graph.list_relationships(entity_id, inbound, after, limit, when)
            return [(r.label, r.to_id, r.valid_at, r.invalid_at) for r in found]

        return ids, rel, (
            listed(priya, False),
            listed(priya, False, when=HISTORY),
            listed(priya, False, when=When(as_of=150.0)),
            listed(priya, False, when=When(as_of=200.0)),
            listed(priya, False, when=When(as_of=50.0)),
            listed(lisbon, True),
            listed(lisbon, False),
            listed(priya, False, after=rel[(priya, "lives_in", ids["porto"])], limit=1,
                   when=HISTORY),
            listed(priya, False, limit=0),
            [r.id for r in uow.graph.get_relationships(
                [rel[(priya, "works_at", ids["acme"])], 9999,
                 rel[(priya, "lives_in", ids["porto"])]])],
            uow.graph.get_relationships([]),
        )  # fmt: skip

    ids, rel, got = await run(case)
    priya, porto, lisbon, oslo, acme = (
        ids[k] for k in ("priya", "porto", "lisbon", "oslo", "acme")
    )
    assert got == (
        [("lives_in", lisbon, 200.0, None), ("works_at", acme, 150.0, None)],
        [("lives_in", porto, 100.0, 200.0), ("lives_in", lisbon, 200.0, None),
         ("works_at", acme, 150.0, None)],
        [("lives_in", porto, 100.0, 200.0), ("works_at", acme, 150.0, None)],
        [("lives_in", lisbon, 200.0, None), ("works_at", acme, 150.0, None)],
        [],
        [("lives_in", lisbon, 200.0, None), ("twinned_with", oslo, 50.0, None)],
        [("twinned_with", oslo, 50.0, None)],
        [("lives_in", lisbon, 200.0, None)],
        [],
        sorted([rel[(priya, "works_at", acme)], rel[(priya, "lives_in", porto)]]),
        [],
    )  # fmt: skip


async def test_a_triple_is_read_where_it_held_else_its_latest_and_facts_newest_first(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, porto, lisbon = ids["priya"], ids["porto"], ids["lisbon"]
        uow.graph.write_intervals(
            priya, "lives_in",
            [Interval(porto, 100.0, 200.0, mentions=2), Interval(lisbon, 200.0, None),
             Interval(porto, 300.0, 400.0, mentions=1)],
        )  # fmt: skip

        def at(to_id, label, t):
            r = uow.graph.relationship_at(priya, to_id, label, t)
            return None if r is None else (r.valid_at, r.invalid_at)

        return ids, (
            at(porto, "lives_in", 150.0),
            at(porto, "lives_in", 350.0),
            at(porto, "lives_in", 250.0),
            at(porto, "lives_in", 10.0),
            at(porto, "works_at", 150.0),
            uow.graph.current_facts([porto, ids["acme"], ids["oslo"]], 10),
            uow.graph.current_facts([priya], 1),
            uow.graph.current_facts([], 10),
        )

    ids, got = await run(case)
    assert got == (
        (100.0, 200.0),
        (300.0, 400.0),
        (300.0, 400.0),
        (300.0, 400.0),
        None,
        [("Priya", "works_at", "Acme", 150.0), ("Lisbon", "twinned_with", "Oslo", 50.0)],
        [("Priya", "lives_in", "Lisbon", 200.0)],
        [],
    )


async def test_the_walk_reaches_depth_both_ways_and_keeps_to_the_times_it_is_asked(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, oslo = ids["priya"], ids["oslo"]

        def shown(found):
            nodes, edges = found
            return [e.id for e in nodes], [(r.from_id, r.label, r.to_id) for r in edges]

        return ids, (
            shown(uow.graph.neighborhood(priya, 1)),
            shown(uow.graph.neighborhood(oslo, 2)),
            shown(uow.graph.neighborhood(oslo, 2, When(as_of=150.0))),
            shown(uow.graph.neighborhood(priya, 1, HISTORY)),
            shown(uow.graph.neighborhood(oslo, 0)),
            shown(uow.graph.neighbors([oslo, 9999])),
            shown(uow.graph.neighbors([ids["porto"], ids["acme"]], HISTORY)),
            shown(uow.graph.neighbors([ids["porto"]])),
            _refused(uow.graph.neighborhood, 9999, 1),
        )

    ids, got = await run(case)
    priya, porto, lisbon, oslo, acme = (
        ids[k] for k in ("priya", "porto", "lisbon", "oslo", "acme")
    )
    lives, works, twinned = (
        (priya, "lives_in", lisbon),
        (priya, "works_at", acme),
        (lisbon, "twinned_with", oslo),
    )
    ended = (priya, "lives_in", porto)
    assert got == (
        ([priya, lisbon, acme], [lives, works]),
        ([priya, lisbon, oslo], [lives, twinned]),
        ([lisbon, oslo], [twinned]),
        ([priya, porto, lisbon, acme], [ended, lives, works]),
        ([oslo], []),
        ([lisbon, oslo], [twinned]),
        ([priya, porto, acme], [ended, works]),
        ([porto], []),
        "entity 9999 does not exist",
    )


async def test_a_projects_relationships_and_evidence_are_its_own_and_paged(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, porto, far = ids["priya"], ids["porto"], ids["far"]
        session = uow.sessions.insert("s", "", ids["p1"], {}, "t1")
        said = uow.episodes.insert(session.id, "moved", "", {}, None, 100.0)
        other = uow.episodes.insert(session.id, "ended", "", {}, None, 200.0)
        first = uow.graph.add_evidence(
            priya, porto, "lives_in", ASSERT, 100.0, episode_id=said.id, notes="flat", mentions=2
        )
        second = uow.graph.add_evidence(priya, porto, "lives_in", END, 200.0, episode_id=other.id)
        third = uow.graph.add_evidence(ids["lisbon"], ids["oslo"], "twinned_with", ASSERT, 50.0)
        uow.graph.add_evidence(far, ids["far2"], "knows", ASSERT, 10.0, episode_id=None)
        [e] = [e for e in uow.graph.evidence_of(priya, "lives_in") if e.id == first]
        rels = uow.graph.relationships_in_project(ids["p1"], None, 100)
        return (rel, ids, (first, second, third), (said.id, other.id), (
            (e.from_id, e.to_id, e.label, e.kind, e.at, e.episode_id, e.mentions, e.notes),
            sorted(x.id for x in uow.graph.evidence_of(priya, "lives_in")),
            [r.id for r in rels],
            [r.id for r in uow.graph.relationships_in_project(ids["p1"], rels[0].id, 2)],
            [r.id for r in uow.graph.relationships_in_project(ids["p2"], None, 100)],
            [x.id for x in uow.graph.evidence_in_project(ids["p1"], None, 100)],
            [x.id for x in uow.graph.evidence_in_project(ids["p1"], first, 1)],
            uow.graph.groups_of([porto]),
            uow.graph.groups_of([ids["oslo"], priya]),
            uow.graph.groups_of([]),
        ))  # fmt: skip

    rel, ids, (first, second, third), (said, other), got = await run(case)
    priya, porto, lisbon = ids["priya"], ids["porto"], ids["lisbon"]
    mine = sorted(v for k, v in rel.items() if k[0] != ids["far"])
    assert got == (
        (priya, porto, "lives_in", ASSERT, 100.0, said, 2, "flat"),
        [first, second],
        mine,
        mine[1:3],
        [rel[(ids["far"], "knows", ids["far2"])]],
        [first, second, third],
        [second],
        {(priya, "lives_in")},
        {(priya, "lives_in"), (lisbon, "twinned_with")},
        set(),
    )


async def test_what_an_episode_said_is_dropped_and_a_triple_deleted_with_its_evidence(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, porto, lisbon, acme = (ids[k] for k in ("priya", "porto", "lisbon", "acme"))
        session = uow.sessions.insert("s", "", ids["p1"], {}, "t1")
        said = uow.episodes.insert(session.id, "moved", "", {}, None, 100.0).id
        uow.graph.add_evidence(priya, porto, "lives_in", ASSERT, 100.0, episode_id=said)
        uow.graph.add_evidence(priya, acme, "works_at", ASSERT, 150.0, episode_id=said)
        kept = uow.graph.add_evidence(priya, lisbon, "lives_in", ASSERT, 200.0)
        groups = uow.graph.drop_episode_evidence(said)
        again = uow.graph.drop_episode_evidence(said)
        left = [e.id for e in uow.graph.evidence_of(priya, "lives_in")]
        uow.graph.add_evidence(priya, lisbon, "lives_in", END, 300.0)
        gone = uow.graph.delete_relationships(priya, lisbon, "lives_in")
        none = uow.graph.delete_relationships(priya, lisbon, "lives_in")
        return (
            groups, again, left == [kept], gone, none,
            uow.graph.evidence_of(priya, "lives_in"),
            [(r.label, r.to_id) for r in uow.graph.list_relationships(priya, False, when=HISTORY)],
            ids,
        )  # fmt: skip

    groups, again, left, gone, none, evidence, rels, ids = await run(case)
    priya, porto, acme = ids["priya"], ids["porto"], ids["acme"]
    assert groups == {(priya, "lives_in"), (priya, "works_at")}
    assert again == set()
    assert left is True
    assert (gone, none, evidence) == (1, 0, [])
    assert rels == [("lives_in", porto), ("works_at", acme)]


async def test_deleting_an_entity_counts_its_edges_and_takes_what_hangs_on_it(run):
    def case(uow):
        ids, rel = _two_graphs_of_facts(uow)
        priya, lisbon, oslo = ids["priya"], ids["lisbon"], ids["oslo"]
        uow.graph.add_evidence(priya, lisbon, "lives_in", ASSERT, 200.0)
        uow.graph.add_evidence(lisbon, oslo, "twinned_with", ASSERT, 50.0)
        uow.graph.add_distinction(lisbon, oslo)
        edges = uow.graph.delete_entity(lisbon)
        missing = _refused(uow.graph.delete_entity, lisbon)
        uow.graph.delete_entity_row(ids["acme"])
        return ids, (
            edges,
            missing,
            [(r.label, r.to_id) for r in uow.graph.list_relationships(priya, True, when=HISTORY)],
            uow.graph.evidence_of(priya, "lives_in"),
            uow.graph.list_aliases(lisbon, None, 10),
            uow.graph.candidate_rows([oslo])[0].distinct_from,
            list(uow.graph.get_entities([lisbon, ids["acme"], oslo])),
            uow.graph.groups_of([lisbon]),
        )

    ids, got = await run(case)
    assert got == (
        2,
        f"entity {ids['lisbon']} does not exist",
        [("lives_in", ids["porto"])],
        [],
        [],
        frozenset(),
        [ids["oslo"]],
        set(),
    )


def _merge(uow, graph, tenant, target, source_ids, **kwargs):
    return uow.graph.insert_merge(
        EntityMerge(
            id=0, project_id=graph[0], session_id=graph[1], tenant=tenant, target_id=target,
            source_ids=tuple(source_ids), method=kwargs.pop("method", "manual"),
            reason=kwargs.pop("reason", ""), created_at=kwargs.pop("created_at", 0.0), **kwargs,
        )
    )  # fmt: skip


async def test_merges_are_kept_found_by_graph_entity_tenant_and_request_and_undone(run):
    def case(uow):
        p1 = uow.projects.insert({"name": "p1"}, "t1")
        p2 = uow.projects.insert({"name": "p2"}, "t2")
        g1, g2 = (p1.id, 0), (p2.id, 0)
        a, b, c, d = _people(uow, g1, "A", "B", "C", "D")
        x = _people(uow, g2, "X")[0]
        before = uow.graph.get_entity(b)
        source = MergedSource(before, ("B",), (1, 2), (3,), (4,), (5, 6))
        first = _merge(
            uow,
            g1,
            "t1",
            a,
            [b],
            request_id="r-1",
            principal="ann",
            reason="same",
            target_notes="old",
            sources=(source,),
            created_at=10.0,
        )
        second = _merge(uow, g1, "t1", c, [d, a], method="llm")
        third = _merge(uow, g1, "t1", a, [c])
        elsewhere = _merge(uow, g2, "t2", x, [99], request_id="r-1")
        uow.graph.mark_undone(third)
        m = uow.graph.get_merge(first, "t1")

        def listed(graph, entity_id=0, after=None, limit=10, tenant=None):
            return [m.id for m in uow.graph.list_merges(graph, entity_id, after, limit, tenant)]

        return (first, second, third, elsewhere), (a, b, c, d), (
            (m.project_id, m.session_id, m.tenant, m.target_id, m.source_ids, m.method,
             m.reason, m.created_at, m.undone_at, m.request_id, m.principal, m.target_notes,
             m.sources == (replace(source, entity=replace(before, aliases=())),)),
            uow.graph.get_merge(second).created_at > 0,
            uow.graph.get_merge(third).undone_at is not None,
            _refused(uow.graph.get_merge, first, "t2"),
            _refused(uow.graph.get_merge, 999),
            uow.graph.merge_by_request("t1", "r-1").id,
            uow.graph.merge_by_request("t2", "r-1").id,
            uow.graph.merge_by_request("t1", "r-2"),
            listed(g1), listed(g1, a), listed(g1, d), listed(None, tenant="t2"),
            listed(g1, after=first, limit=1), listed(g2, tenant="t1"), listed(None),
            [m.id for m in uow.graph.merges_after(uow.graph.get_merge(first))],
            [m.id for m in uow.graph.merges_after(uow.graph.get_merge(elsewhere))],
        )  # fmt: skip

    (first, second, third, elsewhere), (a, b, c, d), got = await run(case)
    assert got[0] == (got[0][0], 0, "t1", a, (b,), "manual", "same", 10.0, None, "r-1", "ann",
                      "old", True)  # fmt: skip
    assert got[1:] == (
        True, True,
        f"merge {first} does not exist", "merge 999 does not exist",
        first, elsewhere, None,
        [first, second, third], [first, second, third], [second], [elsewhere],
        [second], [], [first, second, third, elsewhere],
        [second],
        [],
    )  # fmt: skip


async def test_a_merge_moves_aliases_links_and_evidence_and_its_undo_returns_them(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        graph = (project.id, 0)
        session = uow.sessions.insert("s", "", project.id, {}, "t1")
        e1, e2, e3 = (uow.episodes.insert(session.id, f"e{i}", "", {}, None, float(i)).id
                      for i in (1, 2, 3))  # fmt: skip
        target, source, other = _people(uow, graph, "Priya Raman", "Priya", "Ravi")
        uow.graph.add_alias(source, "priya raman", method=METHOD_EXACT)
        uow.graph.add_alias(source, "P. R.", method=METHOD_EXACT, refresh=False)
        uow.graph.mention(source, None, episode_id=e1)
        uow.graph.mention(source, None, episode_id=e2)
        uow.graph.mention(target, None, episode_id=e2)
        out = uow.graph.add_evidence(source, other, "knows", ASSERT, 1.0)
        into = uow.graph.add_evidence(other, source, "knows", ASSERT, 2.0)
        loop = uow.graph.add_evidence(source, source, "likes", ASSERT, 3.0)
        kept = uow.graph.get_entity(source)

        aliases = uow.graph.move_aliases(source, target)
        links = uow.graph.move_episode_links(source, target)
        ends = uow.graph.move_evidence(source, target)
        uow.graph.add_mentions(target, kept.mention_count, kept.notes)
        uow.graph.delete_entity_row(source)
        merged = (
            uow.graph.get_entity(target).aliases,
            sorted(uow.graph.episode_links_in_project(project.id, None, 100)),
            sorted((e.id, e.from_id, e.to_id) for e in uow.graph.evidence_of(target, "knows")),
            uow.graph.get_entities([source]),
        )
        # Undo, as domain/merges.py does it.
        back = uow.graph.reinsert_entity(kept)
        placeholder = uow.graph.entity_id_of(name_key("Priya", "person"), "person", *graph)
        uow.graph.return_aliases(target, source, aliases)
        uow.graph.return_episode_links(target, source, links[0] + [9999], links[1])
        uow.graph.return_evidence(source, *ends)
        uow.graph.restore_name_key(source)
        uow.graph.restore_name_key(9999)
        restored = uow.graph.get_entity(source)
        return (target, source, other), (e1, e2), (out, into, loop), (
            aliases, links, ends, merged, back, placeholder,
            (restored.name, restored.aliases, restored.mention_count, restored.tenant),
            uow.graph.get_entity(target).aliases,
            uow.graph.entity_id_of(name_key("Priya", "person"), "person", *graph),
            sorted(uow.graph.episode_links_in_project(project.id, None, 100)),
            sorted((e.id, e.from_id, e.to_id) for e in uow.graph.evidence_of(source, "knows")),
            [e.id for e in uow.graph.evidence_of(source, "likes")],
        )  # fmt: skip

    (target, source, other), (e1, e2), (out, into, loop), got = await run(case)
    assert got == (
        ["Priya", "P. R."],
        ([e1], [e2]),
        ([out, loop], [into, loop]),
        (
            ("Priya Raman", "Priya", "P. R."),
            [(target, e1), (target, e2)],
            [(out, target, other)],
            {},
        ),
        source,
        None,
        # The alias the target held already went with the source's row.
        ("Priya", ("Priya", "P. R."), 3, "t1"),
        ("Priya Raman",),
        source,
        [(target, e2), (source, e1), (source, e2)],
        [(out, source, other)],
        [loop],
    )


async def test_an_entity_restored_from_elsewhere_takes_a_new_id(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1")
        graph = (project.id, 0)
        ann = _people(uow, graph, "Ann")[0]
        shape = uow.graph.get_entity(ann)
        uow.graph.delete_entity_row(ann)
        made = uow.graph.reinsert_entity(replace(shape, id=0, name="Bea", notes="back"))
        before = uow.graph.entity_id_of(name_key("Bea", "person"), "person", *graph)
        uow.graph.restore_name_key(made)
        e = uow.graph.get_entity(made)
        return (
            ann,
            made,
            before,
            uow.graph.entity_id_of(name_key("Bea", "person"), "person", *graph),
            (e.name, e.notes, e.aliases, e.created_at == shape.created_at),
        )

    ann, made, before, after, shown = await run(case)
    assert made != ann and made > 0
    assert (before, after) == (None, made)
    assert shown == ("Bea", "back", (), True)


@pytest.mark.parametrize("taken", [True, False])
async def test_a_restored_key_waits_while_another_entity_holds_it(run, taken):
    def case(uow):
        graph = (uow.projects.insert({"name": "p"}, "t1").id, 0)
        ann = _people(uow, graph, "Ann")[0]
        shape = uow.graph.get_entity(ann)
        uow.graph.delete_entity_row(ann)
        holder = _people(uow, graph, "Ann")[0] if taken else None
        uow.graph.reinsert_entity(shape)
        uow.graph.restore_name_key(ann)
        return holder, uow.graph.entity_id_of(name_key("Ann", "person"), "person", *graph), ann

    holder, found, ann = await run(case)
    assert found == (holder if taken else ann)
