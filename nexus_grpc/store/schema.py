"""The schema, declared once: every table, column, key and index both stores hold.

Each backend renders this declaration into its own DDL (store/sqlite/ddl.py,
store/postgres/ddl.py): a new database is created from it, and the schema
changes that upgrade an existing one (store/schema_changes.py) name their
columns, tables and indexes here. What only one database can spell (SQLite's
FTS5 tables and their triggers, PostgreSQL's ``tsvector`` columns and its
vector-point triggers) is that backend's own, beside its renderer.

Types are the store's, not a database's: ``KEY`` is an id or a reference to
one (INTEGER / BIGINT), ``INT`` a small number or an enum (INTEGER), ``REAL``
a float or a time in seconds since the epoch (REAL / DOUBLE PRECISION),
``TEXT`` text or JSON. A column is NOT NULL unless it says ``null=True``.
tests/integration/store/test_schema.py checks that a database created from this
declaration and one upgraded through every schema change hold the same
tables, columns, keys and indexes, on both stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Type(Enum):
    KEY = "key"
    INT = "int"
    REAL = "real"
    TEXT = "text"


KEY, INT, REAL, TEXT = Type.KEY, Type.INT, Type.REAL, Type.TEXT


class Identity(Enum):
    """How a table's ``id`` is handed out."""

    #: Never handed out again once deleted: ids that clients hold can never
    #: reach a later row (SQLite's AUTOINCREMENT; a PostgreSQL identity).
    NEVER_REUSED = "never_reused"
    #: Rows that nobody outside the store names (jobs, the usage log): SQLite
    #: may hand a deleted tail id out again, which saves its sequence table.
    REUSABLE = "reusable"


@dataclass(frozen=True)
class Column:
    name: str
    type: Type
    null: bool = False
    #: A Python str, int or float; None: no default.
    default: str | int | float | None = None
    #: "table" or "table(column)": a foreign key (to ``id`` unless named).
    references: str | None = None
    #: The foreign key's ON DELETE action (CASCADE, SET NULL); None: refuse.
    on_delete: str | None = None
    #: Text compared without regard to case, in its unique keys and indexes
    #: (SQLite: COLLATE NOCASE; PostgreSQL: lower() in the index).
    nocase: bool = False
    #: Only this backend keeps the column ("postgres": the job lease, which
    #: only several instances sharing one database need).
    only: str | None = None

    @property
    def target(self) -> tuple[str, str]:
        """The referenced (table, column)."""
        assert self.references is not None
        table, _, column = self.references.partition("(")
        return table, column.rstrip(")") or "id"


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool = False
    #: A partial index's condition, in SQL both databases read alike.
    where: str | None = None


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    #: The primary key's columns; ("id",) with an ``identity`` is a handed-out id.
    primary_key: tuple[str, ...] = ("id",)
    identity: Identity | None = Identity.NEVER_REUSED
    #: Unique keys kept by the table itself (name, columns).
    unique: tuple[tuple[str, tuple[str, ...]], ...] = ()
    indexes: tuple[Index, ...] = field(default_factory=tuple)
    #: SQLite stores the rows in the primary key's b-tree (no rowid): link
    #: tables that are only ever read by their key.
    without_rowid: bool = False

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.name} has no column {name}")

    def index(self, name: str) -> Index:
        for index in self.indexes:
            if index.name == name:
                return index
        raise KeyError(f"{self.name} has no index {name}")


def _id() -> Column:
    return Column("id", KEY)


def _tenant() -> Column:
    # The code always names the tenant; '' (no tenant's) is only what a row
    # inserted by hand gets, and only admin keys see it.
    return Column("tenant", TEXT, default="")


