"""What each page asks the server: gRPC calls through the typed client.

The console holds no data and no rules: every figure on a page is an answer
of the server to the console's key, so a user key sees here exactly what it
sees through gRPC.  Calls a page needs together run at once
(``asyncio.gather``), and every list is one page of the server's own paging:
no page reads a project whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import grpc
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.client import NexusClient, NexusClientError, NexusNotFound
from nexus_grpc.client.base import ServerStream
from nexus_grpc.console import page_data
from nexus_grpc.console.params import (
    BadRequest,
    as_timestamp,
    choice,
    flag,
    positive_id,
    text,
)
from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2

Params = Mapping[str, str]

PROJECTS_PER_PAGE = 50
SESSIONS_PER_PAGE = 20
#: Episodes shown under each session of the timeline; the session's own view
#: pages through the rest.
EPISODES_PER_SESSION = 5
EPISODES_PER_PAGE = 50
MEMORIES_PER_PAGE = 50
#: Server pages of memories read to fill one page of archived ones.
ARCHIVE_SCAN_PAGES = 5
HISTORY_PAGE = 100
#: The graph's starting points when no entity is asked about.
GRAPH_SEEDS = 12
SEARCH_LIMIT = 20
#: The longest an episode page waits for its extraction events: the replay
#: answers at once, so only a record that is gone waits this long.
REPLAY_SECONDS = 2.0
MODES = ("hybrid", "keyword", "semantic")
SEARCH_KINDS = ("episodes", "memories", "entities")
#: /status's usage windows: bucket length, and how many buckets back from now.
USAGE_WINDOWS = {
    "day": (memory_pb2.USAGE_BUCKET_HOUR, 24),
    "week": (memory_pb2.USAGE_BUCKET_DAY, 7),
}
_BUCKET_SECONDS = {memory_pb2.USAGE_BUCKET_HOUR: 3_600, memory_pb2.USAGE_BUCKET_DAY: 86_400}
_MODE_VALUES = {
    "hybrid": memory_pb2.SEARCH_MODE_HYBRID,
    "keyword": memory_pb2.SEARCH_MODE_KEYWORD,
    "semantic": memory_pb2.SEARCH_MODE_SEMANTIC,
}


def not_in_project(kind: str, item_id: int, project_id: int) -> NexusNotFound:
    """A resource of another project: answered as one that does not exist here."""
    return NexusNotFound(
        grpc.StatusCode.NOT_FOUND, f"{kind} {item_id} is not in project {project_id}"
    )


def _empty_reason(answer: Message) -> str:
    """Why the server says a (unary) answer is empty: its x-nexus-empty-reason,
    on the client's view of the answer."""
    return getattr(answer, "empty_reason", None) or ""


def _only(*fields: str) -> FieldMask:
    """GetProjectStats's read_mask: count only these."""
    return FieldMask(paths=list(fields))


# The project list ---------------------------------------------------------


async def index(client: NexusClient, params: Params) -> dict[str, Any]:
    token = text(params, "page_token")
    page = await client.list_projects(page_size=PROJECTS_PER_PAGE, page_token=token)
    stats = await asyncio.gather(
        *(client.get_project_stats(project_id=p.id) for p in page.projects)
    )
    projects = []
    for project, counted in zip(page.projects, stats, strict=True):
        row = page_data.plain(project)
        row["stats"] = page_data.plain(counted)
        projects.append(row)
    return {"projects": projects, "next_page_token": page.next_page_token}


# A project's timeline -----------------------------------------------------


def _timeline(episodes: list[Message]) -> list[dict[str, Any]]:
    rows = page_data.plain_all(episodes)
    rows.sort(key=lambda e: (e["occur_time"] or "", e["id"]))
    return rows


