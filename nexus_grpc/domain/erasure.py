"""Forgetting: what goes when an episode, a memory, a session, a project or
a whole user is deleted, and the durable erasure that does it for a user or
a project in steps (docs/privacy.md).

One rule for every deletion (``forget_episodes``): an episode takes with it
its extraction events, formation candidates, graph evidence and episode
links, and the work queued for it. In the graph, an entity or fact that only
the erased episodes held up goes (with its aliases); a shared one stays
without their evidence, loses the aliases only they gave and the notes they
may have written, and has its facts derived again from the evidence left. A
session summary or project overview written after an erased episode
existed may quote it: it is removed, and a session's is queued to be written
again from what is left. An erasure of a user also takes the memories their
episodes formed or changed (their words are in them).

An erasure (``step``) runs as a durable job, one transaction a step, each
step moving its phase and adding to its counts, so ``kill -9`` at any point
resumes where the last step committed. Its last phase waits for the index
jobs it queued, then has the store and the vector index scrub their files
(``Scrubber``) and marks it DONE: from then on no byte of the erased text is
left in any file the service writes (PostgreSQL: docs/privacy.md).

While a user's erasure runs, writes acting for them are refused
(``refuse_while_forgetting``), and the erasure looks once more for anything
written meanwhile before it scrubs. Request ids of erased writes are buried:
a retry of one is refused, not written again (``refuse_buried``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.erasure import Counts, Erasure, RemovalTargets, Target
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import facts
from nexus_grpc.errors import ErrorInfo, FailedPrecondition, FieldViolation

#: Episodes (or memories, entities, sessions) one step takes: one
#: transaction's worth, short enough that live writes interleave.
CHUNK = 200
#: The meta key of the secret that keys the digests of erased users and
#: request ids (made once per database).
_KEY = "erasure_key"
#: Formation operations of an erased memory keep their shape, not their words.
ERASED = "(erased)"
#: A limit that takes every row (a delete that runs in one transaction).
NO_LIMIT = 1 << 40
#: How soon after a delete its bytes are scrubbed off the disk by default
#: (--scrub-delay-seconds): deletes within it share one scrub.
SCRUB_DELAY = 60.0


#: The meta key of when the next scrub is due (a time), written by the
#: delete that asked for it: a scrub asked for survives a crash.
SCRUB_DUE = "scrub_due_at"


def scrub_soon(uow: UnitOfWork, delay: float) -> None:
    """Have the deleted bytes leave the files ``delay`` seconds from now (or
    sooner, when a scrub is due sooner already). The storage upkeep
    (workers/storage_upkeep.py) runs it; deletes within the delay share it."""
    due = time.time() + delay
    asked = scrub_due(uow)
    if asked is None or asked > due:
        uow.meta.put(SCRUB_DUE, repr(due))


def scrub_due(uow: UnitOfWork) -> float | None:
    asked = uow.meta.get(SCRUB_DUE)
    return float(asked) if asked else None


def scrubbed(uow: UnitOfWork, asked: float) -> None:
    """The scrub asked for at ``asked`` is done: clear it, unless a delete
    asked for another meanwhile (its own time then stands)."""
    if scrub_due(uow) == asked:
        uow.meta.put(SCRUB_DUE, "")


# -- digests -------------------------------------------------------------------------------


def _secret(uow: UnitOfWork, create: bool) -> bytes | None:
    key = uow.meta.get(_KEY)
    if key is None:
        if not create:
            return None
        key = secrets.token_hex(32)
        uow.meta.put(_KEY, key)
    return bytes.fromhex(key)


def _digest(uow: UnitOfWork, *parts: object, create: bool = True) -> str:
    """A keyed digest of ``parts``; '' (which no digest equals) when no key
    was made yet and ``create`` is False (a read: nothing was erased)."""
    secret = _secret(uow, create)
    if secret is None:
        return ""
    message = "\x00".join(str(p) for p in parts).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def user_digest(uow: UnitOfWork, tenant: str, user_id: str, *, create: bool = True) -> str:
    """A receipt's name for a user: keyed, so the log of receipts does not
    list who was forgotten, yet a request naming the user finds theirs."""
    return _digest(uow, "user", tenant, user_id, create=create)


def episode_request(
    uow: UnitOfWork, session_id: int, request_id: str, *, create: bool = True
) -> str:
    return _digest(uow, "episode", session_id, request_id, create=create)


def memory_request(
    uow: UnitOfWork, tenant: str, user_id: str, request_id: str, *, create: bool = True
) -> str:
    return _digest(uow, "memory", tenant, user_id, request_id, create=create)


# -- a removal's follow-up work ---------------------------------------------------------------
# Each removal queues the index jobs that take its rows' points out of the
# vector index here, then has the store delete the rows: the store writes
# what it is told, and plain deletes and erasures share these helpers.


def drop_points(uow: UnitOfWork, targets: RemovalTargets) -> None:
    """Queue the index jobs that take these rows' points out of the vector
    index, in the removal's own transaction and before its rows go: a job
    reads its target's tenant from the row. A job already pending for a row
    coalesces as every queued job does (``jobs.enqueue``): it becomes due now
    and LIVE, so deleted words leave the index promptly, not behind an
    import's bulk backlog."""
    for kind, ids in (
        (jobs.INDEX_EPISODE, targets.episodes),
        (jobs.INDEX_SUMMARY, targets.summaries),
        (jobs.INDEX_ENTITY, targets.entities),
        (jobs.INDEX_MEMORY, targets.memories),
    ):
        if ids:
            uow.jobs.enqueue(kind, ids)


