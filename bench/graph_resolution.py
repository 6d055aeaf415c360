"""Extraction's graph write with entity resolution on a graph of 10,000 entities,
against the same write without resolution (exact names only), in one run.

``python -m bench.graph_resolution [--entities 10000] [--episodes 300]
[--append docs/benchmarks.md]`` (``make bench`` runs it). No LLM: the
extraction answers are generated, so what is measured is what the service
does with them:

- **with resolution**: per episode, the resolution pre-pass (the rules'
  reads, and the vector neighbours of each new name: the real MiniLM and the
  embedded qdrant-edge index holding the 10,000 entity vectors), then the
  write of ``domain/extraction.apply_result`` (the rules again, aliases,
  mentions, evidence and intervals) in one SQLite transaction;
- **without**: the same write with resolution replaced by the old exact-name
  lookup (a name is its entity only if spelled the same), and no pre-pass.

CPU is the process's (``time.process_time``: every thread, the embedder's
included), so the figure per extracted entity is the cascade's whole cost on
these cores, not a share of wall time. Each episode names five entities: two
existing ones as spelled, one existing person under a partial name or title
("Priya", "Dr. Raman"), and two new names; and asserts two relationships.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from nexus_grpc.core.graph import SOURCE_EXTRACTION
from nexus_grpc.core.names import name_key
from nexus_grpc.domain import entity_resolution, extraction
from nexus_grpc.domain.entity_resolution import EntityResolution
from nexus_grpc.domain.resolution_rules import Mention
from nexus_grpc.embedding import make_embedder
from nexus_grpc.llm.extraction_prompts import (
    ExtractedEntity,
    ExtractedRelationship,
    ExtractionResult,
)
from nexus_grpc.store import documents
from nexus_grpc.store import graph as graph_store
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect
from nexus_grpc.store.sqlite.database import Database
from nexus_grpc.store.sqlite.migrations import migrate
from nexus_grpc.vectors import EdgeVectorIndex, VectorPoint

PROJECT = 1
GRAPH = (PROJECT, 0)
SYLLABLES = "ka ri mo la ne su to vi ra en dor mil pa be sha lo ti qu an ze ro fa ni go".split()
TYPES = ("person", "organization", "technology", "place", "concept")


def _word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _name(rng: random.Random, etype: str) -> str:
    if etype == "person":
        return f"{_word(rng, 2)} {_word(rng, 3)}"
    if etype == "organization":
        return f"{_word(rng, 3)} {rng.choice(['Labs', 'Group', 'Corp', 'Systems'])}"
    return _word(rng, rng.choice((3, 4)))


def _graph_names(rng: random.Random, n: int) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    names: list[tuple[str, str]] = []
    while len(names) < n:
        etype = TYPES[len(names) % len(TYPES)]
        name = _name(rng, etype)
        key = (name_key(name, etype), etype)
        if key not in seen:
            seen.add(key)
            names.append((name, etype))
    return names


def _episodes(rng: random.Random, names: list[tuple[str, str]], n: int) -> list[ExtractionResult]:
    people = [name for name, etype in names if etype == "person"]
    results = []
    for _ in range(n):
        picked = rng.sample(names, 2)
        person = rng.choice(people)
        first, last = person.split()
        partial = rng.choice([first, f"Dr. {last}", f"{person}'s", person.upper()])
        new = [(_name(rng, t), t) for t in rng.sample(TYPES, 2)]
        entities = [ExtractedEntity(n, t, None) for n, t in [*picked, (partial, "person"), *new]]
        edges = [
            ExtractedRelationship(entities[2].name, entities[0].name, "works_with", None),
            ExtractedRelationship(entities[2].name, entities[3].name, "uses", None),
        ]
        results.append(ExtractionResult(entities, edges))
    return results


def _exact_only(uow, graph, mentions, answers, episode_id):  # noqa: ANN001
    """The graph write before resolution: a name is its entity only when its
    key matches; otherwise a new entity. It stands in for ``settle``, which
    the extraction's write calls with its unit of work."""
    resolved: dict[tuple[str, str], int] = {}
    for m in mentions:
        existing = uow.graph.entity_id_of(m.key, m.type, *graph)
        if existing is None:
            existing = uow.graph.insert_entity(
                graph, m.surface, m.type, m.notes, source=SOURCE_EXTRACTION,
                episode_id=episode_id,
            )  # fmt: skip
        else:
            uow.graph.mention(existing, m.notes, episode_id=episode_id)
        resolved[(m.key, m.type)] = existing
    return resolved


async def _seed(path: Path, names: list[tuple[str, str]], episodes: int) -> None:
    conn = sqlite_connect(path, isolation_level=None)
    migrate(conn)
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO projects (id, name, created_at, updated_at) VALUES (?, 'bench', 0, 0)",
        (PROJECT,),
    )
    conn.execute(
        "INSERT INTO sessions (id, external_id, project_id, created_at) VALUES (1, 's', ?, 0)",
        (PROJECT,),
    )
    conn.executemany(
        "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at, occur_at)"
        " VALUES (?, 1, 'x', 'y', ?, ?)",
        [(i, float(i), 1_700_000_000.0 + i) for i in range(1, episodes + 1)],
    )
    for name, etype in names:
        graph_store.GraphRows(conn).insert_entity(
            GRAPH, name, etype, None, source=SOURCE_EXTRACTION
        )
    conn.execute("DELETE FROM jobs")
    conn.execute("COMMIT")
    conn.close()