async def project(client: NexusClient, project_id: int, params: Params) -> dict[str, Any]:
    session_id = positive_id(params, "session_id")
    token = text(params, "page_token")
    # The project's counts are the project list's: counting 100,000 episodes
    # again here would double this page's time.
    found = await client.get_project(id=project_id)
    view: dict[str, Any] = {"project": page_data.plain(found)}
    if session_id:
        session = await client.get_session(id=session_id)
        if session.project_id != project_id:
            raise not_in_project("session", session_id, project_id)
        listed = await client.list_episodes(
            session_id=session_id, page_size=EPISODES_PER_PAGE, page_token=token
        )
        row = page_data.plain(session)
        row["episodes"] = _timeline(list(listed.episodes))
        row["next_episodes_token"] = listed.next_page_token
        view.update(session_id=session_id, sessions=[row], next_page_token="")
        return view
    sessions = await client.list_sessions(
        project_id=project_id, page_size=SESSIONS_PER_PAGE, page_token=token
    )
    each = await asyncio.gather(
        *(
            client.list_episodes(session_id=s.id, page_size=EPISODES_PER_SESSION)
            for s in sessions.sessions
        )
    )
    rows = []
    for session, listed in zip(sessions.sessions, each, strict=True):
        row = page_data.plain(session)
        row["episodes"] = _timeline(list(listed.episodes))
        row["next_episodes_token"] = listed.next_page_token
        rows.append(row)
    view.update(session_id=0, sessions=rows, next_page_token=sessions.next_page_token)
    return view


async def episode(client: NexusClient, project_id: int, episode_id: int) -> dict[str, Any]:
    found = await client.get_episode(id=episode_id)
    session, project = await asyncio.gather(
        client.get_session(id=found.session_id), client.get_project(id=project_id)
    )
    if session.project_id != project_id:
        raise not_in_project("episode", episode_id, project_id)
    return {
        "project_id": project_id,
        "project": page_data.plain(project),
        "episode": page_data.plain(found),
        "session": page_data.plain(session),
        "produced": await _produced(client, found, project_id, session.user_id),
    }


#: The end of each stage an episode's events record, by the state its job
#: ended in: what the replay waits for before it stops reading.
_RECORDED = {
    memory_pb2.JOB_STATE_DONE: graph_pb2.EXTRACTION_STATUS_DONE,
    memory_pb2.JOB_STATE_FAILED: graph_pb2.EXTRACTION_STATUS_FAILED,
}


async def _produced(
    client: NexusClient, found: memory_pb2.Episode, project_id: int, user_id: str
) -> dict[str, Any]:
    """What the episode produced, as its extraction events recorded it
    (WatchExtractions replayed for the episode): the entities and facts its
    extraction found, and what memory formation did with its candidates
    (a memory added, updated or superseded, or nothing and why). Formation's
    detail of a user the key may not act for is left out by the server.
    Without a formation record (events are not kept for ever), the memories
    formed from it are read from the memories themselves."""
    wanted = {
        stage: _RECORDED[state]
        for stage, state in (
            (graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION, found.extraction_state),
            (graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION, found.memory_state),
        )
        if state in _RECORDED
    }
    events: list[graph_pb2.ExtractionEvent] = []
    problem = ""
    if wanted:
        events, problem = await _replay(
            client, found.id, {int(k): int(v) for k, v in wanted.items()}
        )
    extraction = _last(events, graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION)
    formation = _last(events, graph_pb2.EXTRACTION_EVENT_STAGE_MEMORY_FORMATION)
    view: dict[str, Any] = {
        "extraction": _extraction_view(extraction) if extraction is not None else None,
        "formation": _formation_view(formation) if formation is not None else None,
        "formed": [],
        "problem": problem,
    }
    if formation is None and found.memory_state == memory_pb2.JOB_STATE_DONE:
        view["formed"] = await _formed_rows(client, project_id, user_id, found.id)
    return view


async def _replay(
    client: NexusClient, episode_id: int, wanted: dict[int, int]
) -> tuple[list[graph_pb2.ExtractionEvent], str]:
    """The episode's events, read until each stage it finished has its last
    event (a retried extraction has a failed one before); a record that is
    gone ends the read after REPLAY_SECONDS."""
    events: list[graph_pb2.ExtractionEvent] = []
    stream = client.watch_extractions(episode_id=episode_id)
    try:
        async with asyncio.timeout(REPLAY_SECONDS):
            async for event in stream:
                events.append(event)
                stage = event.stage or graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION
                if wanted.get(stage) == event.status:
                    del wanted[stage]
                if not wanted:
                    break
    except TimeoutError:
        pass
    except NexusClientError as exc:
        return events, f"{exc.code.name}: {exc.message}"
    finally:
        stream.cancel()
    return events, ""


def _last(events: list[graph_pb2.ExtractionEvent], stage: int) -> graph_pb2.ExtractionEvent | None:
    of_stage = [
        e for e in events if (e.stage or graph_pb2.EXTRACTION_EVENT_STAGE_EXTRACTION) == stage
    ]
    return of_stage[-1] if of_stage else None


