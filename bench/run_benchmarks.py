"""``make bench``: seed a database, start a real server, measure, write docs/benchmarks.md.

Every figure is measured in one run against the same server, and speeds are
also reported as a ratio to grpc.health.v1 Check (the cheapest RPC the server
answers), because these machines are shared and noisy.

Seeding writes straight into SQLite (FTS5 triggers index the text) and into
the embedded vector index:
- Episode text follows a Zipf distribution over a 20,000-word vocabulary
  that includes the words the load tool's queries use, so keyword queries
  meet realistic term frequencies (a tiny vocabulary makes every query match
  every episode).
- Embedding 100,000 episodes with the offline model would take ~15 minutes
  on 2 cores, so seeded vectors are random unit vectors; every *query* is
  embedded by the real model, so the measured search path is the production
  path.

Servers are started and driven through the package's own launcher and load loop
(nexus_grpc.loadtest), as the tests and ``nexus-grpc bench`` do.  Run it from the
repository root as ``python -m bench.run_benchmarks`` (``make bench`` does): the
WatchExtractions figure uses the tests' Ollama stand-in, ``tests.ollama_stub``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from nexus_grpc.core.documents import memory_payload
from nexus_grpc.core.names import name_key
from nexus_grpc.domain.vector_collections import MEMORIES
from nexus_grpc.embedding import MiniLMEmbedder, make_embedder
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2_grpc as graph_grpc
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from nexus_grpc.loadtest.launcher import ServerProcess, wait_queue_empty
from nexus_grpc.loadtest.loop import drive, percentile, ratio, single
from nexus_grpc.ops.against_server.bench import WORDS as QUERY_WORDS
from nexus_grpc.ops.against_server.bench import format_result, run_bench
from nexus_grpc.store.sqlite.connection import connect as sqlite_connect
from nexus_grpc.store.sqlite.migrations import migrate
from nexus_grpc.vectors import EdgeVectorIndex, VectorPoint

ROOT = Path(__file__).resolve().parent.parent

EPISODES_PER_SESSION = 50
SESSIONS_PER_PROJECT = 20
VOCABULARY = 20_000
GRAPH_PROJECT = 1
ENTITIES = 100_000
RELATIONSHIPS = 300_000
# "Many users, one project": each user holds MEMORIES_PER_USER USER memories of one agent.
MEMORIES_PER_USER = 1_000
MEMORY_USERS = 100  # 100,000 memories in the main database
SMALL_MEMORY_USERS = 10  # 10,000 in the small one
# One large project (its sessions share one scope) beside today's layout, and sessions
# outside any project: small scopes in a large table.
BIG_PROJECT_SESSIONS = 1_000
LONE_SESSIONS = 20
LONE_EPISODES = 50
SMALL_EPISODES = 10_000


def vocabulary(rng: random.Random) -> tuple[list[str], np.ndarray]:
    """Words and Zipf probabilities; the query words take random ranks."""
    real = list(dict.fromkeys(QUERY_WORDS))
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zu", "pe", "da", "gi"]
    synthetic: set[str] = set()
    while len(synthetic) < VOCABULARY - len(real):
        synthetic.add("".join(rng.choices(syllables, k=rng.randint(2, 4))))
    words = real + sorted(synthetic)
    rng.shuffle(words)
    weights = 1.0 / np.arange(1, len(words) + 1)
    return words, weights / weights.sum()


def texts(n: int, words_per_text: int, seed: int) -> list[str]:
    words, probs = vocabulary(random.Random(seed))
    picks = np.random.default_rng(seed).choice(len(words), size=(n, words_per_text), p=probs)
    return [" ".join(words[i] for i in row) for row in picks]


def english_words() -> list[str]:
    """Whole English words from MiniLM's own vocabulary, roughly by frequency."""
    asset = ROOT / "nexus_grpc" / "embedding" / "assets" / "tokenizer.json"
    vocab = json.loads(asset.read_text())["model"]["vocab"]
    return [
        w
        for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])
        if w.isalpha() and w.isascii() and len(w) > 2
    ]


def chat_turns(n: int, seed: int) -> list[tuple[str, str]]:
    """Chat-length turns: a 12-word question and a 28-word answer, Zipf over real words."""
    words = english_words()
    weights = 1.0 / np.arange(1, len(words) + 1)
    picks = np.random.default_rng(seed).choice(len(words), size=(n, 40), p=weights / weights.sum())
    return [
        (" ".join(words[i] for i in row[:12]), " ".join(words[i] for i in row[12:]))
        for row in picks
    ]


