"""The durable jobs' kinds, priorities and records (the queue itself is the
store's ``jobs`` table, store/jobs.py; the workers are workers/)."""

from __future__ import annotations

from dataclasses import dataclass

INDEX_EPISODE = "index:episodes"
INDEX_ENTITY = "index:entities"
INDEX_SUMMARY = "index:summaries"
INDEX_MEMORY = "index:memories"
EXTRACT_EPISODE = "extract:episode"
SUMMARIZE_SESSION = "summarize:session"
# An entity kept apart because the LLM could not say whether it is another:
# ask again (domain/entity_resolution.py).
RESOLVE_ENTITY = "resolve:entity"
# An episode's memory formation, after its extraction proposed candidates
# (domain/formation.py).
FORM_MEMORIES = "form:memories"
# Scheduled for the end of a deleted memory's history retention (run_after).
PURGE_MEMORY_HISTORY = "purge:memory_history"
# Kinds whose jobs are queued for a future time on purpose: their age counts
# from when they fall due, not from when they were queued.
# Scheduled for a memory's expire_time.
EXPIRE_MEMORY = "expire:memory"
# A project's retention sweep: deletes its sessions and episodes past the
# retention, then schedules itself for the next one to pass.
RETAIN_PROJECT = "retain:project"
# An erasure (domain/erasure.py): a user forgotten or a project deleted, one
# step a run; it queues itself again until it is done. Its target is the
# erasure's id.
ERASE = "erase:run"
SCHEDULED_KINDS = (PURGE_MEMORY_HISTORY, EXPIRE_MEMORY, RETAIN_PROJECT)

# Claim order within a kind: every due LIVE job before any BULK one. A bulk
# import's embedding, extraction and summaries wait behind live traffic
# instead of putting a large backlog in front of it.
LIVE = 0
BULK = 1

# Within a priority, tenants take turns (docs/architecture.md, "Tenants take
# turns"). A job carries the tenant of its target, and a claim takes, at the
# most urgent priority with due jobs, the oldest due job of each tenant in
# turn, the tenant this claimer served least recently first (never served:
# first of all; equals: the older job first), then each one's second oldest,
# and so on until the batch is full. Between two turns of a tenant, every
# other tenant gets at most one: one tenant's backlog of thousands delays
# another tenant's job by at most one of its own (a claim under way when the
# job was queued, or its turn when the other tenant was served last).

ALL_KINDS = (
    INDEX_EPISODE,
    INDEX_ENTITY,
    INDEX_SUMMARY,
    INDEX_MEMORY,
    EXTRACT_EPISODE,
    SUMMARIZE_SESSION,
    RESOLVE_ENTITY,
    FORM_MEMORIES,
    PURGE_MEMORY_HISTORY,
    EXPIRE_MEMORY,
    RETAIN_PROJECT,
    ERASE,
)


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    target_id: int
    attempts: int
    # LIVE or BULK: what the work it leads to is queued at.
    priority: int = 0
    # The tenant of its target (the turn it is claimed in).
    tenant: str = ""


@dataclass(frozen=True)
class QueueDepth:
    kind: str
    pending: int
    failed: int
    oldest_pending_age: float


# On PostgreSQL, several instances claim from one table: a claimed job is
# leased for this long by default (--job-lease-seconds; on the database's
# clock), and a job whose lease ran out (its instance died, or hangs) is
# claimed again by any instance. A
# worker renews its jobs' leases while they run (``renew``, store/jobs.py), so only a dead
# or stuck instance loses them. Handlers are idempotent: a job that runs
# twice does its work once.
LEASE_SECONDS = 60.0