def remove_session(
    uow: UnitOfWork, session_id: int, tenant: str | None = None, *, user_task_memories: bool = True
) -> int:
    """Delete a session with its episodes, summaries, own graph and TASK-tier
    memories (``user_task_memories`` False: the PROJECT ones only), their
    points with them. Returns how many episodes went with it."""
    targets = uow.sessions.removal_targets([session_id], user_task_memories=user_task_memories)
    drop_points(uow, targets)
    return uow.sessions.delete(session_id, tenant, user_task_memories=user_task_memories)


def remove_summaries(uow: UnitOfWork, ids: Sequence[int]) -> int:
    """Delete these summaries (or overviews), their points with them."""
    drop_points(uow, RemovalTargets(summaries=tuple(ids)))
    for summary_id in ids:
        uow.summaries.delete(summary_id)
    return len(ids)


def _remove_sessions(uow: UnitOfWork, ids: Sequence[int]) -> Counts:
    """An erasure's sessions (their episodes gone already), by ``remove_session``'s rule."""
    if not ids:
        return Counts()
    drop_points(uow, uow.sessions.removal_targets(ids))
    return uow.erasures.delete_sessions(ids)


def _remove_episodes(uow: UnitOfWork, ids: Sequence[int], *, whole_sessions: bool) -> Counts:
    drop_points(uow, RemovalTargets(episodes=tuple(ids)))
    return uow.erasures.delete_episodes(ids, whole_sessions=whole_sessions)


def _remove_memories(uow: UnitOfWork, ids: Sequence[int]) -> Counts:
    drop_points(uow, RemovalTargets(memories=tuple(ids)))
    return uow.erasures.delete_memories(ids)


def _remove_entities(uow: UnitOfWork, ids: Sequence[int]) -> Counts:
    drop_points(uow, RemovalTargets(entities=tuple(ids)))
    return uow.erasures.delete_entities(ids)


# -- the rules every deletion follows ----------------------------------------------------------


