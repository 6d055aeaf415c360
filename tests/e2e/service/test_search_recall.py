"""SearchMemories and SearchEntities share the episode ranking: small recall checks
with the real offline embedder, each mode beside the others."""

from __future__ import annotations

import pytest

from nexus_grpc.embedding import make_embedder
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import start_harness, wait_until

MODES = {
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
}

# Every memory says "The user ...": words on every memory of the scope, as in
# a real store, which rank nothing.
FACTS = [
    ("Coffee", "The user likes strong black coffee in the morning, never tea."),
    ("Dog", "The user has a golden retriever called Biscuit."),
    ("Job", "The user works as a nurse on night shifts at the city hospital."),
    ("Allergy", "The user is allergic to peanuts and carries an epinephrine pen."),
    ("Sport", "The user plays tennis every Saturday with a neighbour."),
    ("Home", "The user lives in Lisbon, in a flat near the river."),
    ("Language", "The user is learning Japanese and practises kanji daily."),
    ("Music", "The user likes jazz, especially Miles Davis records."),
    ("Car", "The user drives an old red Volvo estate."),
    ("Diet", "The user has been vegetarian for ten years."),
    ("Birthday", "The user was born on the 3rd of March."),
    ("Sibling", "The user has a twin brother who is a pilot."),
    ("Hobby", "The user knits scarves and sells them at a weekend market."),
    ("Travel", "The user wants to visit Iceland to see the northern lights."),
    ("Reading", "The user likes crime novels by Agatha Christie."),
    ("Garden", "The user grows tomatoes and basil on the balcony."),
]
QUESTIONS = [
    ("what does the user drink when they wake up?", "Coffee"),
    ("does the user have a pet?", "Dog"),
    ("what is the user's profession?", "Job"),
    ("which foods must the user avoid?", "Allergy"),
    ("what does the user do on weekends for exercise?", "Sport"),
    ("which city is the user's home?", "Home"),
    ("is the user studying a foreign language?", "Language"),
    ("what kind of music does the user enjoy?", "Music"),
    ("what vehicle does the user own?", "Car"),
    ("does the user eat meat?", "Diet"),
    ("when is the user's birthday?", "Birthday"),
    ("does the user have any brothers or sisters?", "Sibling"),
    ("what crafts does the user make?", "Hobby"),
    ("where would the user like to travel?", "Travel"),
    ("what books does the user read?", "Reading"),
    ("what plants does the user grow?", "Garden"),
]


@pytest.fixture(params=["e5", "minilm"])
async def h(tmp_path, request):
    # Both offline embedders: the default (MiniLM) and the multilingual one
    # (--embedder e5: better recall at rank 1 and 5 for 4-5x the embedding CPU).
    harness = await start_harness(tmp_path / "data", embedder=make_embedder(request.param))
    yield harness
    await harness.close()


async def indexed(h):
    async def done():
        return await h.app.db.read_sql(
            lambda c: (
                c.execute("SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'").fetchone()[0] == 0
            )
        )

    await wait_until(done, timeout=60)


def recall_at(ranked: list[list[str]], expected: list[str], k: int) -> float:
    return sum(e in r[:k] for r, e in zip(ranked, expected, strict=True)) / len(expected)


@pytest.mark.timeout(180)
async def test_memory_search_finds_the_fact_asked_about_and_no_other_users(h):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    for title, content in FACTS:
        for user in ("ann", "bob"):
            await h.memory.CreateMemory(memory_pb2.CreateMemoryRequest(memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_USER, title=title, content=content,
                tier=memory_pb2.TIER_LONGTERM, project_id=project.id, user_id=user)))  # fmt: skip
    await indexed(h)
    scope = memory_pb2.MemoryScope(project_id=project.id, user_id="ann")
    recall = {}
    for name, mode in MODES.items():
        ranked = []
        for question, _ in QUESTIONS:
            request = memory_pb2.SearchMemoriesRequest(
                query=question, scope=scope, mode=mode, limit=5
            )
            hits = [hit async for hit in h.memory.SearchMemories(request)]
            assert all(hit.memory.user_id == "ann" for hit in hits)
            ranked.append([hit.memory.title for hit in hits])
        recall[name] = {k: recall_at(ranked, [e for _, e in QUESTIONS], k) for k in (1, 3)}
    assert recall["hybrid"][3] >= 0.9, recall
    assert recall["hybrid"][3] >= max(recall["keyword"][3], recall["semantic"][3]), recall
    # At rank 1 one question here ("exercise on weekends") goes to a keyword
    # match on "weekend"; fusion trusts keywords more (tuned on conversations,
    # docs/recall.md), so rank 1 is held to the keyword path only.
    assert recall["hybrid"][1] >= recall["keyword"][1], recall


ENTITIES = [
    ("Marta", "person", "Backend engineer who owns the billing service."),
    ("Rust", "technology", "Systems programming language used for the ingest daemon."),
    ("Lisbon", "place", "City where the company's main office is."),
    ("Acme Corp", "organization", "Largest customer, renewing its contract in June."),
    ("Project Falcon", "project", "Migration of the payment system to event sourcing."),
    ("PostgreSQL", "technology", "Relational database behind the accounts service."),
    ("Tomasz", "person", "Designer who drew the new onboarding screens."),
    ("Kubernetes", "technology", "Container orchestration the platform team runs."),
    ("Berlin", "place", "Where the annual offsite takes place."),
    ("Observability", "concept", "Metrics, traces and logs for every service."),
]
ENTITY_QUESTIONS = [
    ("what does Marta work on?", "Marta"),
    ("which database stores the accounts?", "PostgreSQL"),
    ("where is the head office?", "Lisbon"),
    ("who designed the onboarding?", "Tomasz"),
    ("tell me about Project Falcon", "Project Falcon"),
    ("what runs our containers?", "Kubernetes"),
    ("which customer renews soon?", "Acme Corp"),
    ("how do we monitor services?", "Observability"),
]


@pytest.mark.timeout(180)
async def test_entity_search_finds_named_and_described_entities(h):
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
    )
    other = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="o"))
    )
    for name, etype, notes in ENTITIES:
        for pid in (project.id, other.id):
            await h.graph.UpsertEntity(graph_pb2.UpsertEntityRequest(
                name=name, type=etype, notes=notes, project_id=pid))  # fmt: skip
    await indexed(h)
    ranked = []
    for question, _ in ENTITY_QUESTIONS:
        hits = [hit async for hit in h.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query=question, project_id=project.id, limit=3)
        )]  # fmt: skip
        assert hits and all(hit.entity.project_id == project.id for hit in hits)
        assert all(0.0 <= hit.score <= 1.0 for hit in hits)
        ranked.append([hit.entity.name for hit in hits])
    expected = [e for _, e in ENTITY_QUESTIONS]
    assert recall_at(ranked, expected, 3) >= 0.85, ranked
    # Named in the question: first, whatever the vectors say.
    assert ranked[0][0] == "Marta" and ranked[4][0] == "Project Falcon", ranked