def _extraction_view(event: graph_pb2.ExtractionEvent) -> dict[str, Any]:
    entities = page_data.plain_all(event.entities)
    names = {e["id"]: e["name"] for e in entities}
    facts = []
    for r in page_data.plain_all(event.relationships):
        r["from_name"] = names.get(r["from_id"], f"entity {r['from_id']}")
        r["to_name"] = names.get(r["to_id"], f"entity {r['to_id']}")
        facts.append(r)
    row = page_data.plain(event)
    return {
        "status": row["status"],
        "error": row["error"],
        "time": row["time"],
        "entities": entities,
        "facts": facts,
    }


def _formation_view(event: graph_pb2.ExtractionEvent) -> dict[str, Any]:
    row = page_data.plain(event)
    outcome = row["memory_formation"] or {"operations": [], "proposed": 0}
    return {
        "status": row["status"],
        "error": row["error"],
        "time": row["time"],
        "operations": outcome["operations"],
        "proposed": outcome["proposed"],
    }


async def _formed_rows(
    client: NexusClient, project_id: int, user_id: str, episode_id: int
) -> list[dict[str, Any]]:
    """The memories formed from the episode (its USER ones, of its session's
    user, and the project's), live or archived since."""
    out: list[dict[str, Any]] = []
    token = ""
    try:
        for _ in range(ARCHIVE_SCAN_PAGES):
            page = await client.list_memories(
                scope=_scope(project_id, user_id, True), page_size=1000, page_token=token
            )
            out += [_memory_row(m) for m in page.memories if m.source_episode_id == episode_id]
            token = page.next_page_token
            if not token:
                break
    except NexusClientError:
        return []  # memories this key may not read are not shown
    return out


async def episode_states(client: NexusClient, episode_ids: list[int]) -> list[dict[str, Any]]:
    """The three job states of each episode (those that still exist)."""

    async def one(episode_id: int) -> dict[str, Any] | None:
        try:
            return state_of(await client.get_episode(id=episode_id))
        except NexusNotFound:
            return None

    found = await asyncio.gather(*(one(i) for i in episode_ids))
    return [f for f in found if f is not None]


def state_of(found: memory_pb2.Episode) -> dict[str, Any]:
    row = page_data.plain(found)
    keys = ("id", "embedding_state", "embedding_error", "extraction_state", "extraction_error",
            "memory_state", "memory_error")  # fmt: skip
    return {k: row[k] for k in keys}


# Memories -----------------------------------------------------------------


def _scope(project_id: int, user_id: str, archived: bool) -> memory_pb2.MemoryScope:
    return memory_pb2.MemoryScope(project_id=project_id, user_id=user_id, include_archived=archived)


async def _archived(
    client: NexusClient, project_id: int, user_id: str, token: str
) -> tuple[list[memory_pb2.Memory], str]:
    """One page of the scope's ARCHIVE tier: the server lists every tier
    together, so read its pages until one page's worth is found."""
    found: list[memory_pb2.Memory] = []
    for _ in range(ARCHIVE_SCAN_PAGES):
        page = await client.list_memories(
            scope=_scope(project_id, user_id, True), page_size=MEMORIES_PER_PAGE, page_token=token
        )
        found += [m for m in page.memories if m.tier == memory_pb2.TIER_ARCHIVE]
        token = page.next_page_token
        if not token or len(found) >= MEMORIES_PER_PAGE:
            break
    return found, token


async def _formed_from(
    client: NexusClient, project_id: int, user_id: str, episode_ids: set[int], but: int
) -> dict[int, list[int]]:
    """The memories of the scope formed from each of ``episode_ids``: what
    superseded a memory archived by that episode's formation."""
    out: dict[int, list[int]] = {}
    token = ""
    for _ in range(ARCHIVE_SCAN_PAGES):
        page = await client.list_memories(
            scope=_scope(project_id, user_id, True), page_size=1000, page_token=token
        )
        for m in page.memories:
            if m.source_episode_id in episode_ids and m.id != but:
                out.setdefault(m.source_episode_id, []).append(m.id)
        token = page.next_page_token
        if not token:
            break
    return out