def forget_episodes(
    uow: UnitOfWork,
    ids: Sequence[int],
    *,
    whole_sessions: bool = False,
    formed: bool = False,
    erasure_id: int = 0,
    summaries: bool = True,
) -> Counts:
    """Remove these episodes by the rule every deletion follows (the module's
    docstring). ``whole_sessions``: their sessions go too (their summaries
    with them). ``formed``: the memories they formed or changed go too, with
    their history (a user's erasure). ``erasure_id``: their request ids are
    buried under that erasure. ``summaries`` False: the summaries are left
    to the caller (the retention sweep's own rule)."""
    if not ids:
        return Counts()
    store = uow.erasures
    fallout = store.episode_fallout(ids)
    counts = Counts()
    if erasure_id:
        store.bury_requests(
            (
                episode_request(uow, session_id, request)
                for _, session_id, request in store.episode_requests(ids)
            ),
            erasure_id,
        )
    if formed:
        counts += forget_memories(uow, store.memories_formed_from(ids), erasure_id=erasure_id)
    # An alias goes with the episode that gave it, unless another's words
    # give it too, or it is the last name of an entity others still mention.
    still_given = store.aliases_still_given(fallout.aliases, ids)
    unclaimed = [a for a in fallout.aliases if a.id not in still_given]
    still_given.update(store.last_names(unclaimed, ids))
    for alias_id, episode_id in still_given.items():
        store.give_alias(alias_id, episode_id)
    counts += Counts(
        aliases=store.delete_aliases([a.id for a in fallout.aliases if a.id not in still_given])
    )
    facts_before = store.count_facts(fallout.groups)
    counts += _remove_episodes(uow, ids, whole_sessions=whole_sessions)
    _rederive(uow, fallout.groups)
    counts += Counts(facts=max(0, facts_before - store.count_facts(fallout.groups)))
    touched = set(fallout.linked) | {a.entity_id for a in fallout.aliases}
    touched |= {from_id for from_id, _ in fallout.groups}
    counts += _settle_entities(uow, touched, spoke_of=set(fallout.linked))
    if summaries:
        counts += _summaries_after(uow, fallout.first_seen, whole_sessions)
    return counts


def _rederive(uow: UnitOfWork, groups: set[tuple[int, str]]) -> None:
    """The facts of these groups derived again from the evidence left (a
    group with none left has no facts)."""
    by_graph: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for group in groups:
        graph = uow.graph.entity_graph(group[0])
        if graph is not None:
            by_graph.setdefault(graph, []).append(group)
    for graph, members in by_graph.items():
        facts.rederive(uow, members, facts.single_valued(uow, graph))


def _settle_entities(uow: UnitOfWork, touched: set[int], spoke_of: set[int]) -> Counts:
    """The touched entities after their evidence went: those nothing holds up
    go; the others are shown again under what is left (their name, tokens and
    vector), without notes that an erased episode may have written."""
    if not touched:
        return Counts()
    store = uow.erasures
    doomed = store.unsupported_entities(sorted(touched))
    counts = Counts(merges=store.drop_merges_touching(sorted(touched)))
    counts += _remove_entities(uow, doomed)
    survivors = sorted(touched - set(doomed))
    store.clear_entity_notes([i for i in survivors if i in spoke_of])
    for entity_id in survivors:
        uow.graph.refresh_display_name(entity_id)
        uow.graph.rebuild_tokens(entity_id)
    if survivors:
        uow.jobs.enqueue(jobs.INDEX_ENTITY, survivors)
    return counts


def _summaries_after(
    uow: UnitOfWork, first_seen: dict[int, tuple[int, float]], whole: bool
) -> Counts:
    """Summaries that may quote an erased episode: a session's written after
    the episode existed goes and is queued again; so does an overview of its
    project (not queued: SummarizeProject writes one on demand)."""
    store = uow.erasures
    removed = rebuilt = 0
    if not whole:
        quoting = store.sessions_summarised_since(first_seen)
        removed += remove_summaries(
            uow, [i for s in quoting for i in uow.summaries.ids_of_session(s)]
        )
        # Written again from what is left, where anything is.
        rebuilt_ids = store.sessions_with_episodes(quoting)
        if rebuilt_ids:
            uow.jobs.enqueue(jobs.SUMMARIZE_SESSION, rebuilt_ids)
        rebuilt += len(rebuilt_ids)
    since: dict[int, float] = {}
    for project_id, at in first_seen.values():
        if project_id:
            since[project_id] = min(at, since.get(project_id, at))
    removed += remove_summaries(uow, store.overviews_since(since))
    return Counts(summaries_removed=removed, summaries_rebuilt=rebuilt)