async def _index(index: EdgeVectorIndex, path: Path, embedder) -> None:  # noqa: ANN001
    conn = sqlite_connect(path)
    rows = conn.execute("SELECT id FROM entities ORDER BY id").fetchall()
    docs = documents.SqlDocuments(conn).entities([r[0] for r in rows])
    conn.close()
    await index.ensure_collection(
        "entities", embedder.dimension, {"projectId": "integer", "sessionId": "integer"}
    )
    ids = sorted(docs)
    for start in range(0, len(ids), 256):
        chunk = ids[start : start + 256]
        vectors = await embedder.embed([docs[i][0] for i in chunk])
        await index.upsert(
            "entities",
            [VectorPoint(i, v, docs[i][1]) for i, v in zip(chunk, vectors, strict=True)],
        )


async def _run(
    path: Path,
    results: list[ExtractionResult],
    resolution: EntityResolution | None,
    settle: Callable | None,
) -> tuple[float, list[float]]:
    """(wall seconds, CPU ms per extracted entity of each episode)."""
    db = Database(path, synchronous="NORMAL")
    await db.open()
    if resolution is not None:
        resolution.db = db
    per_entity: list[float] = []
    patch = mock.patch.object(entity_resolution, "settle", settle) if settle else None
    patched = mock.patch.object(extraction, "settle", settle) if settle else None
    started = time.perf_counter()
    try:
        if patch and patched:
            patch.start()
            patched.start()
        for episode_id, result in enumerate(results, 1):
            cpu = time.process_time()
            mentions = [Mention(e.name, e.type, e.notes) for e in result.entities]
            answers = entity_resolution.NO_ANSWERS
            if resolution is not None:
                answers = await resolution.ask(GRAPH, mentions, "x")
            await db.write(
                lambda c, e=episode_id, r=result, a=answers: extraction.apply_result(c, e, r, a)
            )
            per_entity.append((time.process_time() - cpu) * 1000 / len(result.entities))
    finally:
        if patch and patched:
            patch.stop()
            patched.stop()
        await db.close()
    return time.perf_counter() - started, per_entity


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--append", type=Path, help="also append the figures to this report")
    args = parser.parse_args()
    rng = random.Random(26)
    names = _graph_names(rng, args.entities)
    results = _episodes(rng, names, args.episodes)
    extracted = sum(len(r.entities) for r in results)
    with tempfile.TemporaryDirectory(prefix="nexus-resolution-") as tmp:
        root = Path(tmp)
        seeded = root / "seed.sqlite3"
        await _seed(seeded, names, args.episodes)
        embedder = make_embedder("minilm")
        index = EdgeVectorIndex(root / "vectors")
        await _index(index, seeded, embedder)
        await embedder.embed_query("warm")  # the model loads before the clock starts
        for copy in ("with", "without"):
            shutil.copy(seeded, root / f"{copy}.sqlite3")
        resolution = EntityResolution(
            None,
            None,
            model="none",
            timeout=30.0,
            embedder=embedder,
            index=index,  # type: ignore[arg-type]
        )
        with_wall, with_cpu = await _run(root / "with.sqlite3", results, resolution, None)
        without_wall, without_cpu = await _run(root / "without.sqlite3", results, None, _exact_only)
        conn = sqlite_connect(root / "with.sqlite3")
        entities_with = conn.execute("SELECT COUNT(*) FROM entities").fetchone()[0]
        conn.close()
        conn = sqlite_connect(root / "without.sqlite3")
        entities_without = conn.execute("SELECT COUNT(*) FROM entities").fetchone()[0]
        conn.close()
        await index.close()
    rate_with, rate_without = extracted / with_wall, extracted / without_wall
    cpu_with, cpu_without = statistics.median(with_cpu), statistics.median(without_cpu)
    lines = [
        f"graph: {args.entities} entities; {args.episodes} episodes, {extracted} names",
        f"with resolution:    {rate_with:,.0f} names/s, CPU {cpu_with:.2f} ms a name"
        f" (median), p90 {statistics.quantiles(with_cpu, n=10)[-1]:.2f} ms;"
        f" entities after: {entities_with}",
        f"without resolution: {rate_without:,.0f} names/s, CPU {cpu_without:.2f} ms a name;"
        f" entities after: {entities_without}",
        f"throughput with / without: {rate_with / rate_without:.2f}",
    ]
    print("\n".join(lines))
    if args.append is not None:
        with args.append.open("a") as report:
            report.write(
                "\n## Entity resolution at 10,000 entities (issue 26)\n\n"
                f"From `.venv/bin/python -m bench.graph_resolution --entities {args.entities}"
                f" --episodes {args.episodes}` (run by `make bench`): extraction's graph write"
                " for generated answers (five names an episode: two known as spelled, one"
                " known person by a partial name or title, two new), with resolution and"
                " without (exact names only), one after the other in one run. CPU is the"
                " process's, all threads (the embedder's included), per extracted name.\n\n"
                "| | names/s | CPU ms a name (median) | entities after |\n|---|---|---|---|\n"
                f"| with resolution | {rate_with:,.0f} | {cpu_with:.2f} | {entities_with} |\n"
                f"| without | {rate_without:,.0f} | {cpu_without:.2f} | {entities_without} |\n\n"
                f"With ÷ without: **{rate_with / rate_without:.2f}×** the throughput;"
                f" the cascade's CPU a name: **{cpu_with:.2f} ms** (target < 5 ms).\n"
            )


if __name__ == "__main__":
    asyncio.run(main())