TABLES: tuple[Table, ...] = (
    Table(
        "projects",
        (
            _id(),
            Column("name", TEXT),
            Column("description", TEXT, default=""),
            Column("colour", TEXT, default=""),
            Column("icon", TEXT, default=""),
            Column("isolated", INT, default=1),
            Column("notes", TEXT, default=""),
            Column("system_prompt", TEXT, default=""),
            Column("created_at", REAL),
            Column("updated_at", REAL),
            _tenant(),
            # Seconds its sessions and episodes are kept (by occur_at); NULL: for ever.
            Column("retention", REAL, null=True),
            # The labels that hold one value at a time (JSON); NULL: the defaults.
            Column("single_valued_labels", TEXT, null=True),
            # 1 off, 2 USER memories, 3 USER and PROJECT; NULL: the default (USER).
            Column("memory_formation", INT, null=True),
            # The erasure deleting it (DeleteProject): from then on no read
            # sees the project or its sessions; NULL: live.
            Column("deleting", KEY, null=True),
        ),
        indexes=(
            Index("idx_projects_tenant", ("tenant",)),
            # A name finds one project of its tenant (client/name_lookup.py):
            # CreateProject and a rename answer ALREADY_EXISTS rather than
            # make a second one (store/projects.py).
            Index("idx_projects_tenant_name", ("tenant", "name"), unique=True),
        ),
    ),
    Table(
        "sessions",
        (
            _id(),
            _tenant(),
            # Unique per tenant: one tenant's external id neither collides
            # with nor reveals another's.
            Column("external_id", TEXT),
            Column("name", TEXT, default=""),
            Column("project_id", KEY, null=True, references="projects"),
            Column("metadata", TEXT, default="{}"),
            Column("created_at", REAL),
            # Who the conversation is with; both immutable, '' when not given.
            Column("user_id", TEXT, default=""),
            Column("agent_id", TEXT, default=""),
            # How many episodes it holds, kept by triggers (SQLite's keyword
            # search counts a scope by its sessions: store/keyword_scoring.py).
            Column("episode_count", INT, default=0, only="sqlite"),
        ),
        unique=(("sessions_tenant_external_id", ("tenant", "external_id")),),
        indexes=(
            Index("idx_sessions_project", ("project_id",)),
            Index("idx_sessions_tenant", ("tenant",)),
        ),
    ),
    Table(
        "episodes",
        (
            _id(),
            Column("session_id", KEY, references="sessions", on_delete="CASCADE"),
            Column("user_message", TEXT),
            Column("ai_response", TEXT),
            Column("metadata", TEXT, default="{}"),
            Column("request_id", TEXT, null=True),
            # When it was stored; occur_at is when the exchange happened
            # (an import sets it from the original conversation).
            Column("created_at", REAL),
            # embed_state / extract_state / memory_state: 1 pending, 2 done,
            # 3 failed (JobState); memory_state NULL: formation does not apply.
            Column("embed_state", INT, default=1),
            Column("embed_error", TEXT, default=""),
            Column("extract_state", INT, default=1),
            Column("extract_error", TEXT, default=""),
            # The turn before and the turn after, in its session, which the
            # keyword index reads at half weight (docs/recall.md).
            Column("context", TEXT, default=""),
            Column("occur_at", REAL, default=0),
            Column("memory_state", INT, null=True),
            Column("memory_error", TEXT, default=""),
            # The user its writer acted for (docs/security.md, "Sessions that
            # belong to a user"): formation forms USER memories only for them.
            Column("acts_for", TEXT, default=""),
        ),
        indexes=(
            Index("idx_episodes_session", ("session_id", "id")),
            Index(
                "idx_episodes_request",
                ("session_id", "request_id"),
                unique=True,
                where="request_id IS NOT NULL",
            ),
            Index("idx_episodes_session_occur", ("session_id", "occur_at")),
            Index(
                "idx_episodes_memory_pending", ("session_id", "occur_at"), where="memory_state = 1"
            ),
        ),
    ),
    # Each project has its own graph, and each session outside a project its
    # own (project_id 0, session_id the session): no read or walk crosses graphs.
    Table(
        "entities",
        (
            _id(),
            Column("project_id", KEY, default=0),
            Column("session_id", KEY, default=0),
            # The best display name; name_key the key its names share
            # (core/names.name_key), '<key>#<id>' for a name an older graph
            # held twice under one key.
            Column("name", TEXT),
            Column("name_key", TEXT),
            Column("type", TEXT),
            Column("notes", TEXT, null=True),
            Column("mention_count", INT, default=1),
            Column("confidence", REAL, default=1.0),
            Column("source", TEXT, default="extraction"),
            Column("last_seen_at", REAL, null=True),
            Column("created_at", REAL),
            _tenant(),
            # 'pending': kept apart until the LLM says whether it is another entity.
            Column("resolution", TEXT, default="resolved"),
        ),
        unique=(("idx_entities_identity", ("project_id", "session_id", "name_key", "type")),),
        indexes=(
            Index("idx_entities_type", ("type",)),
            # ListEntities by graph (keyset on id: the rowid ends every index).
            Index("idx_entities_scope", ("project_id", "session_id")),
            # The extraction prompt's last known entities of a graph.
            Index("idx_entities_scope_seen", ("project_id", "session_id", "last_seen_at")),
            Index("idx_entities_tenant", ("tenant",)),
        ),
    ),
    # A relationship is an interval of time derived from what episodes said
    # (relationship_evidence): [valid_at, invalid_at), invalid_at NULL while
    # current. An edge never joins two graphs (each backend's trigger).
    Table(
        "relationships",
        (
            _id(),
            Column("from_id", KEY, references="entities", on_delete="CASCADE"),
            Column("to_id", KEY, references="entities", on_delete="CASCADE"),
            Column("label", TEXT),
            Column("notes", TEXT, null=True),
            Column("mention_count", INT, default=1),
            Column("created_at", REAL),
            Column("valid_at", REAL),
            Column("invalid_at", REAL, null=True),
            Column("asserted_by", KEY, null=True, references="episodes", on_delete="SET NULL"),
            Column("ended_by", KEY, null=True, references="episodes", on_delete="SET NULL"),
        ),
        indexes=(
            Index("idx_relationships_from", ("from_id", "label", "valid_at")),
            # The walk follows edges backwards; from_id answers each step
            # from the index alone.
            Index("idx_relationships_to", ("to_id", "from_id")),
            # An episode's deletion sets these NULL (and an erasure reads by
            # them): without an index each deleted episode scanned the table.
            Index("idx_relationships_asserted", ("asserted_by",), where="asserted_by IS NOT NULL"),
            Index("idx_relationships_ended", ("ended_by",), where="ended_by IS NOT NULL"),
        ),
    ),
    Table(
        "entity_episodes",
        (
            Column("entity_id", KEY, references="entities", on_delete="CASCADE"),
            Column("episode_id", KEY, references="episodes", on_delete="CASCADE"),
        ),
        primary_key=("entity_id", "episode_id"),
        identity=None,
        without_rowid=True,
        indexes=(Index("idx_entity_episodes_episode", ("episode_id",)),),
    ),
    # A row with session_id NULL and a project_id is a project overview.
    Table(
        "summaries",
        (
            _id(),
            Column("session_id", KEY, null=True, references="sessions", on_delete="CASCADE"),
            Column("project_id", KEY, null=True, references="projects", on_delete="CASCADE"),
            Column("content", TEXT),
            Column("first_episode_id", KEY, default=0),
            Column("last_episode_id", KEY, default=0),
            Column("episode_count", INT, default=0),
            Column("created_at", REAL),
            Column("updated_at", REAL),
        ),
        indexes=(
            Index("idx_summaries_session", ("session_id", "id")),
            Index("idx_summaries_project", ("project_id", "id")),
        ),
    ),
    # The outbox: background work written in the same transaction as its
    # data. state: pending | running (claimed by a worker) | failed (dead
    # letter). Finished jobs are deleted.
    Table(
        "jobs",
        (
            _id(),
            Column("kind", TEXT),
            Column("target_id", KEY),
            Column("state", TEXT, default="pending"),
            Column("attempts", INT, default=0),
            Column("run_after", REAL),
            Column("last_error", TEXT, default=""),
            Column("created_at", REAL),
            Column("updated_at", REAL),
            # A running job's lease, until lease_until on the database's
            # clock, which every instance shares; leased_by (host:pid) is
            # for operators. One SQLite file has one server: no lease.
            Column("lease_until", REAL, null=True, only="postgres"),
            Column("leased_by", TEXT, default="", only="postgres"),
            # A bulk import's jobs (1) are claimed after every due live one (0).
            Column("priority", INT, default=0),
            # The tenant of the job's target, read from the target's row when
            # it is queued (store/jobs.TENANT_OF; '' once the target is gone):
            # tenants take turns at the claim (docs/architecture.md).
            Column("tenant", TEXT, default=""),
        ),
        identity=Identity.REUSABLE,
        indexes=(
            Index("idx_jobs_ready", ("kind", "state", "run_after")),
            # One pending job per target: a second request for the same work coalesces.
            Index(
                "idx_jobs_pending_target",
                ("kind", "target_id"),
                unique=True,
                where="state = 'pending'",
            ),
            # A claim skips targets that already have a running job.
            Index("idx_jobs_running_target", ("kind", "target_id"), where="state = 'running'"),
            # A claim's lanes (a priority's tenants) and each one's due jobs
            # in order, found by skip scans (store/jobs.claim).
            Index(
                "idx_jobs_lanes",
                ("kind", "priority", "tenant", "run_after", "id"),
                where="state = 'pending'",
            ),
        ),
    ),
    # Extraction and formation outcomes, with a monotonic id clients resume from.
    Table(
        "extraction_events",
        (
            _id(),
            Column("episode_id", KEY),
            Column("session_id", KEY),
            Column("project_id", KEY, default=0),
            Column("status", INT),
            Column("error", TEXT, default=""),
            Column("payload", TEXT, default="{}"),
            Column("created_at", REAL),
            _tenant(),
        ),
        indexes=(
            Index("idx_extraction_events_episode", ("episode_id", "id")),
            Index("idx_extraction_events_session", ("session_id", "id")),
            Index("idx_extraction_events_project", ("project_id", "id")),
            Index("idx_extraction_events_tenant", ("tenant", "id")),
        ),
    ),
    Table(
        "meta",
        (Column("key", TEXT), Column("value", TEXT)),
        primary_key=("key",),
        identity=None,
    ),
    Table(
        "memories",
        (
            _id(),
            Column("kind", INT),
            Column("title", TEXT),
            Column("content", TEXT),
            Column("tier", INT),
            Column("project_id", KEY, default=0),
            Column("agent_id", TEXT, default=""),
            Column("user_id", TEXT, default=""),
            Column("session_id", KEY, default=0),
            Column("confidence", REAL, default=1.0),
            Column("metadata", TEXT, default="{}"),
            Column("request_id", TEXT, null=True),
            Column("created_at", REAL),
            Column("updated_at", REAL),
            Column("last_used_at", REAL, null=True),
            Column("use_count", INT, default=0),
            _tenant(),
            # NULL: never; reads hide it from then, an expire:memory job removes it.
            Column("expire_at", REAL, null=True),
            # 'client' (CreateMemory) or 'formation', with the episode it formed from.
            Column("source", TEXT, default="client"),
            Column(
                "source_episode_id", KEY, null=True, references="episodes", on_delete="SET NULL"
            ),
        ),
        indexes=(
            Index("idx_memories_project", ("project_id", "agent_id", "kind")),
            Index("idx_memories_user", ("user_id", "kind")),
            # A project's PROJECT memories, newest first, without its users' ones.
            Index("idx_memories_kind_project", ("kind", "project_id")),
            Index("idx_memories_tenant_user", ("tenant", "user_id", "kind")),
            # A retry key belongs to its owner (tenant and user; '' for
            # PROJECT memories): another user's id is neither refused nor revealed.
            Index(
                "idx_memories_request",
                ("tenant", "user_id", "request_id"),
                unique=True,
                where="request_id IS NOT NULL",
            ),
            # What an episode formed goes when it is forgotten, and its
            # deletion sets the link NULL: both find the rows by the episode.
            Index(
                "idx_memories_source_episode",
                ("source_episode_id",),
                where="source_episode_id IS NOT NULL",
            ),
            # A deleted session's TASK-tier memories go with it.
            Index("idx_memories_task_session", ("session_id",), where="tier = 1"),
        ),
    ),
    Table(
        "memory_usage",
        (
            _id(),
            Column("memory_id", KEY, references="memories", on_delete="CASCADE"),
            Column("thread_id", TEXT),
            # The scope that made the selection: a thread, its prompts
            # (context) and its used-memory list belong to that user in that project.
            Column("user_id", TEXT, default=""),
            Column("project_id", KEY, default=0),
            Column("context", TEXT),
            Column("relevance", REAL),
            Column("category", INT),
            Column("used_at", REAL),
            _tenant(),
        ),
        identity=Identity.REUSABLE,
        indexes=(
            Index("idx_memory_usage_thread", ("thread_id", "user_id", "project_id", "memory_id")),
            Index("idx_memory_usage_memory", ("memory_id", "id")),
            # ListMemoryUsage pages one user's whole usage in a project by id.
            Index("idx_memory_usage_owner", ("user_id", "project_id", "id")),
        ),
    ),
    # Each update and delete keeps the version it replaced. memory_id is no
    # foreign key: a deleted memory's history stays readable by its owner
    # until purge_after, when a durable purge job removes it.
    Table(
        "memory_history",
        (
            _id(),
            Column("memory_id", KEY),
            Column("action", INT),
            Column("changed", TEXT, default="[]"),
            Column("previous", TEXT),
            Column("kind", INT),
            Column("user_id", TEXT, default=""),
            Column("tier", INT),
            Column("session_id", KEY, default=0),
            Column("request_id", TEXT, default=""),
            Column("principal", TEXT, default=""),
            Column("changed_at", REAL),
            Column("purge_after", REAL, null=True),
            Column("episode_id", KEY, null=True),
            Column("reason", TEXT, default=""),
        ),
        indexes=(
            Index("idx_memory_history_memory", ("memory_id", "id")),
            # The changes an episode made, which go when it is forgotten.
            Index("idx_memory_history_episode", ("episode_id",), where="episode_id IS NOT NULL"),
        ),
    ),
    # Every surface name an entity was seen under (a title and possessive
    # dropped), one row per name regardless of case, with how it was
    # resolved: new, exact, containment, shingle, llm, merge or manual
    # (score is the rule's measure).
    Table(
        "entity_aliases",
        (
            _id(),
            Column("entity_id", KEY, references="entities", on_delete="CASCADE"),
            Column("project_id", KEY),
            Column("session_id", KEY),
            Column("name", TEXT, nocase=True),
            Column("norm", TEXT),
            Column("method", TEXT),
            Column("score", REAL, default=1.0),
            Column("episode_id", KEY, null=True, references="episodes", on_delete="SET NULL"),
            Column("created_at", REAL),
        ),
        unique=(("idx_entity_aliases_name", ("entity_id", "name")),),
        indexes=(
            Index("idx_entity_aliases_entity_norm", ("entity_id", "norm")),
            Index("idx_entity_aliases_norm", ("project_id", "session_id", "norm")),
            # An episode's deletion sets its aliases' episode_id to NULL.
            Index("idx_entity_aliases_episode", ("episode_id",)),
        ),
    ),
    # Each alias's words, for name containment and near-duplicate blocking.
    Table(
        "entity_tokens",
        (
            Column("project_id", KEY),
            Column("session_id", KEY),
            Column("type", TEXT),
            Column("token", TEXT),
            Column("entity_id", KEY, references="entities", on_delete="CASCADE"),
        ),
        primary_key=("project_id", "session_id", "type", "token", "entity_id"),
        identity=None,
        without_rowid=True,
        indexes=(
            Index("idx_entity_tokens_entity", ("entity_id",)),
            # A name's words of any type (containment, acronyms, another's name inside).
            Index("idx_entity_tokens_token", ("project_id", "session_id", "token")),
        ),
    ),
    # Two entities the LLM said are different things: not asked again.
    Table(
        "entity_distinctions",
        (
            Column("a_id", KEY, references="entities", on_delete="CASCADE"),
            Column("b_id", KEY, references="entities", on_delete="CASCADE"),
            Column("episode_id", KEY, null=True, references="episodes", on_delete="SET NULL"),
            Column("created_at", REAL),
        ),
        primary_key=("a_id", "b_id"),
        identity=None,
        without_rowid=True,
        indexes=(
            Index("idx_entity_distinctions_b", ("b_id",)),
            Index(
                "idx_entity_distinctions_episode", ("episode_id",), where="episode_id IS NOT NULL"
            ),
        ),
    ),
    # Each merge, with what undoing it needs.
    Table(
        "entity_merges",
        (
            _id(),
            Column("project_id", KEY),
            Column("session_id", KEY),
            Column("tenant", TEXT),
            Column("target_id", KEY),
            Column("source_ids", TEXT),
            Column("method", TEXT),
            Column("reason", TEXT, default=""),
            Column("request_id", TEXT, null=True),
            Column("principal", TEXT, default=""),
            # What undoing needs (JSON): the sources as they were and which
            # aliases, episode links and evidence moved from each.
            Column("snapshot", TEXT),
            Column("created_at", REAL),
            Column("undone_at", REAL, null=True),
        ),
        indexes=(
            Index("idx_entity_merges_graph", ("project_id", "session_id", "id")),
            Index("idx_entity_merges_target", ("target_id",)),
            Index(
                "idx_entity_merges_request",
                ("tenant", "request_id"),
                unique=True,
                where="request_id IS NOT NULL",
            ),
        ),
    ),
    # What episodes said of an edge: an assertion or an end, at the episode's occur_at.
    Table(
        "relationship_evidence",
        (
            _id(),
            Column("from_id", KEY, references="entities", on_delete="CASCADE"),
            Column("to_id", KEY, references="entities", on_delete="CASCADE"),
            Column("label", TEXT),
            Column("kind", TEXT),
            Column("at", REAL),
            Column("episode_id", KEY, null=True, references="episodes", on_delete="SET NULL"),
            Column("mentions", INT, default=1),
            Column("notes", TEXT, null=True),
            Column("created_at", REAL),
        ),
        indexes=(
            Index("idx_evidence_subject", ("from_id", "label")),
            Index("idx_evidence_object", ("to_id",)),
            Index("idx_evidence_episode", ("episode_id",)),
        ),
    ),
    # What an episode's extraction answer proposed, kept for the formation
    # job (and its re-runs).
    Table(
        "memory_candidates",
        (
            Column("episode_id", KEY, references="episodes", on_delete="CASCADE"),
            Column("candidates", TEXT),
            Column("created_at", REAL),
        ),
        primary_key=("episode_id",),
        identity=None,
    ),
    # SelectMemories is safe to retry: a call with a request_id keeps its
    # answer (the picks as JSON, with how they were made) for a day, written
    # in the transaction that records its usage.
    Table(
        "memory_selections",
        (
            _id(),
            Column("tenant", TEXT),
            Column("user_id", TEXT),
            Column("project_id", KEY),
            Column("request_id", TEXT),
            Column("request_sha256", TEXT),
            Column("answer", TEXT),
            Column("created_at", REAL),
        ),
        unique=(("memory_selections_request", ("tenant", "user_id", "project_id", "request_id")),),
        indexes=(Index("idx_memory_selections_created", ("created_at",)),),
    ),
    # Erasures (domain/erasure.py, docs/privacy.md): a user forgotten or a
    # project deleted, as durable work in steps, each a transaction that
    # moves ``phase`` and adds to ``counts`` (JSON, by kind). A receipt
    # holds counts, never content: the user id is kept only while the
    # erasure runs (its job needs it across restarts); a finished receipt
    # keeps ``user_digest`` (a keyed digest, store/erasure.py) so that a
    # request naming the user still finds it and a restore of an older
    # export can leave the user out.
    Table(
        "erasures",
        (
            _id(),
            _tenant(),
            Column("kind", INT),
            Column("user_id", TEXT, default=""),
            Column("user_digest", TEXT, default=""),
            Column("project_id", KEY, default=0),
            Column("state", INT),
            Column("phase", TEXT),
            Column("counts", TEXT, default="{}"),
            Column("planned", TEXT, default="{}"),
            # What a phase carries to the next run (JSON): the projects whose
            # overviews drew on erased episodes, the sessions to summarise again.
            Column("carry", TEXT, default="{}"),
            Column("principal", TEXT, default=""),
            Column("started_at", REAL),
            Column("finished_at", REAL, null=True),
        ),
        indexes=(
            Index("idx_erasures_tenant", ("tenant", "id")),
            Index("idx_erasures_user", ("tenant", "user_digest", "state")),
        ),
    ),
    # The request ids of erased writes (a keyed digest of tenant, scope and
    # id): a retry of one is refused rather than written again.
    Table(
        "erased_requests",
        (
            Column("digest", TEXT),
            Column("erasure_id", KEY),
            Column("created_at", REAL),
        ),
        primary_key=("digest",),
        identity=None,
        without_rowid=True,
    ),
    # The LLM's account (store/usage.py, docs/usage.md): a row per request to
    # the model server, by stage, project and tenant, written with the result it
    # made. No foreign keys: what a deleted project spent stays in its tenant's
    # totals. A budget sums one tenant's tokens since midnight on every claim of
    # an LLM job, so the tenant index carries the token columns and the sum never
    # reads the table; GetUsage for a project reads by project; the budgets
    # GetServiceStatus lists for an admin are every tenant's spend today, read
    # from the day index without a walk of earlier days.
    Table(
        "llm_calls",
        (
            _id(),
            Column("at", REAL),
            Column("tenant", TEXT),
            Column("project_id", KEY, default=0),
            Column("stage", TEXT),
            Column("outcome", TEXT),
            Column("prompt_tokens", INT),
            Column("completion_tokens", INT),
            Column("seconds", REAL),
            # 1: the server gave no counts, the tokens are an estimate.
            Column("estimated", INT, default=0),
            # The user the work was done for ('' for none: a project overview,
            # a name's question): a key that may act only for some users reads
            # only their work's rows, and a user's daily share is summed here.
            Column("user_id", TEXT, default=""),
        ),
        identity=Identity.REUSABLE,
        indexes=(
            Index("idx_llm_calls_tenant", ("tenant", "at", "prompt_tokens", "completion_tokens")),
            Index("idx_llm_calls_project", ("project_id", "at")),
            Index("idx_llm_calls_day", ("at", "tenant", "prompt_tokens", "completion_tokens")),
            # A user's spend since midnight (their daily share, checked on every
            # claim of their LLM job), from the index alone; and a user's rows.
            Index(
                "idx_llm_calls_user",
                ("tenant", "user_id", "at", "prompt_tokens", "completion_tokens"),
            ),
        ),
    ),
)