def forget_memories(uow: UnitOfWork, ids: Sequence[int], *, erasure_id: int = 0) -> Counts:
    """Remove memories with their whole history and uses now, and their words
    from the formation events that name them. ``erasure_id``: their request
    ids are buried under that erasure."""
    if not ids:
        return Counts()
    store = uow.erasures
    scrub_formation_events(uow, ids)
    if erasure_id:
        store.bury_requests(
            (memory_request(uow, *r) for r in store.memory_request_ids(ids)), erasure_id
        )
    return _remove_memories(uow, ids)


def scrub_formation_events(uow: UnitOfWork, memory_ids: Sequence[int]) -> None:
    """The events that told how these memories formed keep the operations,
    without their words: a replay from event 0 must not read a deleted
    memory's text."""
    gone = {int(i) for i in memory_ids}
    store = uow.erasures
    for event_id, payload in store.events_naming_memories(sorted(gone)):
        formed = payload.get("formation")
        if not isinstance(formed, dict):
            continue
        changed = False
        operations: list[dict[str, Any]] = []
        for op in formed.get("operations", []):
            if op.get("memory_id") in gone or op.get("related_memory_id") in gone:
                op = {**op, "content": ERASED, "reason": ""}
                changed = True
            operations.append(op)
        if changed:
            store.rewrite_event(
                event_id, {**payload, "formation": {**formed, "operations": operations}}
            )


def forget_restored(uow: UnitOfWork, tenant: str, project_id: int) -> int:
    """What a restore brought back of users the tenant has forgotten since
    (an export taken before their erasure): erased again, in the restore's
    own transaction, so none of it is ever seen. What such a user wrote
    after their erasure (a user who came back) stays. Returns how many
    records went."""
    forgotten = uow.erasures.forgotten(tenant)
    if not forgotten:
        return 0
    counts = Counts()
    for user in uow.erasures.users_in_project(project_id):
        erased_at = forgotten.get(user_digest(uow, tenant, user, create=False))
        if erased_at is None:
            continue
        sessions, elsewhere, memories = uow.erasures.user_rows_before(project_id, user, erased_at)
        episodes = uow.erasures.episodes_in_sessions(sessions, NO_LIMIT)
        counts += forget_episodes(uow, episodes, whole_sessions=True, formed=True)
        counts += _remove_sessions(uow, sessions)
        counts += forget_episodes(uow, elsewhere, formed=True)
        counts += forget_memories(uow, memories)
    if counts == Counts():
        return 0
    scrub_soon(uow, SCRUB_DELAY)
    return (
        counts.sessions
        + counts.episodes
        + counts.memories
        + counts.memory_history
        + counts.entities
        + counts.facts
        + counts.evidence
        + counts.aliases
        + counts.mentions
        + counts.summaries_removed
    )


# -- writes refused ---------------------------------------------------------------------------


def refuse_while_forgetting(uow: UnitOfWork, tenant: str, user_id: str) -> None:
    """A write acting for a user whose erasure runs is refused: it would be
    erased as soon as written, or (written after the erasure looked) outlive it."""
    if not user_id:
        return
    digest = user_digest(uow, tenant, user_id, create=False)
    running = uow.erasures.running_for(tenant, digest) if digest else []
    if running:
        raise FailedPrecondition(
            f"user {user_id!r} is being forgotten (erasure {running[0].id}); write again once"
            " it is done",
            details=(ErrorInfo("USER_BEING_FORGOTTEN", {"erasure_id": str(running[0].id)}),),
        )


