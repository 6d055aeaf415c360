"""A create's own vector (domain/inline_vectors.py), given a scripted
embedder in-process: the vector when the model answers in time and in the
index's dimension, the job path (None) when it fails, is late or answers in
another dimension, the rest after a failure in which no create asks the
model, and a write that finds the vector table missing done again without
the vector.

That the vector commits with its row in pgvector, that the job path then
converges, and that SQLite and qdrant keep the job path, is the whole-server
tier's: tests/e2e/service/test_inline_vectors.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest

from nexus_grpc.core.vectors import VectorTableMissing
from nexus_grpc.domain.inline_vectors import InlineVectors, write_with
from nexus_grpc.embedding import EmbedderUnavailable
from tests.fakes import FakeDatabase, FakeUnitOfWork


class ScriptedEmbedder:
    """Answers each call with the next of ``script``: a vector for every text,
    an exception raised, or ``"hang"`` (never answers)."""

    dimension = 3
    threads = 1

    def __init__(self, *script: object) -> None:
        self.script = list(script)
        self.calls = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer == "hang":
            await asyncio.Event().wait()
        return [list(answer) for _ in texts]  # type: ignore[call-overload]


@pytest.fixture
async def inline() -> AsyncIterator[Callable[..., InlineVectors]]:
    made: list[InlineVectors] = []

    def make(embedder: ScriptedEmbedder, **kw: float) -> InlineVectors:
        made.append(InlineVectors(embedder, **kw))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for lane in made:
        await lane.close()


async def test_a_vector_in_time_and_in_the_index_dimension_is_the_creates(inline):
    vectors = inline(ScriptedEmbedder([0.1, 0.2, 0.3]))
    assert await vectors.embed("orchids") == [0.1, 0.2, 0.3]
    assert (vectors.fallbacks, vectors.last_error) == (0, None)


async def test_a_failed_embedding_sends_the_create_to_its_job_and_says_why(inline):
    vectors = inline(ScriptedEmbedder(EmbedderUnavailable("connection refused")))
    assert await vectors.embed("orchids") is None
    assert vectors.fallbacks == 1
    assert vectors.last_error == "EmbedderUnavailable: connection refused"


async def test_after_a_failure_creates_take_the_job_path_without_asking_the_model(inline):
    embedder = ScriptedEmbedder(EmbedderUnavailable("down"), [1.0, 0.0, 0.0])
    vectors = inline(embedder, backoff=3600)
    await vectors.embed("first")
    assert await vectors.embed("second") is None
    assert (embedder.calls, vectors.fallbacks) == (1, 2)


async def test_once_the_rest_is_over_the_model_is_asked_again_and_the_error_cleared(inline):
    embedder = ScriptedEmbedder(EmbedderUnavailable("down"), [1.0, 0.0, 0.0])
    vectors = inline(embedder, backoff=0)
    await vectors.embed("first")
    assert await vectors.embed("second") == [1.0, 0.0, 0.0]
    assert (embedder.calls, vectors.fallbacks, vectors.last_error) == (2, 1, None)


async def test_a_model_that_does_not_answer_in_time_sends_the_create_to_its_job(inline):
    vectors = inline(ScriptedEmbedder("hang"), timeout=0)
    assert await vectors.embed("orchids") is None
    assert vectors.fallbacks == 1 and vectors.last_error.startswith("TimeoutError")


async def test_a_vector_of_another_dimension_is_not_written(inline):
    embedder = ScriptedEmbedder([0.1, 0.2], [0.1, 0.2, 0.3])
    vectors = inline(embedder, backoff=3600)
    assert await vectors.embed("orchids") is None
    # Not a failure of the model: the next create still asks it.
    assert await vectors.embed("ferns") == [0.1, 0.2, 0.3]
    assert (vectors.fallbacks, vectors.last_error) == (1, None)


async def test_a_write_is_handed_the_vector_or_none():
    db = FakeDatabase()
    seen: list[object] = []

    def write(uow: FakeUnitOfWork, vector: list[float] | None) -> str:
        seen.append(vector)
        return "row"

    assert await write_with(db, [1.0], write) == "row"
    assert await write_with(db, None, write) == "row"
    assert seen == [[1.0], None]


async def test_a_write_that_finds_the_vector_table_missing_is_done_again_without_it(caplog):
    db = FakeDatabase()
    seen: list[object] = []

    def write(uow: FakeUnitOfWork, vector: list[float] | None) -> int:
        seen.append(vector)
        if vector is not None:
            raise VectorTableMissing("table vectors_memories does not exist")
        return 7

    with caplog.at_level(logging.WARNING):
        assert await write_with(db, [1.0], write) == 7
    assert seen == [[1.0], None]
    assert "vectors_memories" in caplog.text and "goes through its index job" in caplog.text
