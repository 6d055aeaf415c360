"""SQLite's schema versions, tracked with ``PRAGMA user_version``.

An empty database is created from the declared schema (store/schema.py,
rendered by store/sqlite/ddl.py) at the latest version, in one transaction.
A database that an earlier build created is upgraded through the versions it
lacks: SQLite's own history (versions 1 to 11 and 14, written before the
schema was declared), then the changes declared once for both stores
(store/schema_changes.py). Each version runs once, inside its own
transaction, and bumps the version in that same transaction: a crash
mid-migration leaves the previous version intact. Nothing swallows errors,
and the FTS index is built by triggers, never rebuilt at start-up. New
versions are appended to store/schema_changes.py; history is never edited.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from nexus_grpc.core.names import name_key
from nexus_grpc.core.storage import Connection
from nexus_grpc.core.tenancy import DEFAULT_TENANT
from nexus_grpc.store import schema_changes
from nexus_grpc.store.schema_changes import AddColumn, Change, Rewrite
from nexus_grpc.store.sqlite import ddl

log = logging.getLogger(__name__)

# A migration that starts with this marker rebuilds a table that others
# reference: it runs with foreign keys off (DROP TABLE would otherwise cascade
# into the referencing rows), and PRAGMA foreign_key_check must find nothing
# before it commits.
REBUILD = "-- rebuild\n"

MIGRATIONS: list[str | Change] = [
    # 1: the first tables, the jobs outbox, the extraction event log and FTS5.
    # Ids that clients hold are AUTOINCREMENT: a deleted project, session,
    # episode or memory's id is never handed to a new row, so a stale id can
    # never reach another's data.
    """
    CREATE TABLE projects (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        name          TEXT NOT NULL,
        description   TEXT NOT NULL DEFAULT '',
        colour        TEXT NOT NULL DEFAULT '',
        icon          TEXT NOT NULL DEFAULT '',
        isolated      INTEGER NOT NULL DEFAULT 1,
        notes         TEXT NOT NULL DEFAULT '',
        system_prompt TEXT NOT NULL DEFAULT '',
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL
    );

    CREATE TABLE sessions (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        external_id TEXT NOT NULL UNIQUE,
        name        TEXT NOT NULL DEFAULT '',
        project_id  INTEGER REFERENCES projects(id),
        metadata    TEXT NOT NULL DEFAULT '{}',
        created_at  REAL NOT NULL
    );
    CREATE INDEX idx_sessions_project ON sessions(project_id);

    -- embed_state / extract_state: 1 pending, 2 done, 3 failed (JobState).
    CREATE TABLE episodes (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id    INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        user_message  TEXT NOT NULL,
        ai_response   TEXT NOT NULL,
        metadata      TEXT NOT NULL DEFAULT '{}',
        request_id    TEXT,
        created_at    REAL NOT NULL,
        embed_state   INTEGER NOT NULL DEFAULT 1,
        embed_error   TEXT NOT NULL DEFAULT '',
        extract_state INTEGER NOT NULL DEFAULT 1,
        extract_error TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX idx_episodes_session ON episodes(session_id, id);
    CREATE UNIQUE INDEX idx_episodes_request ON episodes(session_id, request_id)
        WHERE request_id IS NOT NULL;

    CREATE VIRTUAL TABLE episodes_fts USING fts5(
        user_message, ai_response,
        content='episodes', content_rowid='id',
        tokenize='porter unicode61'
    );
    CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
        INSERT INTO episodes_fts(rowid, user_message, ai_response)
        VALUES (new.id, new.user_message, new.ai_response);
    END;
    CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, user_message, ai_response)
        VALUES ('delete', old.id, old.user_message, old.ai_response);
    END;
    CREATE TRIGGER episodes_fts_update AFTER UPDATE OF user_message, ai_response ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, user_message, ai_response)
        VALUES ('delete', old.id, old.user_message, old.ai_response);
        INSERT INTO episodes_fts(rowid, user_message, ai_response)
        VALUES (new.id, new.user_message, new.ai_response);
    END;

    -- Each project has its own graph: entities are keyed by project
    -- (0 = episodes of sessions in no project), and relationships only join
    -- entities of one project, so no read or walk crosses projects.
    CREATE TABLE entities (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id    INTEGER NOT NULL DEFAULT 0,
        -- "Python" and "python" from two episodes are one entity; the first
        -- spelling is kept.
        name          TEXT NOT NULL COLLATE NOCASE,
        type          TEXT NOT NULL,
        notes         TEXT,
        mention_count INTEGER NOT NULL DEFAULT 1,
        confidence    REAL NOT NULL DEFAULT 1.0,
        source        TEXT NOT NULL DEFAULT 'extraction',
        last_seen_at  REAL,
        created_at    REAL NOT NULL,
        UNIQUE(project_id, name, type)
    );
    CREATE INDEX idx_entities_type ON entities(type);
    -- ListEntities by project (keyset on id: the rowid ends every index).
    CREATE INDEX idx_entities_project ON entities(project_id);
    -- The extraction prompt's last known entities of a project.
    CREATE INDEX idx_entities_project_seen ON entities(project_id, last_seen_at);

    CREATE TABLE relationships (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        from_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        to_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        label         TEXT NOT NULL,
        notes         TEXT,
        mention_count INTEGER NOT NULL DEFAULT 1,
        created_at    REAL NOT NULL,
        UNIQUE(from_id, to_id, label)
    );
    CREATE INDEX idx_relationships_to ON relationships(to_id);
    -- The store's guarantee behind the API's FAILED_PRECONDITION: an edge
    -- never joins two projects (an entity's project_id never changes).
    CREATE TRIGGER relationships_same_project BEFORE INSERT ON relationships
    WHEN (SELECT project_id FROM entities WHERE id = new.from_id)
        IS NOT (SELECT project_id FROM entities WHERE id = new.to_id)
    BEGIN
        SELECT RAISE(ABORT, 'relationship endpoints belong to different projects');
    END;

    CREATE TABLE entity_episodes (
        entity_id  INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
        PRIMARY KEY (entity_id, episode_id)
    ) WITHOUT ROWID;
    CREATE INDEX idx_entity_episodes_episode ON entity_episodes(episode_id);

    -- Which episodes mentioned a relationship: re-extracting an episode must
    -- not count its mentions twice.
    CREATE TABLE relationship_episodes (
        relationship_id INTEGER NOT NULL REFERENCES relationships(id) ON DELETE CASCADE,
        episode_id      INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
        PRIMARY KEY (relationship_id, episode_id)
    ) WITHOUT ROWID;
    CREATE INDEX idx_relationship_episodes_episode ON relationship_episodes(episode_id);

    -- A row with session_id NULL and a project_id is a project overview.
    CREATE TABLE summaries (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id       INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
        project_id       INTEGER REFERENCES projects(id) ON DELETE CASCADE,
        content          TEXT NOT NULL,
        first_episode_id INTEGER NOT NULL DEFAULT 0,
        last_episode_id  INTEGER NOT NULL DEFAULT 0,
        episode_count    INTEGER NOT NULL DEFAULT 0,
        created_at       REAL NOT NULL,
        updated_at       REAL NOT NULL
    );
    CREATE INDEX idx_summaries_session ON summaries(session_id, id);
    CREATE INDEX idx_summaries_project ON summaries(project_id, id);

    -- The outbox: background work written in the same transaction as its data.
    -- state: pending | running (claimed by a worker) | failed (dead letter).
    -- Finished jobs are deleted.
    CREATE TABLE jobs (
        id         INTEGER PRIMARY KEY,
        kind       TEXT NOT NULL,
        target_id  INTEGER NOT NULL,
        state      TEXT NOT NULL DEFAULT 'pending',
        attempts   INTEGER NOT NULL DEFAULT 0,
        run_after  REAL NOT NULL,
        last_error TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX idx_jobs_ready ON jobs(kind, state, run_after);
    -- Claims walk pending jobs oldest first without sorting the backlog.
    CREATE INDEX idx_jobs_claim ON jobs(kind, id) WHERE state = 'pending';
    -- One pending job per target: a second request for the same work coalesces.
    CREATE UNIQUE INDEX idx_jobs_pending_target ON jobs(kind, target_id) WHERE state = 'pending';

    -- Extraction outcomes, with a monotonic id clients resume from.
    CREATE TABLE extraction_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        episode_id INTEGER NOT NULL,
        session_id INTEGER NOT NULL,
        project_id INTEGER NOT NULL DEFAULT 0,
        status     INTEGER NOT NULL,
        error      TEXT NOT NULL DEFAULT '',
        payload    TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE INDEX idx_extraction_events_episode ON extraction_events(episode_id, id);
    CREATE INDEX idx_extraction_events_session ON extraction_events(session_id, id);
    CREATE INDEX idx_extraction_events_project ON extraction_events(project_id, id);

    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 2: curated PROJECT/USER memories with tiers, and their usage log.
    """
    CREATE TABLE memories (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        kind           INTEGER NOT NULL,
        title          TEXT NOT NULL,
        content        TEXT NOT NULL,
        tier           INTEGER NOT NULL,
        project_id     INTEGER NOT NULL DEFAULT 0,
        agent_id       TEXT NOT NULL DEFAULT '',
        user_id        TEXT NOT NULL DEFAULT '',
        session_id     INTEGER NOT NULL DEFAULT 0,
        confidence     REAL NOT NULL DEFAULT 1.0,
        metadata       TEXT NOT NULL DEFAULT '{}',
        request_id     TEXT,
        created_at     REAL NOT NULL,
        updated_at     REAL NOT NULL,
        last_used_at   REAL,
        use_count      INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX idx_memories_project ON memories(project_id, agent_id, kind);
    CREATE INDEX idx_memories_user ON memories(user_id, kind);
    CREATE UNIQUE INDEX idx_memories_request ON memories(request_id) WHERE request_id IS NOT NULL;

    CREATE VIRTUAL TABLE memories_fts USING fts5(
        title, content, content='memories', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
    END;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, content ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
        INSERT INTO memories_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
    END;

    CREATE TABLE memory_usage (
        id         INTEGER PRIMARY KEY,
        memory_id  INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        thread_id  TEXT NOT NULL,
        -- The scope that made the selection: a thread, its prompts (context)
        -- and its used-memory list belong to that user in that project.
        user_id    TEXT NOT NULL DEFAULT '',
        project_id INTEGER NOT NULL DEFAULT 0,
        context    TEXT NOT NULL,
        relevance  REAL NOT NULL,
        category   INTEGER NOT NULL,
        used_at    REAL NOT NULL
    );
    CREATE INDEX idx_memory_usage_thread ON memory_usage(thread_id, user_id, project_id, memory_id);
    CREATE INDEX idx_memory_usage_memory ON memory_usage(memory_id, id);
    """,
    # 3: the graph walk follows edges backwards through this index; carrying
    # from_id in it answers each step from the index alone, without a table
    # lookup per edge (GetNeighborhood depth 3 touches ~750 edges).
    """
    DROP INDEX idx_relationships_to;
    CREATE INDEX idx_relationships_to ON relationships(to_id, from_id);
    """,
    # 4: a session outside any project gets a graph of its own. Until now all
    # such sessions extracted into one shared pool (project 0), so one
    # session's entity names reached another's prompt and entity search. The
    # UNIQUE constraint changes, so the table is rebuilt (foreign keys off,
    # checked before commit). Existing pool entities mentioned by exactly one
    # session move to it; the rest stay in the unscoped pool (0, 0).
    REBUILD
    + """
    CREATE TABLE entities_new (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id    INTEGER NOT NULL DEFAULT 0,
        -- The session whose own graph this is: only for a session outside any
        -- project (project_id 0). 0 for every project entity.
        session_id    INTEGER NOT NULL DEFAULT 0,
        name          TEXT NOT NULL COLLATE NOCASE,
        type          TEXT NOT NULL,
        notes         TEXT,
        mention_count INTEGER NOT NULL DEFAULT 1,
        confidence    REAL NOT NULL DEFAULT 1.0,
        source        TEXT NOT NULL DEFAULT 'extraction',
        last_seen_at  REAL,
        created_at    REAL NOT NULL,
        UNIQUE(project_id, session_id, name, type)
    );
    INSERT INTO entities_new (id, project_id, session_id, name, type, notes, mention_count,
                              confidence, source, last_seen_at, created_at)
    SELECT e.id, e.project_id,
           CASE WHEN e.project_id != 0 THEN 0 ELSE COALESCE((
               SELECT MIN(ep.session_id) FROM entity_episodes ee
               JOIN episodes ep ON ep.id = ee.episode_id
               WHERE ee.entity_id = e.id
               HAVING COUNT(DISTINCT ep.session_id) = 1), 0) END,
           e.name, e.type, e.notes, e.mention_count, e.confidence, e.source, e.last_seen_at,
           e.created_at
    FROM entities e;
    -- Keep the id high-water mark: a deleted entity's id is never handed out again.
    UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE(
        (SELECT seq FROM sqlite_sequence WHERE name = 'entities'), 0))
    WHERE name = 'entities_new';
    DROP TRIGGER relationships_same_project;
    DROP TABLE entities;
    ALTER TABLE entities_new RENAME TO entities;
    CREATE INDEX idx_entities_type ON entities(type);
    -- ListEntities by project or session (keyset on id: the rowid ends every index).
    CREATE INDEX idx_entities_scope ON entities(project_id, session_id);
    -- The extraction prompt's last known entities of a graph.
    CREATE INDEX idx_entities_scope_seen ON entities(project_id, session_id, last_seen_at);
    -- An edge never joins two graphs.
    CREATE TRIGGER relationships_same_graph BEFORE INSERT ON relationships
    WHEN (SELECT project_id || '/' || session_id FROM entities WHERE id = new.from_id)
        IS NOT (SELECT project_id || '/' || session_id FROM entities WHERE id = new.to_id)
    BEGIN
        SELECT RAISE(ABORT, 'relationship endpoints belong to different graphs');
    END;
    -- Entity points now carry sessionId, which entity search filters on:
    -- re-index every entity through the outbox.
    INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at)
    SELECT 'index:entities', id, 0, (julianday('now') - 2440587.5) * 86400.0,
           (julianday('now') - 2440587.5) * 86400.0
    FROM entities WHERE true
    ON CONFLICT DO NOTHING;
    """,
    # 5: a claim skips targets that already have a running job; this answers
    # that check from the few running rows, not the whole backlog.
    """
    CREATE INDEX idx_jobs_running_target ON jobs(kind, target_id) WHERE state = 'running';
    """,
    # 6: keyword search reads each episode with its neighbouring turns and can
    # be evaluated inside one session's postings.
    # - context: the turn before the episode and the turn after it, in its
    #   session (episodes.context, kept by store/episodes.py). An answer often
    #   shares no word with the question while the turn around it does; on the
    #   LoCoMo dev split this column, at half a turn's weight, lifts keyword
    #   recall@10 from 0.78 to 0.89 (docs/recall.md).
    # - scope: one token per episode naming its session ("s<id>"), read from a
    #   view, so a search confined to a small session intersects that session's
    #   postings instead of walking every match in the table.
    # - rank: bm25 with the columns weighted, so ORDER BY rank ... LIMIT is
    #   FTS5's own top-N.
    """
    ALTER TABLE episodes ADD COLUMN context TEXT NOT NULL DEFAULT '';
    UPDATE episodes SET context = COALESCE((
        SELECT substr(p.ai_response, -1000) FROM episodes p
        WHERE p.session_id = episodes.session_id AND p.id < episodes.id
        ORDER BY p.id DESC LIMIT 1), '') || char(10) || COALESCE((
        SELECT substr(n.user_message, 1, 1000) FROM episodes n
        WHERE n.session_id = episodes.session_id AND n.id > episodes.id
        ORDER BY n.id LIMIT 1), '');
    DROP TRIGGER episodes_fts_insert;
    DROP TRIGGER episodes_fts_delete;
    DROP TRIGGER episodes_fts_update;
    DROP TABLE episodes_fts;
    CREATE VIEW episodes_fts_source AS
        SELECT id, user_message, ai_response, context, 's' || session_id AS scope FROM episodes;
    CREATE VIRTUAL TABLE episodes_fts USING fts5(
        user_message, ai_response, context, scope,
        content='episodes_fts_source', content_rowid='id',
        tokenize='porter unicode61'
    );
    CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
        INSERT INTO episodes_fts(rowid, user_message, ai_response, context, scope)
        VALUES (new.id, new.user_message, new.ai_response, new.context, 's' || new.session_id);
    END;
    CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, user_message, ai_response, context, scope)
        VALUES ('delete', old.id, old.user_message, old.ai_response, old.context,
                's' || old.session_id);
    END;
    CREATE TRIGGER episodes_fts_update
    AFTER UPDATE OF user_message, ai_response, context, session_id ON episodes BEGIN
        INSERT INTO episodes_fts(episodes_fts, rowid, user_message, ai_response, context, scope)
        VALUES ('delete', old.id, old.user_message, old.ai_response, old.context,
                's' || old.session_id);
        INSERT INTO episodes_fts(rowid, user_message, ai_response, context, scope)
        VALUES (new.id, new.user_message, new.ai_response, new.context, 's' || new.session_id);
    END;
    INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild');
    INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.5, 0.0)');
    """,
    # 7: memory keyword search is evaluated inside its owners' postings: one
    # scope token per memory ("p<project>" for a PROJECT memory, "u<hex of the
    # user id>" for a USER memory), so a user's search costs their memories,
    # not every memory sharing a word in the table.
    """
    DROP TRIGGER memories_fts_insert;
    DROP TRIGGER memories_fts_delete;
    DROP TRIGGER memories_fts_update;
    DROP TABLE memories_fts;
    CREATE VIEW memories_fts_source AS
        SELECT id, title, content,
               CASE kind WHEN 1 THEN 'p' || project_id ELSE 'u' || hex(user_id) END AS scope
        FROM memories;
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        title, content, scope,
        content='memories_fts_source', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, title, content, scope) VALUES (new.id, new.title,
            new.content,
            CASE new.kind WHEN 1 THEN 'p' || new.project_id ELSE 'u' || hex(new.user_id) END);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, title, content, scope)
        VALUES ('delete', old.id, old.title, old.content,
            CASE old.kind WHEN 1 THEN 'p' || old.project_id ELSE 'u' || hex(old.user_id) END);
    END;
    CREATE TRIGGER memories_fts_update
    AFTER UPDATE OF title, content, kind, project_id, user_id ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, title, content, scope)
        VALUES ('delete', old.id, old.title, old.content,
            CASE old.kind WHEN 1 THEN 'p' || old.project_id ELSE 'u' || hex(old.user_id) END);
        INSERT INTO memories_fts(rowid, title, content, scope) VALUES (new.id, new.title,
            new.content,
            CASE new.kind WHEN 1 THEN 'p' || new.project_id ELSE 'u' || hex(new.user_id) END);
    END;
    INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');
    INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.0)');
    -- A project's PROJECT memories, newest first, without walking its users' ones.
    CREATE INDEX idx_memories_kind_project ON memories(kind, project_id);
    """,
    # 8: tenants. Every project and every session outside a project belongs to
    # the tenant of the key that created it, and everything under them to the
    # same tenant. Rows that hold data a tenant query filters on directly
    # (lists, the watch log, memories outside projects) carry the tenant; the
    # rest reach it through their session or project. Existing data goes to
    # the default tenant the operator names (--default-tenant). Sessions are
    # rebuilt because external_id becomes unique per tenant: one tenant's
    # external id must neither collide with nor reveal another's.
    REBUILD
    + """
    ALTER TABLE projects ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    UPDATE projects SET tenant = :default_tenant WHERE true;
    CREATE INDEX idx_projects_tenant ON projects(tenant);

    CREATE TABLE sessions_new (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        -- The code always names the tenant; '' (no tenant's) is only what a
        -- row inserted by hand gets, and only admin keys see it.
        tenant      TEXT NOT NULL DEFAULT '',
        external_id TEXT NOT NULL,
        name        TEXT NOT NULL DEFAULT '',
        project_id  INTEGER REFERENCES projects(id),
        metadata    TEXT NOT NULL DEFAULT '{}',
        created_at  REAL NOT NULL,
        UNIQUE(tenant, external_id)
    );
    INSERT INTO sessions_new (id, tenant, external_id, name, project_id, metadata, created_at)
    SELECT id, :default_tenant, external_id, name, project_id, metadata, created_at FROM sessions;
    UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE(
        (SELECT seq FROM sqlite_sequence WHERE name = 'sessions'), 0))
    WHERE name = 'sessions_new';
    INSERT INTO sqlite_sequence (name, seq)
    SELECT 'sessions_new', seq FROM sqlite_sequence WHERE name = 'sessions'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'sessions_new');
    DROP TABLE sessions;
    ALTER TABLE sessions_new RENAME TO sessions;
    CREATE INDEX idx_sessions_project ON sessions(project_id);
    CREATE INDEX idx_sessions_tenant ON sessions(tenant);

    ALTER TABLE entities ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    UPDATE entities SET tenant = :default_tenant WHERE true;
    CREATE INDEX idx_entities_tenant ON entities(tenant);

    ALTER TABLE extraction_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    UPDATE extraction_events SET tenant = :default_tenant WHERE true;
    CREATE INDEX idx_extraction_events_tenant ON extraction_events(tenant, id);

    ALTER TABLE memories ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    UPDATE memories SET tenant = :default_tenant WHERE true;
    CREATE INDEX idx_memories_tenant_user ON memories(tenant, user_id, kind);
    -- A retry key belongs to its owner (tenant and user; '' for PROJECT
    -- memories): another user's id is neither refused nor revealed.
    DROP INDEX idx_memories_request;
    CREATE UNIQUE INDEX idx_memories_request ON memories(tenant, user_id, request_id)
        WHERE request_id IS NOT NULL;

    ALTER TABLE memory_usage ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    UPDATE memory_usage SET tenant = :default_tenant WHERE true;
    """,
    # 9: an episode's occur_time: when the exchange happened, which an import
    # sets from the original conversation (created_at stays when it was
    # stored). Existing episodes happened when they were stored. Episode points
    # now carry occurAt, which a windowed semantic search filters on:
    # re-index every episode through the outbox, as migration 4 did entities.
    """
    ALTER TABLE episodes ADD COLUMN occur_at REAL NOT NULL DEFAULT 0;
    UPDATE episodes SET occur_at = created_at;
    INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at)
    SELECT 'index:episodes', id, 0, (julianday('now') - 2440587.5) * 86400.0,
           (julianday('now') - 2440587.5) * 86400.0
    FROM episodes WHERE true
    ON CONFLICT DO NOTHING;
    """,
    # 10: a memory's history. Each update and delete keeps the version it
    # replaced. memory_id is no foreign key: a deleted memory's history stays
    # readable by its owner until purge_after (set at the delete), when a
    # durable purge job removes it. The owner columns answer GetMemory's
    # ownership rule without the memory row.
    """
    CREATE TABLE memory_history (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id    INTEGER NOT NULL,
        action       INTEGER NOT NULL,
        changed      TEXT NOT NULL DEFAULT '[]',
        previous     TEXT NOT NULL,
        kind         INTEGER NOT NULL,
        user_id      TEXT NOT NULL DEFAULT '',
        tier         INTEGER NOT NULL,
        session_id   INTEGER NOT NULL DEFAULT 0,
        request_id   TEXT NOT NULL DEFAULT '',
        principal    TEXT NOT NULL DEFAULT '',
        changed_at   REAL NOT NULL,
        purge_after  REAL
    );
    CREATE INDEX idx_memory_history_memory ON memory_history(memory_id, id);
    """,
    # 11: a memory may expire. expire_at NULL: never. Reads hide a memory from
    # the moment it expires; an expire:memory job scheduled for that time
    # removes the row and, through the outbox, its point. TASK-tier memories
    # of a deleted session go with it.
    """
    ALTER TABLE memories ADD COLUMN expire_at REAL;
    -- A deleted session's TASK-tier memories go with it (store/sessions.py).
    CREATE INDEX idx_memories_task_session ON memories(session_id) WHERE tier = 1;
    """,
    # 12 and 13 (store/schema_changes.py).
    schema_changes.JOB_PRIORITY,
    schema_changes.RETENTION,
    # 14: the graph stays one and stays current (docs/graph.md).
    # - An entity is found by a key its names share (core/names.name_key:
    #   case, spacing, punctuation, diacritics, a title or a possessive
    #   folded), not by its exact name; the entity keeps its best display
    #   name and every surface name it was seen under (entity_aliases, with
    #   how each was resolved), and each alias's words for name containment
    #   and near-duplicate blocking (entity_tokens). Names an existing graph
    #   holds twice under one key stay two entities (the later keyed
    #   '<key>#<id>'): merging them is an operator's call (MergeEntities).
    # - A relationship is an interval of time, derived from what episodes
    #   said (relationship_evidence: an assertion or an end, at the episode's
    #   occur_at), so one (from, to, label) may have held several times and
    #   nothing a later episode says deletes it. Each existing edge becomes
    #   evidence (one row per linked episode, one for its manual mentions) and
    #   an interval from its first evidence, still current.
    # - entity_merges records each merge with what undoing it needs.
    # - projects.single_valued_labels: a project's labels that hold one value
    #   at a time (NULL: the defaults).
    # Entity vectors now carry the aliases: every entity is re-indexed.
    REBUILD
    + """
    CREATE TABLE entities_new (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id    INTEGER NOT NULL DEFAULT 0,
        session_id    INTEGER NOT NULL DEFAULT 0,
        name          TEXT NOT NULL,
        name_key      TEXT NOT NULL,
        type          TEXT NOT NULL,
        notes         TEXT,
        mention_count INTEGER NOT NULL DEFAULT 1,
        confidence    REAL NOT NULL DEFAULT 1.0,
        source        TEXT NOT NULL DEFAULT 'extraction',
        last_seen_at  REAL,
        created_at    REAL NOT NULL,
        tenant        TEXT NOT NULL DEFAULT '',
        -- 'pending': kept apart until the LLM says whether it is another entity.
        resolution    TEXT NOT NULL DEFAULT 'resolved',
        UNIQUE(project_id, session_id, name_key, type)
    );
    INSERT INTO entities_new (id, project_id, session_id, name, name_key, type, notes,
                              mention_count, confidence, source, last_seen_at, created_at, tenant)
    SELECT id, project_id, session_id, name,
           nexus_name_key(name, type) || CASE WHEN ROW_NUMBER() OVER (
               PARTITION BY project_id, session_id, nexus_name_key(name, type), type ORDER BY id
           ) > 1 THEN '#' || id ELSE '' END,
           type, notes, mention_count, confidence, source, last_seen_at, created_at, tenant
    FROM entities;
    UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE(
        (SELECT seq FROM sqlite_sequence WHERE name = 'entities'), 0))
    WHERE name = 'entities_new';
    DROP TRIGGER relationships_same_graph;
    DROP TABLE entities;
    ALTER TABLE entities_new RENAME TO entities;
    CREATE INDEX idx_entities_type ON entities(type);
    CREATE INDEX idx_entities_scope ON entities(project_id, session_id);
    CREATE INDEX idx_entities_scope_seen ON entities(project_id, session_id, last_seen_at);
    CREATE INDEX idx_entities_tenant ON entities(tenant);

    CREATE TABLE entity_aliases (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        entity_id  INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        project_id INTEGER NOT NULL,
        session_id INTEGER NOT NULL,
        -- A surface name (a title and possessive dropped); one row per
        -- name regardless of case: "Acme Corp." and "ACME" share a key and
        -- are two aliases.
        name       TEXT NOT NULL COLLATE NOCASE,
        norm       TEXT NOT NULL,
        -- How it was resolved to this entity: new, exact, containment,
        -- shingle, llm, merge or manual; score is the rule's measure.
        method     TEXT NOT NULL,
        score      REAL NOT NULL DEFAULT 1.0,
        episode_id INTEGER REFERENCES episodes(id) ON DELETE SET NULL,
        created_at REAL NOT NULL,
        UNIQUE(entity_id, name)
    );
    CREATE INDEX idx_entity_aliases_entity_norm ON entity_aliases(entity_id, norm);
    CREATE INDEX idx_entity_aliases_norm ON entity_aliases(project_id, session_id, norm);
    INSERT INTO entity_aliases (entity_id, project_id, session_id, name, norm, method, created_at)
    SELECT id, project_id, session_id, name, nexus_name_key(name, type), 'new', created_at
    FROM entities;

    CREATE TABLE entity_tokens (
        project_id INTEGER NOT NULL,
        session_id INTEGER NOT NULL,
        type       TEXT NOT NULL,
        token      TEXT NOT NULL,
        entity_id  INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        PRIMARY KEY (project_id, session_id, type, token, entity_id)
    ) WITHOUT ROWID;
    CREATE INDEX idx_entity_tokens_entity ON entity_tokens(entity_id);
    -- A name's words of any type (containment, acronyms, another's name inside).
    CREATE INDEX idx_entity_tokens_token ON entity_tokens(project_id, session_id, token);
    INSERT OR IGNORE INTO entity_tokens (project_id, session_id, type, token, entity_id)
    WITH RECURSIVE split(entity_id, rest, token) AS (
        SELECT entity_id, norm || ' ', '' FROM entity_aliases
        UNION ALL
        SELECT entity_id, substr(rest, instr(rest, ' ') + 1), substr(rest, 1, instr(rest, ' ') - 1)
        FROM split WHERE rest != ''
    )
    SELECT e.project_id, e.session_id, e.type, s.token, s.entity_id
    FROM split s JOIN entities e ON e.id = s.entity_id WHERE s.token != '';

    -- Two entities the LLM said are different things: not asked again.
    CREATE TABLE entity_distinctions (
        a_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        b_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        episode_id INTEGER REFERENCES episodes(id) ON DELETE SET NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (a_id, b_id)
    ) WITHOUT ROWID;
    CREATE INDEX idx_entity_distinctions_b ON entity_distinctions(b_id);

    CREATE TABLE entity_merges (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id INTEGER NOT NULL,
        session_id INTEGER NOT NULL,
        tenant     TEXT NOT NULL,
        target_id  INTEGER NOT NULL,
        source_ids TEXT NOT NULL,
        method     TEXT NOT NULL,
        reason     TEXT NOT NULL DEFAULT '',
        request_id TEXT,
        principal  TEXT NOT NULL DEFAULT '',
        -- What undoing needs (JSON): the sources as they were and which
        -- aliases, episode links and evidence moved from each.
        snapshot   TEXT NOT NULL,
        created_at REAL NOT NULL,
        undone_at  REAL
    );
    CREATE INDEX idx_entity_merges_graph ON entity_merges(project_id, session_id, id);
    CREATE INDEX idx_entity_merges_target ON entity_merges(target_id);
    CREATE UNIQUE INDEX idx_entity_merges_request ON entity_merges(tenant, request_id)
        WHERE request_id IS NOT NULL;

    CREATE TABLE relationship_evidence (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        from_id    INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        to_id      INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        label      TEXT NOT NULL,
        kind       TEXT NOT NULL,
        at         REAL NOT NULL,
        episode_id INTEGER REFERENCES episodes(id) ON DELETE SET NULL,
        mentions   INTEGER NOT NULL DEFAULT 1,
        notes      TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX idx_evidence_subject ON relationship_evidence(from_id, label);
    CREATE INDEX idx_evidence_object ON relationship_evidence(to_id);
    CREATE INDEX idx_evidence_episode ON relationship_evidence(episode_id);
    INSERT INTO relationship_evidence (from_id, to_id, label, kind, at, episode_id, notes,
                                       created_at)
    SELECT r.from_id, r.to_id, r.label, 'assert', e.occur_at, e.id, r.notes, r.created_at
    FROM relationships r
    JOIN relationship_episodes re ON re.relationship_id = r.id
    JOIN episodes e ON e.id = re.episode_id;
    -- Manual mentions (no episode): one row carrying what the links do not.
    INSERT INTO relationship_evidence (from_id, to_id, label, kind, at, mentions, notes,
                                       created_at)
    SELECT r.from_id, r.to_id, r.label, 'assert', r.created_at,
           r.mention_count - (SELECT COUNT(*) FROM relationship_episodes re
                              WHERE re.relationship_id = r.id),
           r.notes, r.created_at
    FROM relationships r
    WHERE r.mention_count > (SELECT COUNT(*) FROM relationship_episodes re
                             WHERE re.relationship_id = r.id);

    CREATE TABLE relationships_new (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        from_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        to_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        label         TEXT NOT NULL,
        notes         TEXT,
        mention_count INTEGER NOT NULL DEFAULT 1,
        created_at    REAL NOT NULL,
        -- [valid_at, invalid_at): when it held; invalid_at NULL while current.
        valid_at      REAL NOT NULL,
        invalid_at    REAL,
        asserted_by   INTEGER REFERENCES episodes(id) ON DELETE SET NULL,
        ended_by      INTEGER REFERENCES episodes(id) ON DELETE SET NULL
    );
    INSERT INTO relationships_new (id, from_id, to_id, label, notes, mention_count, created_at,
                                   valid_at, asserted_by)
    SELECT r.id, r.from_id, r.to_id, r.label, r.notes, r.mention_count, r.created_at,
           COALESCE((SELECT MIN(v.at) FROM relationship_evidence v
                     WHERE v.from_id = r.from_id AND v.to_id = r.to_id AND v.label = r.label),
                    r.created_at),
           (SELECT v.episode_id FROM relationship_evidence v
            WHERE v.from_id = r.from_id AND v.to_id = r.to_id AND v.label = r.label
            ORDER BY v.at, v.id LIMIT 1)
    FROM relationships r;
    UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE(
        (SELECT seq FROM sqlite_sequence WHERE name = 'relationships'), 0))
    WHERE name = 'relationships_new';
    DROP TABLE relationship_episodes;
    DROP TABLE relationships;
    ALTER TABLE relationships_new RENAME TO relationships;
    CREATE INDEX idx_relationships_from ON relationships(from_id, label, valid_at);
    CREATE INDEX idx_relationships_to ON relationships(to_id, from_id);
    CREATE TRIGGER relationships_same_graph BEFORE INSERT ON relationships
    WHEN (SELECT project_id || '/' || session_id FROM entities WHERE id = new.from_id)
        IS NOT (SELECT project_id || '/' || session_id FROM entities WHERE id = new.to_id)
    BEGIN
        SELECT RAISE(ABORT, 'relationship endpoints belong to different graphs');
    END;

    ALTER TABLE projects ADD COLUMN single_valued_labels TEXT;

    INSERT INTO jobs (kind, target_id, run_after, created_at, updated_at)
    SELECT 'index:entities', id, 0, (julianday('now') - 2440587.5) * 86400.0,
           (julianday('now') - 2440587.5) * 86400.0
    FROM entities WHERE true
    ON CONFLICT DO NOTHING;
    """,
    # 15 to 18 (store/schema_changes.py).
    schema_changes.MEMORY_FORMATION,
    schema_changes.SELECTION_ANSWERS,
    schema_changes.EPISODE_ACTS_FOR,
    schema_changes.USAGE_OWNER_INDEX,
    # Since: the changes both stores apply, declared once.
    *schema_changes.CHANGES,
]

LATEST_VERSION = len(MIGRATIONS)


def migrate(
    conn: sqlite3.Connection, default_tenant: str = DEFAULT_TENANT, *, upto: int | None = None
) -> int:
    """Bring the database to the latest version; returns the version.

    ``default_tenant`` is the tenant that rows written before tenants existed
    are given (version 8); it is bound wherever a script names it. ``upto``
    replays the history from an empty database to that version instead, as
    an earlier build would have left it (for tests of an upgrade).
    """
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    # Migration 14 keys entities by core/names.name_key, which SQL cannot spell.
    conn.create_function("nexus_name_key", 2, name_key, deterministic=True)
    if current > LATEST_VERSION:
        raise RuntimeError(
            f"database schema version {current} is newer than this build knows "
            f"({LATEST_VERSION}); upgrade nexus-grpc"
        )
    if current == 0 and upto is None:
        log.info("creating the schema at version %d", LATEST_VERSION)
        _in_transaction(conn, LATEST_VERSION, ddl.create_all())
        probe(conn)
        return LATEST_VERSION
    target = LATEST_VERSION if upto is None else upto
    for version in range(current + 1, target + 1):
        log.info("applying schema migration %d", version)
        step = MIGRATIONS[version - 1]
        if isinstance(step, Change):
            _in_transaction(conn, version, _statements(conn, step))
        else:
            _in_transaction(
                conn,
                version,
                _split(step),
                default_tenant=default_tenant,
                rebuild=step.startswith(REBUILD),
            )
    probe(conn)
    return target


def _statements(conn: sqlite3.Connection, change: Change) -> list[str | Rewrite]:
    """A declared change's statements (a Rewrite runs as itself); a column
    that is there already (a table created later in the history, whole) is
    not added twice."""
    statements: list[str | Rewrite] = []
    for op in change.operations:
        if isinstance(op, AddColumn) and op.column in _columns(conn, op.table):
            continue
        statements += [op] if isinstance(op, Rewrite) else ddl.operation(op)
    return statements


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


def _in_transaction(
    conn: sqlite3.Connection,
    version: int,
    statements: Sequence[str | Rewrite],
    *,
    default_tenant: str = DEFAULT_TENANT,
    rebuild: bool = False,
) -> None:
    foreign_keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    if rebuild:
        conn.execute("PRAGMA foreign_keys = OFF")  # only takes effect outside a transaction
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in statements:
            if isinstance(statement, Rewrite):
                rows = conn.execute(statement.select).fetchall()
                conn.executemany(statement.update, statement.rule(rows))
            elif ":default_tenant" in statement:
                conn.execute(statement, {"default_tenant": default_tenant})
            else:
                conn.execute(statement)
        if rebuild and conn.execute("PRAGMA foreign_key_check").fetchall():
            raise RuntimeError(f"schema migration {version} would break foreign keys")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        if rebuild:
            conn.execute(f"PRAGMA foreign_keys = {'ON' if foreign_keys else 'OFF'}")


def probe(conn: Connection) -> None:
    """Touch the last page of every table, cheaply, so a damaged file fails
    the start instead of the first request that reaches the damage.

    A file cut short (a copy that stopped, a full disk) loses its tail, which
    is where rowid tables keep their newest rows: ``max(rowid)`` walks only
    the rightmost path of each table (a few pages), not the whole file.
    """
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE '%WITHOUT ROWID%'"
        " AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
    ).fetchall()
    for (name,) in tables:
        conn.execute(f'SELECT max(rowid) FROM "{name}"').fetchone()


def _split(script: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies whole.

    executescript() would commit the open transaction, so statements run one
    by one; sqlite3.complete_statement tells where each one ends.
    """
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer.strip() and line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement in migration: {buffer.strip()[:80]}")
    return statements