def refuse_buried(uow: UnitOfWork, digest: str, request_id: str) -> None:
    """Refuse a write whose request id names one an erasure removed (the
    digest from ``episode_request`` or ``memory_request``, made with
    ``create=False``: '' when nothing was ever erased)."""
    erasure_id = uow.erasures.buried(digest) if digest else None
    if erasure_id is not None:
        message = (
            f"request_id {request_id!r} names a write that erasure {erasure_id} removed; send a"
            " new request_id to write it again"
        )
        raise FailedPrecondition(
            message,
            details=(
                FieldViolation("request_id", message),
                ErrorInfo("REQUEST_ERASED", {"erasure_id": str(erasure_id)}),
            ),
        )


# -- an erasure, step by step ---------------------------------------------------------------


def start(uow: UnitOfWork, target: Target, principal: str) -> Erasure:
    """A new erasure of ``target`` (its job queued), or the one of the same
    user already running (``joined``)."""
    digest = user_digest(uow, target.tenant, target.user_id) if target.kind == e.USER else ""
    if target.kind == e.USER:
        for running in uow.erasures.running_for(target.tenant, digest):
            if running.project_id in (0, target.project_id):
                return replace(running, joined=True)
    erasure = uow.erasures.start(target, digest, principal)
    planned = (
        uow.erasures.user_holds(target.tenant, target.user_id, target.project_id)
        if target.kind == e.USER
        else uow.erasures.project_holds(target.project_id)
    )
    erasure = replace(erasure, planned=planned, phase=e.EPISODES)
    if target.kind == e.PROJECT:
        uow.erasures.mark_project_deleting(target.project_id, erasure.id)
    uow.erasures.save(erasure)
    uow.jobs.enqueue(jobs.ERASE, [erasure.id])
    return erasure


def step(uow: UnitOfWork, erasure_id: int, at: float) -> Erasure | None:
    """One step of the erasure: one phase's next chunk, in this transaction.
    Returns it as it stands after (None: gone or done)."""
    erasure = uow.erasures.get(erasure_id)
    if erasure is None or erasure.done or erasure.phase == e.DISK:
        return erasure
    run = _USER_STEPS if erasure.kind == e.USER else _PROJECT_STEPS
    erasure = run[erasure.phase](uow, erasure, at)
    uow.erasures.save(erasure)
    return erasure


def _advance(erasure: Erasure, counts: Counts, taken: int, then: str) -> Erasure:
    """Add ``counts``; stay in the phase while a full chunk was taken."""
    phase = erasure.phase if taken >= CHUNK else then
    return replace(erasure, counts=erasure.counts + counts, phase=phase)