def _memory_row(memory: memory_pb2.Memory) -> dict[str, Any]:
    row = page_data.plain(memory)
    row["live"] = memory.tier != memory_pb2.TIER_ARCHIVE
    return row


async def memories(client: NexusClient, project_id: int, params: Params) -> dict[str, Any]:
    user_id = text(params, "user_id", limit=200)
    include_archived = flag(params, "include_archived")
    memory_id = positive_id(params, "memory_id")
    token, archived_token = text(params, "page_token"), text(params, "archived_token")
    found, stats, live = await asyncio.gather(
        client.get_project(id=project_id),
        client.get_project_stats(project_id=project_id, read_mask=_only("users", "user_count")),
        client.list_memories(
            scope=_scope(project_id, user_id, False),
            page_size=MEMORIES_PER_PAGE,
            page_token=token,
        ),
    )
    view: dict[str, Any] = {
        "project": page_data.plain(found),
        "empty_reason": "",
        "users": page_data.plain(stats)["users"],
        "user_count": stats.user_count,
        "user_id": user_id,
        "include_archived": include_archived,
        "memories": [_memory_row(m) for m in live.memories],
        "next_page_token": live.next_page_token,
        "archived": [],
        "next_archived_token": "",
        "selected": None,
    }
    if not live.memories and not token:
        # The server's word on why (x-nexus-empty-reason): nothing stored,
        # formation off, exchanges still waiting...
        view["empty_reason"] = _empty_reason(live)
    if include_archived:
        archived, next_archived = await _archived(client, project_id, user_id, archived_token)
        view["archived"] = [_memory_row(m) for m in archived]
        view["next_archived_token"] = next_archived
    if memory_id:
        view["selected"] = await _history(client, project_id, user_id, memory_id)
    said = {m["source_episode_id"] for m in view["memories"] + view["archived"]}
    if view["selected"]:
        said.add(view["selected"]["memory"]["source_episode_id"])
        said |= {r["episode_id"] for r in view["selected"]["revisions"]}
    view["episode_times"] = await _episode_times(client, said - {0})
    return view


async def _episode_times(client: NexusClient, episode_ids: set[int]) -> dict[int, str]:
    """When each episode happened (its occur_time): a memory formed today
    from a conversation of 2024 says both. A deleted episode has none."""

    async def one(episode_id: int) -> tuple[int, str | None]:
        try:
            found = await client.get_episode(id=episode_id)
        except NexusClientError:
            return episode_id, None
        return episode_id, page_data.rfc3339(found.occur_time)

    found = await asyncio.gather(*(one(i) for i in sorted(episode_ids)))
    return {i: when for i, when in found if when}


async def _history(
    client: NexusClient, project_id: int, user_id: str, memory_id: int
) -> dict[str, Any]:
    memory, history = await asyncio.gather(
        client.get_memory(id=memory_id, user_id=user_id),
        client.list_memory_history(memory_id=memory_id, user_id=user_id, page_size=HISTORY_PAGE),
    )
    if memory.project_id not in (0, project_id):
        raise not_in_project("memory", memory_id, project_id)
    revisions = page_data.plain_all(history.revisions)
    archived_by = {
        r["episode_id"] for r in revisions if r["episode_id"] and "tier" in r["changed_fields"]
    }
    successors = (
        await _formed_from(client, project_id, user_id, archived_by, memory_id)
        if archived_by
        else {}
    )
    for r in revisions:
        r["superseded_by"] = successors.get(r["episode_id"], []) if r["episode_id"] else []
    return {
        "memory": _memory_row(memory),
        "revisions": revisions,
        "more_revisions": bool(history.next_page_token),
    }


# The graph ----------------------------------------------------------------


def _depth(params: Params) -> int:
    raw = params.get("depth", "").strip() or "1"
    if raw not in ("1", "2", "3"):
        raise BadRequest("depth", f"must be 1, 2 or 3, got {raw[:40]!r}")
    return int(raw)


