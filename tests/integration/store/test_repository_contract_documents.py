"""The document repository's contract (what the vector index is built from,
an entity's with its other names), and the vectors written beside their
rows (``InlineVectorRepository``: PostgreSQL's, refused on SQLite):
the same cases on the fake (tests/fakes.py), SQLite and PostgreSQL (the
``run`` fixture, tests/integration/store/conftest.py)."""

from __future__ import annotations

import pytest

from nexus_grpc.core.models import MemoryKind, Tier
from nexus_grpc.core.vectors import VectorTableMissing


async def test_each_collections_text_and_payload_are_read_from_the_rows_that_still_exist(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        other = uow.projects.insert({"name": "q"}, "t2").id
        session = uow.sessions.insert("s", "", project, {}, "t1").id
        episode = uow.episodes.insert(session, "hello", "hi there", {}, None, 1_234.75)
        memory = uow.memories.insert(
            {"kind": int(MemoryKind.USER), "title": "Tea", "content": "green, no sugar",
             "tier": int(Tier.LONGTERM), "project_id": project, "agent_id": "bot",
             "user_id": "ann", "session_id": 0, "confidence": 0.9, "metadata": {}},
            None, "t1",
        ).id  # fmt: skip
        summary = uow.summaries.insert(session_id=session, project_id=0, content="they met")
        overview = uow.summaries.insert(session_id=0, project_id=other, content="all of q")
        docs = uow.documents
        return (
            (episode.id, episode.created_at, session, project, memory),
            docs.episodes([episode.id, 999]),
            docs.memories([memory, 999]),
            docs.summaries([summary.id, overview.id, 999])
            == {
                summary.id: ("they met", {"sessionId": session, "projectId": project}),
                overview.id: ("all of q", {"sessionId": 0, "projectId": other}),
            },
            (docs.episodes([999]), docs.memories([999]), docs.summaries([999])),
        )

    (episode, created, session, project, memory), episodes, memories, summaries, empty = await run(
        case
    )
    assert episodes == {
        episode: (
            "User: hello\nAssistant: hi there",
            {"sessionId": session, "createdAt": int(created), "occurAt": 1_234},
        )
    }
    assert memories == {
        memory: (
            "Tea\ngreen, no sugar",
            {
                "kind": int(MemoryKind.USER),
                "tier": int(Tier.LONGTERM),
                "projectId": project,
                "userId": "ann",
                "sessionId": 0,
                "agentId": "bot",
                "tenant": "t1",
            },
        )  # fmt: skip
    }
    assert summaries is True
    assert empty == ({}, {}, {})


async def test_every_id_of_a_collections_table_is_listed_and_an_unknown_table_refused(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        session = uow.sessions.insert("s", "", project, {}, "t1").id
        episodes = [uow.episodes.insert(session, f"e{i}", "", {}, None).id for i in range(3)]
        entity = uow.graph.insert_entity((project, 0), "Priya", "person", None, source="manual")
        summary = uow.summaries.insert(session_id=session, project_id=0, content="s").id
        listed = {t: uow.documents.all_ids(t) for t in ("episodes", "entities", "summaries")}
        with pytest.raises(ValueError):
            uow.documents.all_ids("sessions")
        return listed, (set(episodes), {entity}, {summary}), uow.documents.all_ids("memories")

    listed, made, memories = await run(case)
    assert listed == dict(zip(("episodes", "entities", "summaries"), made, strict=True))
    assert memories == set()


async def test_an_entitys_text_names_its_other_names_and_its_payload_its_graph(run):
    def case(uow):
        project = uow.projects.insert({"name": "p"}, "t1").id
        loose = uow.sessions.insert("loose", "", 0, {}, "t1").id
        priya = uow.graph.insert_entity(
            (project, 0), "Priya", "person", "a chemist", source="manual"
        )
        uow.graph.add_alias(priya, "Raman", method="exact", refresh=False)
        uow.graph.add_alias(priya, "P. R.", method="exact", refresh=False)
        porto = uow.graph.insert_entity((0, loose), "Porto", "place", None, source="manual")
        return (project, loose, priya, porto), uow.documents.entities([priya, porto, 999])

    (project, loose, priya, porto), docs = await run(case)
    assert docs == {
        priya: (
            "Priya (person; also Raman, P. R.): a chemist",
            {"projectId": project, "sessionId": 0},
        ),
        porto: (
            "Porto (place)",
            {"projectId": 0, "sessionId": loose},
        ),
    }


def _make_collection(uow, backend: str) -> None:
    """What the vector index's ensure_collection does, for a case."""
    if backend == "fake":
        uow.vectors.make("notes")
    elif backend == "postgresql":
        uow.vectors.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        uow.vectors.conn.execute(
            "CREATE TABLE vectors_notes (id BIGINT PRIMARY KEY, embedding vector(2) NOT NULL,"
            " payload JSONB NOT NULL DEFAULT '{}')"
        )


def _points(uow, backend: str) -> dict[int, tuple[list[float], dict]]:
    if backend == "fake":
        return uow.vectors.collections["notes"]
    rows = uow.vectors.conn.execute("SELECT id, embedding::text, payload FROM vectors_notes")
    return {int(r[0]): ([float(x) for x in r[1].strip("[]").split(",")], r[2]) for r in rows}


async def test_a_rows_vector_is_put_beside_it_once_its_collection_is_made(run):
    def case(uow):
        refused = []
        for collection in ("Bad-Name", "notes"):
            try:
                uow.vectors.put(collection, 1, [0.5, 0.25], {})
            except (ValueError, TypeError, VectorTableMissing) as exc:
                refused.append(type(exc).__name__)
            if run.backend == "postgresql":
                break  # a missing table spoils the transaction: the last case below
        if run.backend == "sqlite":
            return refused, None
        _make_collection(uow, run.backend)
        uow.vectors.put("notes", 1, [0.5, 0.25], {"projectId": 1})
        uow.vectors.put("notes", 2, [1.0, 0.0], {})
        uow.vectors.put("notes", 1, [0.25, 0.5], {"projectId": 2})
        return refused, _points(uow, run.backend)

    refused, points = await run(case)
    if run.backend == "sqlite":
        # Vectors live beside the rows only on PostgreSQL.
        assert (refused, points) == (["TypeError", "TypeError"], None)
        return
    assert refused[0] == "ValueError"
    # A second put of a row writes its point again.
    assert points == {1: ([0.25, 0.5], {"projectId": 2}), 2: ([1.0, 0.0], {})}


async def test_a_vector_for_a_collection_never_made_is_refused_as_a_missing_table(run):
    def case(uow):
        try:
            uow.vectors.put("never_made", 1, [0.5], {})
        except (TypeError, VectorTableMissing) as exc:
            return type(exc).__name__
        return "written"

    expected = "TypeError" if run.backend == "sqlite" else "VectorTableMissing"
    assert await run(case) == expected