def _user_episodes(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    sessions = store.user_sessions(erasure.tenant, erasure.user_id, erasure.project_id, CHUNK)
    ids = store.episodes_in_sessions(sessions, CHUNK) if sessions else []
    whole = bool(ids)
    if not ids:
        ids = store.user_episodes_elsewhere(
            erasure.tenant, erasure.user_id, erasure.project_id, CHUNK
        )
    counts = forget_episodes(uow, ids, whole_sessions=whole, formed=True, erasure_id=erasure.id)
    if len(ids) >= CHUNK or whole:
        return replace(erasure, counts=erasure.counts + counts)
    return replace(erasure, counts=erasure.counts + counts, phase=e.SESSIONS)


def _user_sessions(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    ids = store.user_sessions(erasure.tenant, erasure.user_id, erasure.project_id, CHUNK)
    return _advance(erasure, _remove_sessions(uow, ids), len(ids), e.MEMORIES)


def _user_memories(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    ids = uow.erasures.user_memories(erasure.tenant, erasure.user_id, erasure.project_id, CHUNK)
    counts = forget_memories(uow, ids, erasure_id=erasure.id)
    return _advance(erasure, counts, len(ids), e.RECORDS)


def _user_records(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    tenant, user, project = erasure.tenant, erasure.user_id, erasure.project_id
    counts = Counts(
        memory_usage=store.delete_user_usage(tenant, user, project),
        selections=store.delete_user_selections(tenant, user, project),
        llm_calls_unlinked=store.unlink_llm_calls(tenant, user, project),
    )
    erasure = replace(erasure, counts=erasure.counts + counts)
    # Anything written for the user since the erasure looked (a write that
    # began before it was refused): once more from the start.
    left = store.user_holds(tenant, user, project)
    if left.sessions or left.episodes or left.memories or left.memory_usage or left.selections:
        return replace(erasure, phase=e.EPISODES)
    return _to_disk(erasure, at)


def _to_disk(erasure: Erasure, at: float) -> Erasure:
    """Every row is gone: what is left is the files. The user's id is not
    kept past this step, so the scrub that follows takes its last copies too."""
    return replace(erasure, phase=e.DISK, user_id="", carry={**erasure.carry, "disk_at": at})


_USER_STEPS = {
    e.EPISODES: _user_episodes,
    e.SESSIONS: _user_sessions,
    e.MEMORIES: _user_memories,
    e.RECORDS: _user_records,
}


def _project_episodes(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    sessions = store.project_sessions(erasure.project_id, CHUNK)
    ids = store.episodes_in_sessions(sessions, CHUNK) if sessions else []
    # The project's graph and memories go whole after: no per-episode surgery.
    counts = _remove_episodes(uow, ids, whole_sessions=True)
    return _advance(erasure, counts, len(ids), e.SESSIONS)


def _project_sessions(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    ids = store.project_sessions(erasure.project_id, CHUNK)
    return _advance(erasure, _remove_sessions(uow, ids), len(ids), e.MEMORIES)


def _project_memories(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    ids = store.project_memories(erasure.project_id, CHUNK)
    return _advance(erasure, _remove_memories(uow, ids), len(ids), e.GRAPH)


def _project_graph(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    ids = store.project_entities(erasure.project_id, CHUNK)
    counts = Counts(merges=store.drop_merges_touching(ids)) + _remove_entities(uow, ids)
    return _advance(erasure, counts, len(ids), e.RECORDS)


def _project_records(uow: UnitOfWork, erasure: Erasure, at: float) -> Erasure:
    store = uow.erasures
    # updated_at >= 0.0: every overview the project has.
    overviews = remove_summaries(uow, store.overviews_since({erasure.project_id: 0.0}))
    counts = store.delete_project_records(erasure.project_id) + Counts(summaries_removed=overviews)
    left = store.project_holds(erasure.project_id)
    erasure = replace(erasure, counts=erasure.counts + counts)
    if left.sessions or left.episodes or left.memories or left.entities:
        return replace(erasure, phase=e.EPISODES)
    store.delete_project_row(erasure.project_id)
    return _to_disk(erasure, at)


_PROJECT_STEPS = {
    e.EPISODES: _project_episodes,
    e.SESSIONS: _project_sessions,
    e.MEMORIES: _project_memories,
    e.GRAPH: _project_graph,
    e.RECORDS: _project_records,
}


def disk_ready(uow: UnitOfWork, erasure: Erasure) -> bool:
    """Whether the index jobs queued before the disk phase have run: only
    then are the removed points gone from a vector server."""
    return uow.erasures.index_work_before(float(erasure.carry.get("disk_at", 0.0))) == 0


def finish(uow: UnitOfWork, erasure_id: int) -> Erasure | None:
    """The receipt made final: DONE, and the user's id no longer kept."""
    erasure = uow.erasures.get(erasure_id)
    if erasure is None or erasure.done:
        return erasure
    carry = {k: v for k, v in erasure.carry.items() if k != "disk_at"}
    done = replace(
        erasure, state=e.DONE, phase=e.FINISHED, user_id="", carry=carry, finished_at=time.time()
    )
    uow.erasures.save(done)
    return done