async def graph(client: NexusClient, project_id: int, params: Params) -> dict[str, Any]:
    """An entity's neighbourhood, or the project's hubs and their neighbours,
    now or as of a date: with each entity as it stood then (not drawn before
    its first fact; told apart when no fact of it held then), the slider's
    marks and range, and (``marks=1``) the layout: every entity and fact the
    drawing may show at any date, so that an entity stays where it is while
    the slider moves."""
    entity_id = positive_id(params, "entity_id")
    as_of = as_timestamp(params, "as_of")
    include_history = flag(params, "include_history")
    if as_of is not None and include_history:
        raise BadRequest(
            "include_history",
            "shows every interval, so it takes no as_of (the slider picks one date)",
        )
    depth = _depth(params)
    # The slider's marks and the layout (every date a fact began or ended,
    # every entity ever drawn) need every interval: a second walk. The
    # slider itself asks without them (marks=0): they do not move. A date
    # needs the walk too: when each entity's first fact began.
    marks = choice(params, "marks", ("1", "0"), "1") == "1"
    walk: dict[str, Any] = {"include_history": include_history}
    if as_of is not None:
        walk["as_of"] = as_of
    history_too = (marks or as_of is not None) and not include_history
    view: dict[str, Any] = {
        "entity": None,
        "aliases": [],
        "merges": [],
        "depth": depth,
        "include_history": include_history,
        "as_of": page_data.rfc3339(as_of) if as_of else None,
        "empty": False,
        "empty_reason": "",
        "colours": page_data.TYPE_COLOURS,
    }
    if entity_id:
        found, seeds, drawn, every = await _around_entity(
            client, project_id, entity_id, depth, walk, history_too, view
        )
    else:
        found, seeds, drawn, every = await _around_hubs(client, project_id, walk, history_too, view)
    if include_history:
        every = drawn
    view["project"] = page_data.plain(found)
    first_facts = page_data.first_fact_times(every.edges)
    view.update(
        page_data.capped_graph(
            list(drawn.nodes),
            list(drawn.edges),
            seeds,
            history=include_history,
            known_at=view["as_of"],
            first_facts=first_facts,
        )
    )
    times = page_data.fact_times(every.edges)
    view["slider"] = page_data.slider_range(times, page_data.to_rfc3339(_now()))
    view["layout"] = None
    if marks:
        view["layout"] = page_data.layout_graph(list(every.nodes), list(every.edges), seeds)
    return view


async def _nothing() -> graph_pb2.Subgraph:
    return graph_pb2.Subgraph()


async def _around_entity(
    client: NexusClient,
    project_id: int,
    entity_id: int,
    depth: int,
    walk: dict[str, Any],
    history_too: bool,
    view: dict[str, Any],
) -> tuple[Any, list[int], graph_pb2.Subgraph, graph_pb2.Subgraph]:
    """The project, the seeds, and the entity's neighbourhood as drawn and with
    every interval; the entity, its aliases and merges go into ``view``."""
    found, entity, drawn, every, aliases, merges = await asyncio.gather(
        client.get_project(id=project_id),
        client.get_entity(id=entity_id),
        client.get_neighborhood(entity_id=entity_id, depth=depth, **walk),
        client.get_neighborhood(entity_id=entity_id, depth=depth, include_history=True)
        if history_too
        else _nothing(),
        client.list_entity_aliases(entity_id=entity_id, page_size=100),
        client.list_merges(entity_id=entity_id, page_size=100),
    )
    if entity.project_id != project_id:
        raise not_in_project("entity", entity_id, project_id)
    view["entity"] = page_data.plain(entity)
    view["aliases"] = page_data.plain_all(aliases.aliases)
    view["merges"] = page_data.plain_all(merges.merges)
    return found, [entity_id], drawn, every


async def _around_hubs(
    client: NexusClient,
    project_id: int,
    walk: dict[str, Any],
    history_too: bool,
    view: dict[str, Any],
) -> tuple[Any, list[int], graph_pb2.Subgraph, graph_pb2.Subgraph]:
    """The project, its hubs (the seeds) and their neighbours as drawn and
    with every interval; with no hub, why the graph is empty goes into ``view``."""
    found, stats = await asyncio.gather(
        client.get_project(id=project_id),
        client.get_project_stats(
            project_id=project_id, top_entities=GRAPH_SEEDS, read_mask=_only("top_entity_ids")
        ),
    )
    seeds = list(stats.top_entity_ids)
    if not seeds:
        # Nothing to draw: the server says why (nothing stored, exchanges
        # waiting for extraction, no LLM...).
        listed = await client.list_entities(project_id=project_id, page_size=1)
        view["empty"] = True
        view["empty_reason"] = _empty_reason(listed)
        return found, seeds, graph_pb2.Subgraph(), graph_pb2.Subgraph()
    drawn, every = await asyncio.gather(
        client.get_neighbors(entity_ids=seeds, **walk),
        client.get_neighbors(entity_ids=seeds, include_history=True) if history_too else _nothing(),
    )
    return found, seeds, drawn, every


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# Search -------------------------------------------------------------------


