"""The composition root: builds the stores, clients, use cases and workers.

Everything the servicers need hangs off one ``App``; start() and close()
order the lifecycle (stores before workers on the way up, workers before
stores on the way down).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_grpc.core import llm_usage, storage, tenancy
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.redact import mask_url, scrub
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain import vector_collections
from nexus_grpc.domain.budgets import BudgetPolicy, Budgets, TenantSpend
from nexus_grpc.domain.conversations import Conversations
from nexus_grpc.domain.empty_answers import EmptyAnswers
from nexus_grpc.domain.entity_resolution import EntityResolution
from nexus_grpc.domain.erasures import Erasures
from nexus_grpc.domain.export import ProjectExport
from nexus_grpc.domain.extraction import Extraction, mark_failed, note_retry
from nexus_grpc.domain.formation import MemoryFormationJob
from nexus_grpc.domain.graph import Graph
from nexus_grpc.domain.inline_vectors import InlineVectors
from nexus_grpc.domain.memories import Memories
from nexus_grpc.domain.merges import Merges
from nexus_grpc.domain.project_stats import ProjectStatistics
from nexus_grpc.domain.reconcile import Reconciler
from nexus_grpc.domain.restore import ProjectRestore
from nexus_grpc.domain.retrieval.search import EntitySearch, EpisodeSearch, MemorySearch
from nexus_grpc.domain.selection import Selector
from nexus_grpc.domain.summaries import Summaries
from nexus_grpc.domain.usage_report import UsageReports
from nexus_grpc.domain.user_export import UserExport
from nexus_grpc.embedding import Embedder, QueryVectorCache, make_embedder
from nexus_grpc.errors import DependencyError
from nexus_grpc.llm import LLMClient, LLMError, make_client
from nexus_grpc.rerank import RerankClient, Reranker
from nexus_grpc.runtime import tracing
from nexus_grpc.runtime.config import Settings
from nexus_grpc.runtime.loop_lag import LoopLag, LoopLagMonitor
from nexus_grpc.store import Database as SQLiteDatabase
from nexus_grpc.store import extraction_events as event_store
from nexus_grpc.store import jobs as job_store
from nexus_grpc.store.jobs import QueueDepth
from nexus_grpc.store.keyword_upkeep import KeywordIndexUpkeep
from nexus_grpc.store.postgres.database import PostgresDatabase, is_postgres_url
from nexus_grpc.store.postgres.vector_index import PgVectorIndex
from nexus_grpc.vectors import (
    EdgeVectorIndex,
    VectorIndex,
    VectorIndexUnavailable,
)
from nexus_grpc.workers import memory_former
from nexus_grpc.workers.eraser import (
    Eraser,
    Scrubber,
    signals_after_erasure,
)
from nexus_grpc.workers.expiry import MemoryExpiry
from nexus_grpc.workers.extractor import ExtractionHandler
from nexus_grpc.workers.history_purge import purge_history
from nexus_grpc.workers.indexer import Indexer, mark_episode_failed, note_episode_retry
from nexus_grpc.workers.memory_former import MemoryFormer
from nexus_grpc.workers.pending_entities import PendingEntityResolver
from nexus_grpc.workers.retention import sweep_retention
from nexus_grpc.workers.storage_upkeep import StorageUpkeep
from nexus_grpc.workers.summarizer import SessionSummarizer
from nexus_grpc.workers.worker import JobWorker, WorkerConfig

log = logging.getLogger(__name__)
EMBEDDING_META_KEY = "embedding_model"
# A dependency that takes longer than this to answer a health check is down for it.
HEALTH_TIMEOUT = 5.0


class EmbedderMismatch(RuntimeError):
    pass


class StartupError(RuntimeError):
    """The server cannot start; the message names the file or address at fault.

    Raised after everything opened so far is closed again, so the process can
    exit at once: a supervisor sees a non-zero exit and one clear line, not a
    traceback followed by a process that hangs with no listener.
    """


#: The queues whose workers wait for an LLM (``llm_ready``).
LLM_QUEUES = frozenset(
    {
        job_store.EXTRACT_EPISODE,
        job_store.SUMMARIZE_SESSION,
        job_store.FORM_MEMORIES,
        job_store.RESOLVE_ENTITY,
    }
)


@dataclass(frozen=True)
class DependencyState:
    name: str
    ok: bool
    detail: str
    #: Optional and not configured: nothing is failing (``ok``), and the detail
    #: says what waits for it or works without it.
    off: bool = False


@dataclass(frozen=True)
class ServiceState:
    state: str
    schema_version: int
    embedding_model: str
    embedding_dimension: int
    dependencies: list[DependencyState] = field(default_factory=list)
    queues: list[QueueDepth] = field(default_factory=list)
    event_loop: LoopLag | None = None
    #: Each tenant's LLM spend today against its budget, as the caller may see.
    budgets: list[TenantSpend] = field(default_factory=list)


def make_database(settings: Settings) -> storage.Database:
    """SQLite in --data-dir, or PostgreSQL at --database-url: either is a
    ``core.storage.Database``, and the domain never learns which it has."""
    if settings.database_url:
        if not is_postgres_url(settings.database_url):
            raise StartupError(
                f"--database-url must be a postgresql:// URL, not {mask_url(settings.database_url)}"
            )
        return PostgresDatabase(settings.database_url, default_tenant=settings.default_tenant)
    return SQLiteDatabase(
        settings.sqlite_path,
        synchronous=settings.sqlite_synchronous,
        default_tenant=settings.default_tenant,
    )


EDGE_WITH_POSTGRES = (
    "the embedded vector index (qdrant-edge) cannot serve with --database-url: it is a"
    " directory owned by one process, and instances sharing a PostgreSQL database share"
    " nothing else; leave --qdrant-url empty to keep vectors in PostgreSQL (pgvector),"
    " or set it to a Qdrant server"
)


def make_index(settings: Settings) -> VectorIndex:
    if settings.qdrant_url:
        # Imported here: qdrant-client costs every other start half a second.
        from nexus_grpc.vectors.remote import QdrantVectorIndex

        return QdrantVectorIndex(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    if settings.database_url:
        return PgVectorIndex(settings.database_url)
    return EdgeVectorIndex(
        settings.vectors_dir, prewarm_bytes=settings.vector_prewarm_mb * 1024 * 1024
    )


def embedding_signature(embedder: Embedder) -> str:
    return f"{embedder.model_id}:{embedder.dimension}"


def check_embedder(uow: UnitOfWork, signature: str) -> None:
    """Record the embedding model on first start; refuse a different one later."""
    recorded = uow.meta.get(EMBEDDING_META_KEY)
    if recorded is None:
        uow.meta.put(EMBEDDING_META_KEY, signature)
    elif recorded != signature:
        raise EmbedderMismatch(
            f"this data was indexed with embedding model {recorded!r}, but the server is configured"
            f" for {signature!r}; vectors from two models cannot be mixed. Either start with the"
            " original embedder, or run `nexus-grpc reindex` to rebuild the index with the new one."
        )


class App:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        index: VectorIndex | None = None,
    ) -> None:
        self.settings = settings
        beside_rows = self._open_dependencies(embedder, index)
        self._make_searches(beside_rows)
        self._make_background_parts()
        self._make_graph_and_memories()

    def _open_dependencies(self, embedder: Embedder | None, index: VectorIndex | None) -> bool:
        """The store, the embedder and the vector index; whether the vectors
        live beside the rows (pgvector in the system of record's database)."""
        settings = self.settings
        if settings.database_url and isinstance(index, EdgeVectorIndex):
            raise StartupError(EDGE_WITH_POSTGRES)
        self.db = make_database(settings)
        self.signals = JobSignals()
        self.embedder = embedder or make_embedder(
            settings.embedder,
            ollama_host=settings.ollama_url or None,
            ollama_model=settings.embedding_model,
            threads=settings.embedder_threads,
        )
        # The readiness probe asks the model itself: a remembered vector would
        # report a down Ollama as up.
        self._embedder_backend = self.embedder
        self.query_cache: QueryVectorCache | None = None
        if settings.query_vector_cache > 0:
            self.query_cache = QueryVectorCache(self.embedder, settings.query_vector_cache)
            self.embedder = self.query_cache
        try:
            self.index = index or make_index(settings)
        except OSError as exc:
            raise StartupError(
                f"cannot open the vector index {settings.vectors_dir}: {exc}"
            ) from exc
        beside_rows = (
            isinstance(self.index, PgVectorIndex) and self.index.url == settings.database_url
        )
        # Child spans of each RPC's work when tracing is on; else these are unchanged.
        self.db = tracing.traced(self.db, "db")
        self.embedder = tracing.traced(self.embedder, "embedder")
        self.index = tracing.traced(self.index, "vector")
        # Set when something found after start makes serving impossible
        # (``serve`` then stops and exits non-zero with ``failure``).
        self.failed = asyncio.Event()
        self.failure: StartupError | None = None
        return beside_rows

    def _make_searches(self, beside_rows: bool) -> None:
        """Conversations, the three searches and what reads a project whole."""
        settings = self.settings
        # Vectors in the system of record's own database (pgvector on the same
        # URL): a create writes its row's vector in the row's transaction.
        self.inline_vectors = InlineVectors(self.embedder) if beside_rows else None
        self.conversations = Conversations(
            self.db,
            self.signals,
            settings.default_tenant,
            inline=self.inline_vectors,
            scrub_delay=settings.scrub_delay_seconds,
        )
        # None unless --reranker-url: searches then keep the fused order.
        self.reranker: Reranker | None = None
        if settings.reranker_url:
            try:
                client = RerankClient(
                    settings.reranker_url,
                    model=settings.reranker_model,
                    api_key=settings.reranker_api_key,
                )
            except ValueError as exc:
                raise StartupError(f"--reranker-url: {exc}") from exc
            self.reranker = Reranker(
                client,
                candidates=settings.reranker_candidates,
                timeout=settings.reranker_timeout,
            )
        # The three searches (domain/retrieval/search.py).
        self.episode_search = EpisodeSearch(self.db, self.embedder, self.index, self.reranker)
        self.memory_search = MemorySearch(self.db, self.embedder, self.index, self.reranker)
        self.entity_search = EntitySearch(self.db, self.embedder, self.index, self.reranker)
        self.export = ProjectExport(self.db)
        self.project_stats = ProjectStatistics(self.db)
        self.restore = ProjectRestore(self.db, self.signals, settings.default_tenant)
        self.indexer = Indexer(self.db, self.embedder, self.index)
        self.reconciler = Reconciler(self.db, self.index, self.signals)

    def _make_background_parts(self) -> None:
        """The LLM client, the tenants' budgets and what runs beside the RPCs."""
        settings = self.settings
        # None when no LLM server is configured: LLM jobs then wait in the queue.
        self.llm: LLMClient | None = (
            make_client(
                settings.llm_api,
                settings.llm_base_url,
                timeout=settings.llm_timeout,
                context_length=settings.llm_context_length,
                api_key=settings.llm_api_key,
            )
            if settings.llm_base_url
            else None
        )
        self.llm = tracing.traced(self.llm, "llm")
        # Tenants' daily LLM token budgets: --llm-tokens-per-day here, the keys
        # file's "tenants" from start_server (set_tenants).
        self.budgets = Budgets(self.db, BudgetPolicy(settings.llm_tokens_per_day))
        self.usage_reports = UsageReports(self.db, self.budgets, settings.default_tenant)
        self.workers: list[JobWorker] = []
        self._background: set[asyncio.Task[None]] = set()
        self.loop_lag = LoopLagMonitor()
        # SQLite's FTS5 indexes only: PostgreSQL keeps its own (autovacuum).
        self.keyword_upkeep = (
            KeywordIndexUpkeep(self.db) if isinstance(self.db, SQLiteDatabase) else None
        )
        # Wakes WatchExtractions streams after extraction outcomes commit.
        self.graph_events = EventBroadcaster(
            settings.max_watch_streams,
            settings.max_watch_streams_per_key,
            settings.watch_streams_per_tenant,
        )

    def _make_graph_and_memories(self) -> None:
        """The use cases that call the LLM: the graph, summaries, memories, selection."""
        settings = self.settings
        self.graph = Graph(
            self.db,
            self.signals,
            self.embedder,
            self.index,
            self.graph_events,
            default_tenant=settings.default_tenant,
            inline=self.inline_vectors,
            event_retention=settings.extraction_event_retention_days * 86_400.0,
        )
        # Names rules cannot settle are asked about with the extraction model;
        # a new name's vector neighbours become questions, never merges.
        self.entity_resolution = EntityResolution(
            self.db,
            self.llm,
            model=settings.extraction_model,
            timeout=settings.llm_timeout,
            embedder=self.embedder,
            index=self.index,
        )
        self.extraction = Extraction(
            self.db,
            self.signals,
            self.graph_events,
            self.llm,
            model=settings.extraction_model,
            timeout=settings.llm_timeout,
            resolution=self.entity_resolution,
        )
        self.merges = Merges(self.db, self.signals)
        self.summaries = Summaries(
            self.db, self.signals, self.llm, settings.summary_model, budgets=self.budgets
        )
        self.memories = Memories(
            self.db,
            self.signals,
            self.embedder,
            self.index,
            default_tenant=settings.default_tenant,
            history_retention=settings.memory_history_retention_days * 86_400.0,
            inline=self.inline_vectors,
            scrub_delay=settings.scrub_delay_seconds,
        )
        # Forgetting (docs/privacy.md): erasures, their receipts and scrubs.
        self.erasures = Erasures(self.db, self.signals, settings.default_tenant)
        self.user_export = UserExport(self.db, settings.default_tenant)
        self.scrubber = Scrubber(self.db, self.index)
        self.storage_upkeep = StorageUpkeep(
            self.db, self.scrubber, settings.extraction_event_retention_days * 86_400.0
        )
        # Memories that form themselves, with the extraction model.
        self.formation = MemoryFormationJob(
            self.db,
            self.signals,
            self.graph_events,
            self.llm,
            self.memories,
            self.memory_search,
            model=settings.extraction_model,
            timeout=settings.llm_timeout,
        )
        self.selector = Selector(
            self.db,
            self.memory_search,
            self.llm,
            settings.selection_model,
            timeout=settings.llm_timeout,
            default_tenant=settings.default_tenant,
            budgets=self.budgets,
        )
        # Why a list, search or selection is empty, for the answer's trailer.
        self.empty_answers = EmptyAnswers(self.db, llm_configured=self.llm is not None)

    @property
    def _store_name(self) -> str:
        return "postgresql" if self.settings.database_url else "sqlite"

    async def check_store(self) -> DependencyState:
        """A read of the schema; and while writes have been failing (a full
        disk, a read-only file), a write, which clears the failure once the
        store takes writes again: a server that answers reads but cannot
        write is not serving."""
        name = self._store_name
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT):
                await self.db.read(lambda uow: uow.meta.probe())
                if self.db.write_failure is not None:
                    at = time.time()
                    await self.db.write(lambda c: c.meta.touch(at))
        except Exception as exc:
            return DependencyState(name, False, f"query failed: {exc}")
        return DependencyState(name, True, f"schema version {self.db.schema_version}")

    async def _check_index(self) -> DependencyState:
        problem = await self.index.check() or self.indexer.index_error
        return DependencyState("vector_index", problem is None, problem or "ok")

    async def _check_embedder(self) -> DependencyState:
        signature = embedding_signature(self.embedder)
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT):
                vector = await self._embedder_backend.embed_query("health check")
        except Exception as exc:
            return DependencyState("embedder", False, f"{signature}: cannot embed: {exc}")
        if len(vector) != self.embedder.dimension:
            return DependencyState(
                "embedder", False, f"{signature}: answered a vector of the wrong size"
            )
        return DependencyState("embedder", True, signature)

    async def _check_llm(self, queues: Sequence[QueueDepth]) -> DependencyState:
        name = self.settings.llm_api
        if self.llm is None:
            # Off by choice, as `make run` starts: the install is whole, so it
            # neither fails nor degrades; what waits for a model is said.
            waiting = {q.kind: q.pending for q in queues if q.kind in LLM_QUEUES}
            held = sum(waiting.values())
            return DependencyState(
                name,
                True,
                "off: not configured (--ollama-url or --llm-url); extraction, summaries and"
                " memory formation wait in their queues until one is"
                f" ({held} job{'' if held == 1 else 's'} waiting now), and selection ranks"
                " by semantic similarity",
                off=True,
            )
        models = [
            self.settings.extraction_model,
            self.settings.summary_model,
            self.settings.selection_model,
        ]
        try:
            missing = await self.llm.missing_models(models, timeout=HEALTH_TIMEOUT)
        except LLMError as exc:
            return DependencyState(name, False, str(exc))
        if missing:
            return DependencyState(
                name,
                False,
                f"{self.llm.host} does not have {', '.join(missing)}"
                + (f"; pull with `ollama pull {missing[0]}`" if name == "ollama" else ""),
            )
        # The LLM workers know best whether calls are failing: they are the
        # ones waiting on it.
        waits = [
            w.waiting_on
            for w in self.workers
            if w.kind in (job_store.EXTRACT_EPISODE, job_store.SUMMARIZE_SESSION) and w.waiting_on
        ]
        if waits:
            return DependencyState(name, False, waits[0])
        return DependencyState(name, True, f"{self.llm.host}: {', '.join(dict.fromkeys(models))}")

    async def _check_reranker(self) -> DependencyState:
        if self.reranker is None:
            # Optional: a server without one is whole, its searches in the fused order.
            return DependencyState(
                "reranker",
                True,
                "off: not configured (--reranker-url); searches keep the fused order",
                off=True,
            )
        ok, detail = await self.reranker.check(HEALTH_TIMEOUT)
        return DependencyState("reranker", ok, detail)

    def llm_ready(self) -> str | None:
        """Why LLM workers must wait, or None when they may run."""
        if self.llm is None:
            return "no LLM server configured (--ollama-url / OLLAMA_HOST, or --llm-url)"
        return None

    def _worker_config(self, **overrides: Any) -> WorkerConfig:
        return dataclasses.replace(
            WorkerConfig(
                max_attempts=self.settings.job_max_attempts,
                lease_seconds=self.settings.job_lease_seconds,
            ),
            **overrides,
        )

    async def start(self, *, reconcile: bool = True) -> None:
        try:
            await self._open_stores()
        except BaseException:
            await self.close()
            raise
        self._start_workers(reconcile)

    async def _open_stores(self) -> None:
        if self.settings.database_url:
            where = f"the database {mask_url(self.settings.database_url)}"
        else:
            where = f"the database {self.settings.sqlite_path}"
        try:
            await self.db.open()
            await self.db.write(lambda uow: uow.jobs.reset_running())
        except (DependencyError, OSError, RuntimeError) as exc:
            raise StartupError(f"cannot open {where}: {exc}") from exc
        if isinstance(self.db, PostgresDatabase):
            # Extraction outcomes committed by any instance wake this one's watchers.
            self.db.listen(event_store.NOTIFY_CHANNEL, lambda _: self.graph_events.notify())
        await self.db.write(lambda c: check_embedder(c, embedding_signature(self.embedder)))
        index = mask_url(self.settings.qdrant_url) or str(self.settings.vectors_dir)
        for spec in vector_collections.ALL:
            try:
                await self.indexer.ensure(spec)
            except VectorIndexUnavailable as exc:
                # The index is derived: serve anyway (degraded), keep writes
                # queued, and let the indexer create the collection when the
                # index is back.
                self.indexer.index_error = str(exc)
                log.warning("vector index unavailable at start: %s", exc)
            except Exception as exc:
                raise StartupError(f"cannot open the vector index {index}: {exc}") from exc

    def _start_workers(self, reconcile: bool) -> None:
        self._add_index_workers()
        self._add_llm_workers()
        self._add_upkeep_workers()
        self._add_erasure_workers()
        for worker in self.workers:
            worker.start()
        self.loop_lag.start()
        if self.keyword_upkeep is not None:
            self.keyword_upkeep.start()
        self.storage_upkeep.start()
        warm = getattr(self.embedder, "warm", None)
        if warm is not None:
            # An in-process model loads in ~0.5 s: load it now, in the background, so
            # the first search does not wait for it (and serving is not delayed).
            # A model that cannot load is fatal: every search and every index job
            # would fail, so the process must exit and say so (see ``failed``).
            self._in_background(self._warm(warm), "embedder warm-up")
        if self.llm is not None:
            # Each model's context window, read now so the first call does not
            # wait for it; a server that is away is read again on first use.
            self._in_background(self._read_contexts(self.llm), "LLM context lengths")
        if reconcile:
            # In the background: a large index must not delay serving.
            self._in_background(self._reconcile_at_start(), "start-up reconcile")
        # A budget raised or removed since the work was deferred frees it now,
        # not at the next midnight; in the background, as a backlog may be long.
        self._in_background(self._resume_deferred(), "resuming work budgets deferred")

    async def _resume_deferred(self) -> None:
        for worker in self.workers:
            if worker.gate is None:
                continue
            resumed = await self.budgets.resume(worker.kind, worker.on_retry)
            if resumed:
                log.info(
                    "%d %s jobs a budget deferred may run now: they are due at once",
                    resumed,
                    worker.kind,
                )
                self.signals.wake(worker.kind)

    def _add_index_workers(self) -> None:
        for spec in vector_collections.ALL:
            is_episodes = spec is vector_collections.EPISODES
            self.workers.append(
                JobWorker(
                    self.db,
                    self.signals,
                    spec.job_kind,
                    self.indexer.handler(spec),
                    # Two batches in flight: one embeds while the other writes its
                    # points and records its jobs (fsyncs), so the model never idles
                    # on I/O. The model and the index each run one call at a time.
                    self._worker_config(batch_size=32, concurrency=2),
                    on_dead=mark_episode_failed if is_episodes else None,
                    on_retry=note_episode_retry if is_episodes else None,
                )
            )

    def _add_llm_workers(self) -> None:
        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.SUMMARIZE_SESSION,
                SessionSummarizer(self.summaries).handle,
                self._worker_config(batch_size=1, concurrency=1),
                ready=self.llm_ready,
                stage=llm_usage.SUMMARY,
                gate=self.budgets.hold,
            )
        )
        self.extraction_worker = JobWorker(
            self.db,
            self.signals,
            job_store.EXTRACT_EPISODE,
            ExtractionHandler(self.extraction),
            self._worker_config(batch_size=1, concurrency=max(1, self.settings.llm_concurrency)),
            on_dead=mark_failed,
            on_retry=note_retry,
            ready=self.llm_ready,
            # Wakes the entity indexer and the extraction watchers.
            after_commit=self.extraction.committed,
            stage=llm_usage.EXTRACTION,
            gate=self.budgets.hold,
        )
        self.workers.append(self.extraction_worker)
        self.formation_worker = JobWorker(
            self.db,
            self.signals,
            job_store.FORM_MEMORIES,
            MemoryFormer(self.formation),
            self._worker_config(batch_size=1, concurrency=1),
            on_dead=memory_former.mark_failed,
            on_retry=memory_former.note_retry,
            ready=self.llm_ready,
            after_commit=self.formation.committed,
            stage=llm_usage.FORMATION,
            gate=self.budgets.hold,
        )
        self.workers.append(self.formation_worker)
        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.RESOLVE_ENTITY,
                PendingEntityResolver(self.entity_resolution),
                self._worker_config(batch_size=1, concurrency=1),
                ready=self.llm_ready,
                after_commit=lambda: self.signals.wake(job_store.INDEX_ENTITY),
                stage=llm_usage.RESOLUTION,
                gate=self.budgets.hold,
            )
        )

    def _add_upkeep_workers(self) -> None:
        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.PURGE_MEMORY_HISTORY,
                purge_history,
                self._worker_config(batch_size=64, concurrency=1),
            )
        )
        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.EXPIRE_MEMORY,
                MemoryExpiry(self.memories.history_retention).handle,
                self._worker_config(batch_size=64, concurrency=1),
                # The removed rows' index jobs are committed: let the indexer drop the points.
                after_commit=lambda: self.signals.wake(job_store.INDEX_MEMORY),
            )
        )
        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.RETAIN_PROJECT,
                sweep_retention,
                self._worker_config(batch_size=1, concurrency=1),
                # The deleted rows' index jobs are committed: let the indexers drop the points.
                after_commit=lambda: self.signals.wake(
                    job_store.INDEX_EPISODE,
                    job_store.INDEX_SUMMARY,
                    job_store.INDEX_ENTITY,
                    job_store.INDEX_MEMORY,
                ),
            )
        )

    def _add_erasure_workers(self) -> None:
        def erased() -> None:
            signals_after_erasure(self.signals)
            self.erasures.committed()

        self.workers.append(
            JobWorker(
                self.db,
                self.signals,
                job_store.ERASE,
                Eraser(self.db, self.scrubber),
                # An erasure must not give up: a step that failed runs again
                # (the store was away), backing off to once every five minutes.
                self._worker_config(batch_size=1, concurrency=1, max_attempts=1_000_000),
                after_commit=erased,
            )
        )

    async def _warm(self, warm: Callable[[], Awaitable[Any]]) -> None:
        try:
            await warm()
        except Exception as exc:
            log.debug("embedder warm-up failed", exc_info=True)
            self.fail(
                StartupError(f"cannot load the embedding model {self.embedder.model_id}: {exc}")
            )

    def fail(self, error: StartupError) -> None:
        """A failure found after serving began that the process cannot serve past."""
        if self.failure is None:
            self.failure = error
        self.failed.set()

    def _in_background(self, work: Awaitable[Any], what: str) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("%s failed", what)

        task = asyncio.create_task(run(), name=what)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _read_contexts(self, llm: LLMClient) -> None:
        settings = self.settings
        for model in dict.fromkeys(
            (settings.extraction_model, settings.summary_model, settings.selection_model)
        ):
            try:
                tokens = await llm.context_length(model, timeout=HEALTH_TIMEOUT)
            except LLMError as exc:
                log.warning("cannot read %s's context length yet: %s", model, exc)
            else:
                log.info("%s: a context of %d tokens", model, tokens)

    async def _reconcile_at_start(self) -> None:
        try:
            result = await self.reconciler.reconcile()
            log.info(
                "start-up reconcile: %d requeued, %d orphans",
                result.requeued,
                result.removed_orphans,
            )
        except Exception:
            log.exception("start-up reconcile failed; run ReconcileIndex once the index is back")

    async def close(self) -> None:
        """Close everything; safe after a start that failed part way."""
        await self.loop_lag.stop()
        for task in list(self._background):
            task.cancel()
        for worker in self.workers:
            await worker.stop()
        if self.keyword_upkeep is not None:
            await self.keyword_upkeep.stop()
        await self.storage_upkeep.stop()
        await self.db.close()
        for name, closer in (
            ("vector index", self.index.close),
            ("inline embedding lane", self.inline_vectors.close if self.inline_vectors else None),
            ("embedder", self.embedder.close),
            ("LLM client", self.llm.close if self.llm is not None else None),
            ("reranker", self.reranker.close if self.reranker is not None else None),
        ):
            if closer is None:
                continue
            try:
                await closer()
            except Exception:
                log.exception("closing the %s failed", name)

    async def status(self) -> ServiceState:
        """Each dependency checked now, not assumed: SQLite answers a query, the
        embedder embeds, the vector index answers, the LLM server lists every
        configured model, and the rerank service (when configured) reranks."""
        store = await self.check_store()
        try:
            queues = await self.db.read(lambda uow: uow.jobs.depths())
        except Exception:
            # The database is away: its dependency line says why, and
            # health must answer that rather than fail with it.
            queues = []
        deps = [
            store,
            await self._check_index(),
            await self._check_embedder(),
            await self._check_llm(queues),
            await self._check_reranker(),
        ]
        # A dependency's line may quote a library's error, which may quote a URL.
        deps = [dataclasses.replace(d, detail=scrub(d.detail)) for d in deps]
        degraded = any(not d.ok for d in deps)
        try:
            budgets = await self.budgets.report(tenancy.own(self.settings.default_tenant))
        except Exception:
            budgets = []  # the database is away: its dependency line says so
        return ServiceState(
            "DEGRADED" if degraded else "SERVING",
            self.db.schema_version,
            self.embedder.model_id,
            self.embedder.dimension,
            deps,
            queues,
            self.loop_lag.snapshot(),
            budgets,
        )