def unit_vectors(gen: np.random.Generator, n: int) -> np.ndarray:
    vecs = gen.standard_normal((n, 384)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@dataclass
class Seeded:
    #: Sessions in today's projects (20 sessions of 50 episodes each).
    session_scopes: list[int]
    #: The project of BIG_PROJECT_SESSIONS sessions holding as many episodes as today's layout.
    big_project: int
    #: Sessions outside any project, LONE_EPISODES episodes each.
    lone_sessions: list[int]
    memories: int
    episodes: int


def seed(data_dir: Path, episodes: int, memory_users: int = MEMORY_USERS) -> Seeded:
    """Seed episodes, a graph and memories (see Seeded for the layout)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite_connect(data_dir / "nexus.sqlite3", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate(conn)
    conn.execute("PRAGMA synchronous=OFF")
    now = time.time()
    sessions = max(1, episodes // EPISODES_PER_SESSION)
    projects = sessions // SESSIONS_PER_PROJECT + 1
    big_project = projects + 1
    per_big_session = max(1, episodes // BIG_PROJECT_SESSIONS)
    conn.execute("BEGIN")
    # The embedder the server will run (NEXUS_EMBEDDER, which the launched server
    # inherits, or the default): seeded vectors are random, but the start-up check
    # compares this record with the model the server is configured for.
    default = make_embedder(os.environ.get("NEXUS_EMBEDDER", ""))
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('embedding_model', ?)",
        (f"{default.model_id}:{default.dimension}",),
    )
    conn.executemany(
        "INSERT INTO projects (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
        [(p + 1, f"project {p}", now, now) for p in range(projects + 1)],
    )
    # (session id, project id or None, episodes in it)
    layout = [(s + 1, s // SESSIONS_PER_PROJECT + 1, EPISODES_PER_SESSION) for s in range(sessions)]
    layout += [
        (sessions + b + 1, big_project, per_big_session) for b in range(BIG_PROJECT_SESSIONS)
    ]
    first_lone = sessions + BIG_PROJECT_SESSIONS + 1
    layout += [(first_lone + n, None, LONE_EPISODES) for n in range(LONE_SESSIONS)]
    conn.executemany(
        "INSERT INTO sessions (id, external_id, project_id, created_at) VALUES (?, ?, ?, ?)",
        [(sid, f"00000000-0000-4000-8000-{sid:012d}", pid, now) for sid, pid, _ in layout],
    )
    episode_sessions = [sid for sid, _, n in layout for _ in range(n)]
    total = len(episode_sessions)
    user_texts, ai_texts = texts(total, 24, 1), texts(total, 30, 2)
    conn.executemany(
        "INSERT INTO episodes (id, session_id, user_message, ai_response, created_at,"
        " embed_state, extract_state) VALUES (?, ?, ?, ?, ?, 2, 2)",
        [(e + 1, sid, user_texts[e], ai_texts[e], now) for e, sid in enumerate(episode_sessions)],
    )
    _seed_graph(conn, now)
    memory_count = memory_users * MEMORIES_PER_USER
    # Every memory says "The user likes ...", as real user memories do: words on
    # every row of a scope, which rank nothing.
    memory_texts = [f"The user likes {t}" for t in texts(memory_count, 20, 4)]
    conn.executemany(
        "INSERT INTO memories (id, kind, title, content, tier, project_id, user_id,"
        " created_at, updated_at) VALUES (?, 2, ?, ?, 3, 1, ?, ?, ?)",
        [
            (i + 1, memory_texts[i][:40], memory_texts[i], f"user{i % memory_users}", now, now)
            for i in range(memory_count)
        ],
    )
    conn.execute("COMMIT")
    conn.close()

    asyncio.run(_seed_vectors(data_dir, episode_sessions, memory_count, memory_users))
    return Seeded(
        session_scopes=[sid for sid, _, _ in layout[: SESSIONS_PER_PROJECT * 5]],
        big_project=big_project,
        lone_sessions=[first_lone + n for n in range(LONE_SESSIONS)],
        memories=memory_count,
        episodes=total,
    )


def _seed_graph(conn, now: float) -> None:
    """ENTITIES entities in GRAPH_PROJECT and RELATIONSHIPS random edges between them."""
    rng = random.Random(3)
    # Each entity with its key and its name as its one alias, as the graph
    # stores a new name (store/graph.py insert_entity): entity search's
    # keyword path matches aliases.
    keys = [name_key(f"entity {i}", "concept") for i in range(ENTITIES)]
    conn.executemany(
        "INSERT INTO entities (id, project_id, name, name_key, type, notes, last_seen_at,"
        " created_at) VALUES (?, ?, ?, ?, 'concept', 'seeded', ?, ?)",
        [(i + 1, GRAPH_PROJECT, f"entity {i}", keys[i], now, now) for i in range(ENTITIES)],
    )
    conn.executemany(
        "INSERT INTO entity_aliases (entity_id, project_id, session_id, name, norm, method,"
        " created_at) VALUES (?, ?, 0, ?, ?, 'new', ?)",
        [(i + 1, GRAPH_PROJECT, f"entity {i}", keys[i], now) for i in range(ENTITIES)],
    )
    edges = set()
    while len(edges) < RELATIONSHIPS:
        a, b = rng.randint(1, ENTITIES), rng.randint(1, ENTITIES)
        if a != b:
            edges.add((a, b))
    conn.executemany(
        "INSERT INTO relationships (from_id, to_id, label, created_at, valid_at)"
        " VALUES (?, ?, 'related_to', ?, ?)",
        [(a, b, now, now) for a, b in edges],
    )


async def _seed_vectors(
    data_dir: Path, episode_sessions: list[int], memory_count: int, memory_users: int
) -> None:
    """A random unit vector for every seeded episode, entity and memory."""
    total = len(episode_sessions)
    index = EdgeVectorIndex(data_dir / "vectors")
    gen = np.random.default_rng(7)
    await index.ensure_collection("episodes", 384, {"sessionId": "integer"})
    await index.ensure_collection("memories", 384, MEMORIES.indexed_fields)
    for start in range(0, total, 5000):
        n = min(5000, total - start)
        vecs = unit_vectors(gen, n)
        await index.upsert(
            "episodes",
            [
                VectorPoint(
                    start + i + 1,
                    vecs[i].tolist(),
                    {"sessionId": episode_sessions[start + i], "createdAt": 0},
                )
                for i in range(n)
            ],
        )
    # Every seeded row gets its point: a row without one would be found by the
    # start-up reconcile and re-embedded in the background during the runs.
    await index.ensure_collection("entities", 384, {"projectId": "integer", "sessionId": "integer"})
    for start in range(0, ENTITIES, 5000):
        n = min(5000, ENTITIES - start)
        vecs = unit_vectors(gen, n)
        await index.upsert(
            "entities",
            [
                VectorPoint(
                    start + i + 1,
                    vecs[i].tolist(),
                    {"projectId": GRAPH_PROJECT, "sessionId": 0},
                )
                for i in range(n)
            ],
        )
    for start in range(0, memory_count, 5000):
        n = min(5000, memory_count - start)
        vecs = unit_vectors(gen, n)
        await index.upsert(
            "memories",
            [
                VectorPoint(
                    start + i + 1,
                    vecs[i].tolist(),
                    memory_payload(2, 3, 1, f"user{(start + i) % memory_users}", 0, "", ""),
                )
                for i in range(n)
            ],
        )
    await index.close()


async def closed_loop(
    call: Callable[[random.Random], Awaitable[None]], concurrency: int, duration: float
) -> dict[str, float]:
    """``concurrency`` workers calling back to back (the shared loop); latency
    percentiles in ms.  A failed call stops the bench: no figure hides errors."""
    stats = (await drive(single("call", call), concurrency, duration)).stats()
    if stats.errors:
        raise SystemExit(f"calls failed while measuring: {stats.errors}")
    return {"count": stats.count, "rps": stats.rps, "p50": stats.p50_ms, "p99": stats.p99_ms}


async def _timed(server: ServerProcess, run: Awaitable[dict[str, float]]) -> dict[str, float]:
    """A closed_loop() result with the server CPU each call cost."""
    cpu = server.cpu_seconds()
    figures = await run
    spent = server.cpu_seconds() - cpu
    figures["cpu_ms"] = 1000 * spent / figures["count"] if figures["count"] else 0.0
    return figures


EPISODE_MODES = {
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
    "default": memory_pb2.SEARCH_MODE_UNSPECIFIED,
}


def _new_pairs(words: list[str]) -> Callable[[random.Random], tuple[str, str]]:
    """Word pairs no earlier call of the run asked: the server remembers query
    vectors (--query-vector-cache), and a repeat would skip the embedding a new
    question costs."""
    asked: set[tuple[str, str]] = set()

    def pair(rng: random.Random) -> tuple[str, str]:
        for _ in range(32):  # 12,720 pairs against a run's few thousand calls
            w1, w2 = rng.sample(words, 2)
            if (w1, w2) not in asked:
                break
        asked.add((w1, w2))
        return w1, w2

    return pair


def _memory_search(
    memory: memory_grpc.MemoryServiceStub, mode: int, users: int, *, explain: bool = False
):
    pair = _new_pairs(list(dict.fromkeys(QUERY_WORDS)))

    async def search(rng: random.Random) -> None:
        scope = memory_pb2.MemoryScope(project_id=1, user_id=f"user{rng.randrange(users)}")
        w1, w2 = pair(rng)
        request = memory_pb2.SearchMemoriesRequest(
            query=f"what does the user enjoy, {w1} or {w2}?", scope=scope, mode=mode, limit=10
        )
        if explain:
            request.explain = True
        async for _ in memory.SearchMemories(request):
            pass

    return search


def _episode_search(
    memory: memory_grpc.MemoryServiceStub,
    mode: int,
    *,
    sessions=(),
    project=0,
    asked_before: Sequence[tuple[str, int]] = (),
    explain: bool = False,
):
    """``asked_before``: (query, session) pairs asked already, drawn from instead
    of new word pairs; ``explain``: each hit with its stages' ranks and scores."""
    pair = _new_pairs(list(dict.fromkeys(QUERY_WORDS)))

    async def search(rng: random.Random) -> None:
        if asked_before:
            query, session = rng.choice(asked_before)
        else:
            query = " ".join(pair(rng))
            session = rng.choice(sessions) if sessions else 0
        request = memory_pb2.SearchEpisodesRequest(
            query=query, mode=mode, limit=10, session_id=session, project_id=project
        )
        if explain:
            request.explain = True
        async for _ in memory.SearchEpisodes(request):
            pass

    return search


async def measure_extra(
    target: str, duration: float, seeded: Seeded, server: ServerProcess
) -> dict[str, dict[str, float]]:
    """Graph traversal, memory and episode search, each beside Health/Check at the
    same concurrency, with the server CPU per call."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    out: dict[str, dict[str, float]] = {}
    async with grpc.aio.insecure_channel(target) as channel:
        graph = graph_grpc.GraphServiceStub(channel)
        memory = memory_grpc.MemoryServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)

        async def check(rng: random.Random) -> None:
            await health.Check(health_pb2.HealthCheckRequest())

        async def neighborhood(rng: random.Random) -> None:
            await graph.GetNeighborhood(
                graph_pb2.GetNeighborhoodRequest(entity_id=rng.randint(1, ENTITIES), depth=3)
            )

        async def run(name: str, call, concurrency: int) -> None:
            out[name] = await _timed(server, closed_loop(call, concurrency, duration))
            print(f"{name}: p50 {out[name]['p50']:.2f} ms", file=sys.stderr)

        users = seeded.memories // MEMORIES_PER_USER
        await run("health (c=1)", check, 1)
        await run("GetNeighborhood depth 3 (c=1)", neighborhood, 1)
        for name, mode in EPISODE_MODES.items():
            await run(f"SearchMemories {name} (c=1)", _memory_search(memory, mode, users), 1)
        for name, mode in EPISODE_MODES.items():
            await run(
                f"SearchEpisodes {name}, session in a project (c=1)",
                _episode_search(memory, mode, sessions=seeded.session_scopes),
                1,
            )
        # The same question asked again in the same scope (a retry, or semantic
        # then default mode): its vector comes from the server's cache.
        rng = random.Random(7)
        words = list(dict.fromkeys(QUERY_WORDS))
        asked = [
            (" ".join(rng.sample(words, 2)), rng.choice(seeded.session_scopes)) for _ in range(64)
        ]
        for query, session in asked:
            async for _ in memory.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(
                    query=query, session_id=session, mode=EPISODE_MODES["semantic"], limit=1
                )
            ):
                pass
        for name in ("semantic", "default"):
            await run(
                f"SearchEpisodes {name}, session in a project, asked before (c=1)",
                _episode_search(memory, EPISODE_MODES[name], asked_before=asked),
                1,
            )
        for name in ("keyword", "default"):
            mode = EPISODE_MODES[name]
            await run(
                f"SearchEpisodes {name}, whole large project (c=1)",
                _episode_search(memory, mode, project=seeded.big_project),
                1,
            )
            await run(
                f"SearchEpisodes {name}, small session outside projects (c=1)",
                _episode_search(memory, mode, sessions=seeded.lone_sessions),
                1,
            )
        await run("health (c=16)", check, 16)
        for name in ("keyword", "semantic"):
            await run(
                f"SearchMemories {name} (c=16)",
                _memory_search(memory, EPISODE_MODES[name], users),
                16,
            )
    return out


async def measure_small_scopes(
    target: str, duration: float, seeded: Seeded, server: ServerProcess
) -> dict[str, dict[str, float]]:
    """The scope-bound searches again on a database a tenth the size: their cost
    should follow the scope, not the table."""
    out: dict[str, dict[str, float]] = {}
    async with grpc.aio.insecure_channel(target) as channel:
        memory = memory_grpc.MemoryServiceStub(channel)
        users = seeded.memories // MEMORIES_PER_USER
        for name in ("keyword", "default"):
            mode = EPISODE_MODES[name]
            out[f"SearchMemories {name} (c=1)"] = await _timed(
                server, closed_loop(_memory_search(memory, mode, users), 1, duration)
            )
            out[f"SearchEpisodes {name}, small session outside projects (c=1)"] = await _timed(
                server,
                closed_loop(
                    _episode_search(memory, mode, sessions=seeded.lone_sessions), 1, duration
                ),
            )
    return out


async def measure_ingest(target: str, turns: list[tuple[str, str]]) -> dict[str, float]:
    """Episodes/s from CreateEpisode to indexed, against the raw embedder on the same texts."""
    episodes = len(turns)
    async with grpc.aio.insecure_channel(target) as channel:
        stub = memory_grpc.MemoryServiceStub(channel)
        session = await stub.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        await _drained(channel)
        started = time.perf_counter()
        sem = asyncio.Semaphore(16)

        async def create(user: str, ai: str) -> None:
            async with sem:
                await stub.CreateEpisode(
                    memory_pb2.CreateEpisodeRequest(
                        session_id=session.id, user_message=user, ai_response=ai
                    )
                )

        await asyncio.gather(*(create(u, a) for u, a in turns))
        await _drained(channel)
        ingest_s = time.perf_counter() - started
    # The embedder the server under test runs (NEXUS_EMBEDDER or the default).
    embedder = make_embedder(os.environ.get("NEXUS_EMBEDDER", ""))
    await embedder.warm()
    # The embedder at full speed: batches of 32, as many at once as it has threads.
    slots = asyncio.Semaphore(embedder.threads)

    async def raw_batch(start: int) -> None:
        async with slots:
            await embedder.embed(
                [f"User: {u}\nAssistant: {a}" for u, a in turns[start : start + 32]]
            )

    # The faster of two passes: the reference should be the embedder at its best,
    # not at a moment the shared machine was busy.
    raw_s = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        await asyncio.gather(*(raw_batch(start) for start in range(0, episodes, 32)))
        raw_s = min(raw_s, time.perf_counter() - started)
    await embedder.close()
    # Turn length in MiniLM's WordPiece tokens: a size the figures can be compared by.
    counter = MiniLMEmbedder()
    counter._load()  # noqa: SLF001 -- bench-only introspection
    tokens = counter._tokenizer.encode_batch(  # noqa: SLF001
        [f"User: {u}\nAssistant: {a}" for u, a in turns[:200]]
    )
    await counter.close()
    return {
        "episodes": episodes,
        "ingest_rate": episodes / ingest_s,
        "raw_rate": episodes / raw_s,
        "tokens_p50": float(np.median([sum(e.attention_mask) for e in tokens])),
    }


def measure_kernels(rounds: int = 7) -> dict[str, float]:
    """The offline model on int8 kernels against the same weights unpacked to fp32,
    one thread each, alternating so that the shared machine's noise falls on both."""
    rng = random.Random(5)
    queries = [" ".join(rng.sample(QUERY_WORDS, 2)) for _ in range(64)]
    chats = [f"{q} {a}" for q, a in chat_turns(64, 5)]
    fp32, int8 = MiniLMEmbedder(int8_kernels=False), MiniLMEmbedder()
    cases = {"1 query": queries[:1], "16 queries": queries[:16], "32 chat turns": chats[:32]}
    times: dict[str, dict[int, list[float]]] = {c: {0: [], 1: []} for c in cases}
    for _ in range(rounds):
        for case, batch in cases.items():
            for k, embedder in enumerate((fp32, int8)):
                for _ in range(1 if len(batch) > 16 else 10):
                    started = time.perf_counter()
                    embedder._embed_sync(batch)
                    times[case][k].append((time.perf_counter() - started) * 1000)
    out: dict[str, float] = {"int8_layers": int8.int8_layers}
    for case in cases:
        out[f"{case} fp32"] = float(np.median(times[case][0]))
        out[f"{case} int8"] = float(np.median(times[case][1]))
    for name, batch in (("queries", queries), ("chat turns", chats)):
        cos = (fp32._embed_sync(batch) * int8._embed_sync(batch)).sum(axis=1)
        out[f"cos min {name}"] = float(cos.min())
    return out


async def measure_watch(episodes: int) -> dict[str, float]:
    """WatchExtractions delivery, on its own server with an Ollama stand-in.

    No LLM runs here, so extraction answers come from the protocol-faithful
    stub the tests use (instantly): what is measured is our path from the
    extraction job's commit to the subscriber, not a model's speed. It runs on
    a separate small server so its extraction work never weighs on the other
    figures.
    """
    from tests.ollama_stub import OllamaStub, Reply

    answer = Reply.of(
        {
            "entities": [
                {"name": "Postgres", "type": "technology", "notes": "the database"},
                {"name": "Ada", "type": "person", "notes": None},
            ],
            "relationships": [
                {"from": "Ada", "to": "Postgres", "label": "maintains", "notes": None}
            ],
        }
    )
    with (
        OllamaStub(default=answer) as stub,
        tempfile.TemporaryDirectory(prefix="nexus-watch-") as tmp,
    ):
        server = ServerProcess(Path(tmp) / "data", "--ollama-url", stub.url, keep_log=False).start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                memory = memory_grpc.MemoryServiceStub(channel)
                graph = graph_grpc.GraphServiceStub(channel)
                session = await memory.CreateSession(
                    memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
                )
                sent: dict[int, float] = {}
                from_commit: list[float] = []
                from_ack: list[float] = []
                arrived: dict[int, float] = {}
                call = graph.WatchExtractions(
                    graph_pb2.WatchExtractionsRequest(session_id=session.id)
                )

                async def watch() -> None:
                    async for event in call:
                        now = time.time()
                        committed = event.time.seconds + event.time.nanos / 1e9
                        from_commit.append((now - committed) * 1000)
                        arrived[event.episode_id] = now
                        if len(from_commit) == episodes:
                            return

                reader = asyncio.create_task(watch())
                for i in range(episodes):
                    # The event may arrive before this call's answer is read: time
                    # the whole path from the call.
                    started = time.time()
                    ep = await memory.CreateEpisode(
                        memory_pb2.CreateEpisodeRequest(
                            session_id=session.id,
                            user_message=f"Ada moved us to Postgres ({i})",
                            ai_response="Noted: Postgres it is.",
                        )
                    )
                    sent[ep.id] = started
                    await asyncio.sleep(0.02)  # a chat's pace, not a flood: one at a time
                await asyncio.wait_for(reader, 120)
                call.cancel()
                from_ack.extend((arrived[i] - sent[i]) * 1000 for i in sent)
        finally:
            server.stop()
    from_commit.sort()
    from_ack.sort()
    return {
        "events": episodes,
        "commit_p50": percentile(from_commit, 50),
        "commit_p99": percentile(from_commit, 99),
        "ack_p50": percentile(from_ack, 50),
        "ack_p99": percentile(from_ack, 99),
    }


async def service_status(target: str) -> memory_pb2.ServiceStatus:
    async with grpc.aio.insecure_channel(target) as channel:
        return await memory_grpc.MemoryServiceStub(channel).GetServiceStatus(
            memory_pb2.GetServiceStatusRequest()
        )


async def _drained(channel: grpc.aio.Channel) -> None:
    """Until the index queue is empty: the end of an ingest run, timed at 50 ms."""
    await wait_queue_empty(channel, "index:episodes", timeout=3600, interval=0.05)


def client_cpu_seconds() -> float:
    """CPU this process (the load client) has used: it shares the server's cores."""
    t = os.times()
    return t.user + t.system


async def measure(target: str, duration: float, scopes: list[int], server: ServerProcess) -> list:
    """Each run's result, with the CPU that server and client spent during it
    (cores busy on average, warm-up included), to show what bounds it."""
    results = []
    common = {"duration": duration, "warmup": 1.0, "progress": sys.stderr}
    # CreateEpisode runs last: the episodes it writes keep the embedder busy
    # for minutes afterwards, which would weigh on every later figure.
    runs = [
        ("health", 16, {}),
        ("search_episodes", 16, {"mode": "keyword", "search_session_ids": scopes}),
        ("search_episodes", 16, {"mode": "semantic", "search_session_ids": scopes}),
        ("search_episodes", 16, {"mode": "hybrid", "search_session_ids": scopes}),
        ("health", 64, {}),
        ("mixed", 64, {"search_session_ids": scopes}),
        ("create_episode", 64, {}),
    ]
    for rpc, conc, extra in runs:
        s0, c0, w0 = server.cpu_seconds(), client_cpu_seconds(), time.perf_counter()
        result = await run_bench(target, rpc, conc, **common, **extra)
        wall = time.perf_counter() - w0
        result.options["cpu_cores"] = {
            "server": (server.cpu_seconds() - s0) / wall,
            "client": (client_cpu_seconds() - c0) / wall,
        }
        print(format_result(result), file=sys.stderr)
        results.append((rpc, conc, extra.get("mode", ""), result))
    return results


def targets_table(by, extra, small, ingests, watch, end_rss, lag) -> list[str]:
    """Each issue's performance target beside what this run measured."""
    rows = _latency_targets(by, extra, ingests, watch, end_rss, lag)
    rows += _growth_and_cpu_targets(by, extra, small)
    out = ["", "## Targets", "", "| target | wanted | this run | met |", "|---|---|---|---|"]
    for name, wanted, got, met in rows:
        out.append(f"| {name} | {wanted} | {got:,.2f} | {'yes' if met else 'no'} |")
    return out


def _latency_targets(by, extra, ingests, watch, end_rss, lag) -> list[tuple]:
    """The targets of issues 3 to 12: latencies, ingest rates, memory and lag."""
    sem, hyb = by[("search_episodes", 16, "semantic")], by[("search_episodes", 16, "hybrid")]
    h16 = by[("health", 16, "")]
    hood = extra["GetNeighborhood depth 3 (c=1)"]
    mem1, mem_kw = extra["SearchMemories semantic (c=1)"], extra["SearchMemories keyword (c=1)"]
    default1 = extra["SearchEpisodes default, session in a project (c=1)"]
    chat = ingests["chat-length turns"]
    return [
        ("semantic search p50 at c=16 (issue 3)", "≤ 20 ms", sem.p50_ms, sem.p50_ms <= 20),
        ("semantic search p99 at c=16 (issue 3)", "≤ 60 ms", sem.p99_ms, sem.p99_ms <= 60),
        ("hybrid search p50 at c=16 (issue 3)", "≤ 20 ms", hyb.p50_ms, hyb.p50_ms <= 20),
        ("hybrid search p99 at c=16 (issue 3)", "≤ 60 ms", hyb.p99_ms, hyb.p99_ms <= 60),
        (
            "ingest, chat-length (issue 3)",
            "≥ 100 /s",
            chat["ingest_rate"],
            chat["ingest_rate"] >= 100,
        ),
        (
            "ingest vs raw embedder (issue 3)",
            "≥ 75 %",
            100 * chat["ingest_rate"] / chat["raw_rate"],
            chat["ingest_rate"] >= 0.75 * chat["raw_rate"],
        ),
        ("worst event-loop delay (issue 3)", "≤ 100 ms", lag.max_lag_ms, lag.over_100ms == 0),
        ("RSS, MB (issue 3)", "≤ 1,000", end_rss["VmRSS"], end_rss["VmRSS"] <= 1000),
        ("GetNeighborhood depth 3 p99 (issue 4)", "≤ 20 ms", hood["p99"], hood["p99"] <= 20),
        # Measured from the CreateEpisode call, as a client sees it (issue 18 item 7).
        (
            "WatchExtractions delivery p50 from CreateEpisode (issue 4)",
            "≤ 50 ms",
            watch["ack_p50"],
            watch["ack_p50"] <= 50,
        ),
        ("SearchMemories semantic p50, c=1 (issue 5)", "≤ 10 ms", mem1["p50"], mem1["p50"] <= 10),
        (
            "SearchMemories keyword p50, c=1 (issue 5)",
            "≤ 10 ms",
            mem_kw["p50"],
            mem_kw["p50"] <= 10,
        ),
        (
            "default-mode SearchEpisodes p50, c=1 (issue 12)",
            "≤ 30 ms",
            default1["p50"],
            default1["p50"] <= 30,
        ),
        (
            "hybrid SearchEpisodes at c=16, % of Health/Check req/s (issue 12)",
            "≥ 8 %",
            100 * hyb.rps / h16.rps,
            hyb.rps >= 0.08 * h16.rps,
        ),
        (
            "ingest, chat-length (issue 12)",
            "≥ 75 /s",
            chat["ingest_rate"],
            chat["ingest_rate"] >= 75,
        ),
    ]


def _growth_and_cpu_targets(by, extra, small) -> list[tuple]:
    """Issue 19's targets: latency growth with 10× the data, and server CPU per call."""
    sem, hyb = by[("search_episodes", 16, "semantic")], by[("search_episodes", 16, "hybrid")]
    kw16, h64 = by[("search_episodes", 16, "keyword")], by[("health", 64, "")]
    create = by[("create_episode", 64, "")]

    def cpu(res) -> float:
        return 1000 * res.options["cpu_cores"]["server"] / res.rps if res.rps else 0.0

    def growth(name: str) -> float:
        return ratio(extra[name]["p50"], small[name]["p50"])

    rows = []
    for name in (
        "SearchMemories keyword (c=1)",
        "SearchMemories default (c=1)",
        "SearchEpisodes keyword, small session outside projects (c=1)",
        "SearchEpisodes default, small session outside projects (c=1)",
    ):
        rows.append(
            (
                f"{name} p50, 10× the data ÷ the small database (issue 19)",
                "≤ 1.5×",
                growth(name),
                growth(name) <= 1.5,
            )
        )
    rows += [
        (
            "server CPU a semantic call − keyword's, c=16 (issue 19)",
            "≤ 1.5 ms",
            cpu(sem) - cpu(kw16),
            cpu(sem) - cpu(kw16) <= 1.5,
        ),
        (
            "server CPU a hybrid call − semantic's, c=16 (issue 19)",
            "≤ 0.5 ms",
            cpu(hyb) - cpu(sem),
            cpu(hyb) - cpu(sem) <= 0.5,
        ),
        (
            "CreateEpisode at c=64, % of Health/Check req/s (issue 19)",
            "≥ 50 %",
            100 * create.rps / h64.rps,
            create.rps >= 0.5 * h64.rps,
        ),
    ]
    return rows


def _mix(weights: dict[str, float]) -> str:
    return ",".join(f"{op}={w:g}" for op, w in weights.items())


def write_report(
    path: Path,
    args,
    server: ServerProcess,
    results,
    extra,
    small,
    seeded: Seeded,
    ingests,
    rss,
    lag,
    watch,
    seed_s: float,
    kernels: dict[str, float],
) -> None:
    by = {(r, c, m): res for r, c, m, res in results}
    lines = _report_intro(args, seeded, seed_s)
    lines += _rpc_tables(results, by, extra, small)
    lines += _run_notes(args.episodes, server, results, by, ingests, kernels, rss, watch, lag)
    lines += targets_table(by, extra, small, ingests, watch, rss[1], lag)
    # The per-thread profile and the before/after hot path are their own commands';
    # their findings travel with the figures.
    for findings in ("profile_findings.md", "hot_path_findings.md"):
        lines += ["", (ROOT / "bench" / findings).read_text().rstrip()]
    path.write_text("\n".join(lines) + "\n")
    start_rss, end_rss = rss
    json_path = path.with_suffix(".json")
    json_path.write_text(
        json.dumps(
            {
                "runs": [r.to_dict() for *_, r in results],
                "extra": extra,
                "small": small,
                "ingest": ingests,
                "rss_mb": {"start": start_rss, "end": end_rss},
                "watch": watch,
                "kernels": kernels,
                "event_loop": {
                    "samples": lag.samples,
                    "max_lag_ms": lag.max_lag_ms,
                    "over_100ms": lag.over_100ms,
                },
            },
            indent=1,
            default=str,
        )
    )


def _report_intro(args, seeded: Seeded, seed_s: float) -> list[str]:
    """The report's title, the command that made it, and what it ran on."""
    episodes = args.episodes
    cmd = f"make bench BENCH_EPISODES={episodes} BENCH_DURATION={args.duration:g}"
    return [
        "# Benchmarks",
        "",
        "Produced by `bench/run_benchmarks.py`; every figure below comes from one run of:",
        "",
        f"```sh\n{cmd}\n```",
        "",
        f"- Machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; shared and noisy,"
        " so compare ratios within a run.",
        f"- Database: {seeded.episodes:,} episodes: {episodes:,} in"
        f" {episodes // EPISODES_PER_SESSION:,} sessions of {SESSIONS_PER_PROJECT} per project,"
        f" {episodes:,} more in one project of {BIG_PROJECT_SESSIONS:,} sessions, and"
        f" {LONE_SESSIONS} sessions of {LONE_EPISODES} outside any project; {ENTITIES:,}"
        f" entities and {RELATIONSHIPS:,} relationships; {seeded.memories:,} USER memories,"
        f" {MEMORIES_PER_USER:,} for each of {seeded.memories // MEMORIES_PER_USER:,} users in"
        f' one project, each starting "The user likes" (seeded in {seed_s:.0f} s). Text is'
        f" Zipf-distributed over a {VOCABULARY:,}-word vocabulary; seeded vectors are random"
        " unit vectors and every query is embedded by the real offline model.",
        "- Episode searches at c=16 are scoped to a session in a project: 1,000 episodes."
        " Memory searches are scoped to one user in the project (1,000 memories of theirs) and"
        ' ask "what does the user enjoy, X or Y?".',
        f"- The small database (for the scope-cost ratios): {SMALL_EPISODES:,} episodes in the"
        f" same layout and {SMALL_MEMORY_USERS * MEMORIES_PER_USER:,} memories"
        f" ({SMALL_MEMORY_USERS} users), on a second server started after the first stops.",
        f"- Run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
    ]


def _rpc_tables(results, by, extra, small) -> list[str]:
    """Each RPC's figures at c=16 and c=64, the single-caller searches, and
    the scope-bound searches on the small database beside the main one's."""
    h64, h16 = by[("health", 64, "")], by[("health", 16, "")]
    lines = [
        "| what | concurrency | req/s | p50 ms | p95 ms | p99 ms | errors | vs Health/Check"
        " | server CPU ms a call | cores busy: server / client |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rpc, conc, mode, res in results:
        base = h64 if conc == 64 else h16
        name = rpc + (f" ({mode})" if mode else "")
        vs_health = ratio(res.rps, base.rps)
        cores = res.options["cpu_cores"]
        per_call = 1000 * cores["server"] / res.rps if res.rps else 0
        lines.append(
            f"| {name} | {conc} | {res.rps:,.0f} | {res.p50_ms:.1f} | {res.p95_ms:.1f} |"
            f" {res.p99_ms:.1f} | {res.error_count} | {vs_health:.0%} | {per_call:.2f} |"
            f" {cores['server']:.2f} / {cores['client']:.2f} |"
        )
    lines += [
        "",
        "| what | req/s | p50 ms | p99 ms | server CPU ms a call |",
        "|---|---|---|---|---|",
    ]
    for name, figures in extra.items():
        lines.append(
            f"| {name} | {figures['rps']:,.0f} | {figures['p50']:.2f} | {figures['p99']:.2f} |"
            f" {figures['cpu_ms']:.2f} |"
        )
    lines += [
        "",
        "The same scope-bound searches on the small database (a tenth of the data):",
        "",
        "| what | p50 ms small | p50 ms main | main ÷ small | server CPU ms a call, small |",
        "|---|---|---|---|---|",
    ]
    for name, figures in small.items():
        main_p50 = extra[name]["p50"]
        lines.append(
            f"| {name} | {figures['p50']:.2f} | {main_p50:.2f} |"
            f" {ratio(main_p50, figures['p50']):.2f} |"
            f" {figures['cpu_ms']:.2f} |"
        )
    return lines


def _run_notes(episodes: int, server, results, by, ingests, kernels, rss, watch, lag) -> list[str]:
    """The run's other figures, one bullet each: ingest, the embedder's
    kernels, watch delivery, start-up, memory, event-loop lag, the mix and
    the streams' first hits."""
    lines = [
        "",
    ]
    for label, ingest in ingests.items():
        lines.append(
            f"- Ingest to searchable, {label} (p50 {ingest['tokens_p50']:.0f} tokens an episode):"
            f" {ingest['episodes']:,.0f} CreateEpisode calls (concurrency 16) until the index"
            f" queue was empty: {ingest['ingest_rate']:.0f} episodes/s; the raw embedder on the"
            f" same texts in batches of 32, two at once, the faster of two passes:"
            f" {ingest['raw_rate']:.0f} texts/s"
            f" ({ingest['ingest_rate'] / ingest['raw_rate']:.0%})."
        )
    lines.append(
        f"- Embedder kernels ({kernels['int8_layers']:.0f} dense layers on 8-bit MatMulNBits,"
        " int8 compute, against the same weights unpacked to fp32; one thread each, median"
        " ms): "
        + "; ".join(
            f"{case} {kernels[case + ' fp32']:.1f} → {kernels[case + ' int8']:.1f}"
            for case in ("1 query", "16 queries", "32 chat turns")
        )
        + f". Cosine between the two, lowest of 64: queries {kernels['cos min queries']:.4f},"
        f" chat turns {kernels['cos min chat turns']:.4f}."
    )
    start_rss, end_rss = rss
    lines.append(
        f"- WatchExtractions delivery ({watch['events']} episodes, one every ~20 ms, on a"
        " separate server whose Ollama is the tests' instant stand-in): from the extraction"
        f" job's commit to the subscriber p50 {watch['commit_p50']:.1f} ms, p99"
        f" {watch['commit_p99']:.1f} ms; from the CreateEpisode call (the write, queue pickup,"
        f" the stub's answer, the graph upserts and the commit) p50 {watch['ack_p50']:.1f} ms, p99"
        f" {watch['ack_p99']:.1f} ms."
    )
    lines += [
        f"- Start-up on {episodes:,} episodes (process start to serving):"
        f" {server.startup_s:.2f} s.",
        f"- Server RSS at start: {start_rss['VmRSS']:.0f} MB ({start_rss['RssAnon']:.0f} MB"
        f" anonymous, {start_rss['RssFile']:.0f} MB file-backed); after every run above:"
        f" {end_rss['VmRSS']:.0f} MB ({end_rss['RssAnon']:.0f} MB anonymous,"
        f" {end_rss['RssFile']:.0f} MB file-backed: mmapped vector and SQLite pages the kernel"
        " can drop).",
        f"- Event loop, over every run above (a wake-up asked for every 50 ms, from"
        f" GetServiceStatus): worst delay {lag.max_lag_ms:.0f} ms; {lag.over_100ms} of"
        f" {lag.samples:,} wake-ups were more than 100 ms late.",
    ]
    mixed = by.get(("mixed", 64, ""))
    if mixed is not None:
        lines.append(
            f"- mixed (c=64, mix {_mix(mixed.options['mix'])}): "
            + "; ".join(
                f"{op} p50 {st.p50_ms:.1f} ms p99 {st.p99_ms:.1f} ms"
                for op, st in sorted(mixed.ops.items())
            )
            + "."
        )
    for rpc, _conc, mode, res in results:
        if res.first_item_p50_ms is not None and rpc != "mixed":
            lines.append(
                f"- {rpc} ({mode}): first hit p50 {res.first_item_p50_ms:.1f} ms vs whole stream"
                f" p50 {res.p50_ms:.1f} ms."
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--episodes", type=int, default=int(os.environ.get("BENCH_EPISODES", "100000"))
    )
    parser.add_argument(
        "--duration", type=float, default=float(os.environ.get("BENCH_DURATION", "10"))
    )
    parser.add_argument("--ingest", type=int, default=int(os.environ.get("BENCH_INGEST", "500")))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    try:  # fail now, not after every other run
        stand_in = importlib.util.find_spec("tests.ollama_stub")
    except ModuleNotFoundError:
        stand_in = None
    if stand_in is None:
        raise SystemExit("run from the repository root: python -m bench.run_benchmarks")
    with tempfile.TemporaryDirectory(prefix="nexus-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        started = time.perf_counter()
        seeded = seed(data_dir, args.episodes)
        seed_s = time.perf_counter() - started
        print(f"seeded in {seed_s:.1f}s", file=sys.stderr)
        server = ServerProcess(data_dir, keep_log=False).start(timeout=120)
        target = server.target
        try:
            server.wait_settled()
            start_rss = server.rss_mb()
            extra = asyncio.run(measure_extra(target, args.duration, seeded, server))
            ingests = {
                "chat-length turns": asyncio.run(
                    measure_ingest(target, chat_turns(args.ingest, 9))
                ),
                "long synthetic turns": asyncio.run(
                    measure_ingest(target, [(t[:150], t[150:]) for t in texts(args.ingest, 54, 9)])
                ),
            }
            results = asyncio.run(measure(target, args.duration, seeded.session_scopes, server))
            end_rss = server.rss_mb()
            lag = asyncio.run(service_status(target)).event_loop
        finally:
            server.stop()
        small_dir = Path(tmp) / "small"
        small_seeded = seed(small_dir, SMALL_EPISODES, SMALL_MEMORY_USERS)
        small_server = ServerProcess(small_dir, keep_log=False).start(timeout=120)
        try:
            small_server.wait_settled()
            small = asyncio.run(
                measure_small_scopes(small_server.target, args.duration, small_seeded, small_server)
            )
        finally:
            small_server.stop()
        watch = asyncio.run(measure_watch(200))
        kernels = measure_kernels()
        write_report(
            args.out,
            args,
            server,
            results,
            extra,
            small,
            seeded,
            ingests,
            (start_rss, end_rss),
            lag,
            watch,
            seed_s,
            kernels,
        )
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