async def search(client: NexusClient, project_id: int, params: Params) -> dict[str, Any]:
    query = text(params, "q")
    mode = choice(params, "mode", MODES, "hybrid")
    kind = choice(params, "kind", SEARCH_KINDS, "episodes")
    user_id = text(params, "user_id", limit=200)
    found = await client.get_project(id=project_id)
    view: dict[str, Any] = {
        "project": page_data.plain(found),
        "q": query,
        "mode": mode,
        "kind": kind,
        "user_id": user_id,
        "hits": [],
        "empty_reason": "",
        "degraded_reason": "",
        "stages": [],
        "stage_notes": {},
    }
    if not query:
        return view
    stream: ServerStream[Any]
    # explain: each hit says its rank and score at every stage (keyword,
    # semantic, fused, reranked...), the playground's columns.
    if kind == "episodes":
        stream = client.search_episodes(
            query=query, project_id=project_id, mode=_MODE_VALUES[mode], limit=SEARCH_LIMIT,
            explain=True,
        )  # fmt: skip
    elif kind == "memories":
        stream = client.search_memories(
            query=query, scope=_scope(project_id, user_id, False), mode=_MODE_VALUES[mode],
            limit=SEARCH_LIMIT, explain=True,
        )  # fmt: skip
    else:
        if mode != "hybrid":
            raise BadRequest("mode", "entity search has one mode (names and meaning together)")
        stream = client.search_entities(
            query=query, project_id=project_id, limit=SEARCH_LIMIT, explain=True
        )
    hits = [page_data.plain(found_hit) async for found_hit in stream]
    stages: list[str] = []
    for rank, hit in enumerate(hits, 1):
        hit["rank"] = rank
        explanation = hit.get("explanation") or {}
        for stage in explanation.get("stages", []):
            if stage["stage"] not in stages:
                stages.append(stage["stage"])
        hit["stage_scores"] = {s["stage"]: s for s in explanation.get("stages", [])}
    view["hits"] = hits
    if not hits:
        view["empty_reason"] = stream.empty_reason or ""
    view["stages"] = stages
    view["stage_notes"] = _notes_every_hit_shares(hits, stages)
    view["degraded_reason"] = next(
        (h["degraded_reason"] for h in hits if h["degraded_reason"]), stream.degraded_reason or ""
    )
    return view


def _notes_every_hit_shares(hits: list[dict[str, Any]], stages: list[str]) -> dict[str, str]:
    """Per stage that ranked none of the hits, the note they all carry (a
    stage skipped, and why): the page shows it once, under the stage's name,
    rather than on every row."""
    shared: dict[str, str] = {}
    for stage in stages:
        scores = [h["stage_scores"].get(stage) or {} for h in hits]
        notes = {sc.get("note", "") for sc in scores}
        if len(notes) == 1 and "" not in notes and not any(sc.get("rank") for sc in scores):
            shared[stage] = notes.pop()
    return shared


# The service --------------------------------------------------------------


async def status(client: NexusClient, params: Params) -> dict[str, Any]:
    """GetServiceStatus, and GetUsage for the key's whole tenant over the
    window asked (``window=day``: the last 24 hours by hour, the default;
    ``week``: the last 7 days by day).  Any key reads its own tenant's usage
    (figures only, no content), so a refusal is the page's error as any
    other call's."""
    window = choice(params, "window", tuple(USAGE_WINDOWS), "day")
    bucket, count = USAGE_WINDOWS[window]
    seconds = _BUCKET_SECONDS[bucket]
    # Whole UTC buckets, the current one last (to its end, so a call made
    # this second is in it): 24 hours, 7 days.
    first = (int(_now().timestamp()) // seconds - (count - 1)) * seconds
    found, usage = await asyncio.gather(
        client.get_service_status(),
        client.get_usage(
            start_time=Timestamp(seconds=first),
            end_time=Timestamp(seconds=first + count * seconds),
            bucket=bucket,
        ),
    )
    view = page_data.plain(found)
    view["usage_window"] = window
    view["usage"] = page_data.plain(usage)
    return view