_BY_NAME = {table.name: table for table in TABLES}


def table(name: str) -> Table:
    return _BY_NAME[name]


def columns_of(name: str, backend: str) -> tuple[Column, ...]:
    """The table's columns that ``backend`` keeps."""
    return tuple(c for c in _BY_NAME[name].columns if c.only in (None, backend))


# Indexes that an earlier change created and a later one dropped
# (store/schema_changes.py): a store upgraded from before the drop replays
# the change that made them, so their shape stays known here. No fresh store
# has them.
RETIRED_INDEXES: tuple[tuple[str, Index], ...] = (
    # Claims walk idx_jobs_lanes since tenants take turns (JOB_TENANTS).
    ("jobs", Index("idx_jobs_claim", ("kind", "run_after", "id"), where="state = 'pending'")),
    (
        "jobs",
        Index(
            "idx_jobs_priority", ("kind", "priority", "run_after", "id"), where="state = 'pending'"
        ),
    ),
)


def index(name: str) -> tuple[Table, Index]:
    """The table an index belongs to, and the index (a retired one too)."""
    for t in TABLES:
        for i in t.indexes:
            if i.name == name:
                return t, i
    for table_name, i in RETIRED_INDEXES:
        if i.name == name:
            return table(table_name), i
    raise KeyError(f"no index {name}")
