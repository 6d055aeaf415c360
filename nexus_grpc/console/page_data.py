"""What a page shows, as plain data: the JSON twin, and what its template renders.

Messages become dicts field by field from their descriptors, so a field the
server gains (the explain issue's ``explanation`` on a hit) appears in the
JSON twin without a change here.  Ids are numbers (not proto3 JSON's
strings), times RFC 3339 in UTC, enum values their short lower-case names
(``pending``, ``archive``), as a person and a script would write them.

The graph is capped here: a page never draws more than ``MAX_NODES``
entities, and says how many it left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

#: The most entities one graph drawing holds: a denser drawing is not read,
#: and on a busy 2-core machine cytoscape draws 100 in about 150 ms
#: (docs/benchmarks.md, bench/console_pages.py).
MAX_NODES = 100
#: Each entity type's colour in the drawing and its legend (the types
#: extraction gives; any other type is drawn in OTHER_COLOUR).
TYPE_COLOURS = {
    "person": "#2557d6",
    "place": "#147a3d",
    "organization": "#a15c07",
    "project": "#7a2ec2",
    "technology": "#0e7490",
    "concept": "#667085",
}
OTHER_COLOUR = "#98a2b3"
#: Room left on the slider before the first fact and after the last: a
#: share of their span, and at least a day.
SLIDER_MARGIN = 0.05
DAY = timedelta(days=1)

_ENUM_PREFIXES: dict[str, str] = {}


def _enum_prefix(enum: EnumDescriptor) -> str:
    prefix = _ENUM_PREFIXES.get(enum.full_name)
    if prefix is None:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"
        _ENUM_PREFIXES[enum.full_name] = prefix
    return prefix


def enum_name(enum: EnumDescriptor, number: int) -> str:
    """``JOB_STATE_PENDING`` as ``pending``; an unknown number as itself."""
    value = enum.values_by_number.get(number)
    if value is None:
        return str(number)
    return value.name.removeprefix(_enum_prefix(enum)).lower()


def rfc3339(ts: Timestamp) -> str | None:
    if not ts.seconds and not ts.nanos:
        return None
    return to_rfc3339(ts.ToDatetime(tzinfo=UTC))


def to_rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _value(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        message_type = field.message_type
        if message_type.full_name == "google.protobuf.Timestamp":
            return rfc3339(value)
        if message_type.full_name == "google.protobuf.Duration":
            return value.seconds + value.nanos / 1e9 if (value.seconds or value.nanos) else None
        if message_type.full_name in ("google.protobuf.Struct", "google.protobuf.Value"):
            return MessageToDict(value)
        return plain(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return enum_name(field.enum_type, value)
    return value


def _repeated(field: Any) -> bool:
    # protobuf 6 has both; 7 dropped ``label``.
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _map_entry(field: Any) -> Any:
    """A map field's entry type (its ``value`` field says the values' type), or None."""
    message_type = field.message_type
    if message_type is not None and message_type.GetOptions().map_entry:
        return message_type
    return None


def plain(message: Message) -> dict[str, Any]:
    """Every field of ``message`` (defaults included), as plain JSON values;
    a map (StageUsage's ``outcomes``) as an object, by key."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = _map_entry(field)
        if entry is not None:
            of = entry.fields_by_name["value"]
            out[field.name] = {k: _value(of, value[k]) for k in sorted(value)}
        elif _repeated(field):
            out[field.name] = [_value(field, v) for v in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _value(field, value)
    return out


def plain_all(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [plain(m) for m in messages]


def short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, for a table cell."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def capped_graph(
    nodes: Sequence[Message],
    edges: Sequence[Message],
    seeds: Sequence[int],
    *,
    history: bool = False,
    known_at: str | None = None,
    first_facts: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """The subgraph as nodes and edges, at most MAX_NODES of them: the seeds
    first (the entity asked about, or the most connected ones), then the
    best connected of the rest. Edges whose ends were left out go too.

    As of a date (``known_at``), an entity whose first fact (``first_facts``:
    when each entity's earliest fact began) came later is not there yet. Each
    node says whether a fact of it is drawn (``held``: false for one with no
    fact at that date, or now), when its first fact began, and its ring:
    hops from the nearest seed, for a layout around the entity asked about.
    Each edge says whether it holds now (``current``) and whether the
    drawing shows it as ended (``ended``: only where every interval is
    drawn; a fact drawn as of a date held then)."""
    firsts = first_facts or {}
    if known_at is not None:
        nodes = [n for n in nodes if firsts.get(n.id, known_at) <= known_at]  # type: ignore[attr-defined]
    by_id = {n.id: n for n in nodes}  # type: ignore[attr-defined]
    edges = [e for e in edges if e.from_id in by_id and e.to_id in by_id]  # type: ignore[attr-defined]
    degree = _degrees(edges)
    kept_ids = _kept(by_id, degree, seeds)
    kept = set(kept_ids)
    kept_edges = [e for e in edges if e.from_id in kept and e.to_id in kept]  # type: ignore[attr-defined]
    names = {i: by_id[i].name for i in kept}  # type: ignore[attr-defined]
    out_edges = []
    for e in kept_edges:
        edge = plain(e)
        edge["from_name"] = names[edge["from_id"]]
        edge["to_name"] = names[edge["to_id"]]
        edge["current"] = edge["invalid_time"] is None
        edge["ended"] = history and not edge["current"]
        out_edges.append(edge)
    rings = _rings(kept_ids, kept_edges, [i for i in seeds if i in kept])
    out_nodes = []
    for i in kept_ids:
        node = plain(by_id[i])
        node["degree"] = degree.get(i, 0)
        node["held"] = degree.get(i, 0) > 0
        node["first_fact"] = firsts.get(i)
        node["ring"] = rings.get(i, 0)
        out_nodes.append(node)
    return {
        "nodes": out_nodes,
        "edges": out_edges,
        "total_nodes": len(by_id),
        "total_edges": len(edges),
        "capped": len(by_id) > len(kept_ids),
        "max_nodes": MAX_NODES,
    }


def _degrees(edges: Iterable[Any]) -> dict[int, int]:
    degree: dict[int, int] = {}
    for e in edges:
        degree[e.from_id] = degree.get(e.from_id, 0) + 1
        degree[e.to_id] = degree.get(e.to_id, 0) + 1
    return degree


def _kept(by_id: Mapping[int, Any], degree: Mapping[int, int], seeds: Sequence[int]) -> list[int]:
    """The ids drawn: the seeds, then the best connected, MAX_NODES at most."""
    first = [i for i in dict.fromkeys(seeds) if i in by_id]
    rest = sorted((i for i in by_id if i not in set(first)), key=lambda i: (-degree.get(i, 0), i))
    return (first + rest)[:MAX_NODES]


def layout_graph(
    nodes: Sequence[Message], edges: Sequence[Message], seeds: Sequence[int]
) -> dict[str, Any]:
    """What the drawing lays out once: every entity it may show at any date
    (capped as a drawing is) and every fact between them, ended ones
    included, so that each entity keeps its place while the slider moves.
    Nodes as ``[id, ring, name, type]``, edges as ``[from, to]``."""
    by_id = {n.id: n for n in nodes}  # type: ignore[attr-defined]
    kept_ids = _kept(by_id, _degrees(edges), seeds)
    kept = set(kept_ids)
    pairs = sorted(
        {(e.from_id, e.to_id) for e in edges if e.from_id in kept and e.to_id in kept}  # type: ignore[attr-defined]
    )
    links = [_Link(f, t) for f, t in pairs]
    rings = _rings(kept_ids, links, [i for i in seeds if i in kept])
    return {
        "nodes": [[i, rings.get(i, 0), by_id[i].name, by_id[i].type] for i in kept_ids],  # type: ignore[attr-defined]
        "edges": [list(p) for p in pairs],
    }


@dataclass(frozen=True)
class _Link:
    from_id: int
    to_id: int


def _rings(ids: Sequence[int], edges: Sequence[Any], seeds: Sequence[int]) -> dict[int, int]:
    """Hops from the nearest seed (both directions); unreached nodes: one
    past the farthest."""
    links: dict[int, set[int]] = {i: set() for i in ids}
    for e in edges:
        links[e.from_id].add(e.to_id)
        links[e.to_id].add(e.from_id)
    ring = {s: 0 for s in seeds if s in links}
    frontier = list(ring)
    while frontier:
        following = []
        for node in frontier:
            for other in links[node]:
                if other not in ring:
                    ring[other] = ring[node] + 1
                    following.append(other)
        frontier = following
    farthest = max(ring.values(), default=0) + 1
    return {i: ring.get(i, farthest) for i in ids}


def fact_times(edges: Iterable[Message]) -> list[str]:
    """Every time a fact began or ended, oldest first: where the graph changes,
    so the time slider can mark them."""
    times: set[datetime] = set()
    for e in edges:
        for ts in (e.valid_time, e.invalid_time):  # type: ignore[attr-defined]
            if ts.seconds or ts.nanos:
                times.add(ts.ToDatetime(tzinfo=UTC))
    return [to_rfc3339(t) for t in sorted(times)]


def first_fact_times(edges: Iterable[Message]) -> dict[int, str]:
    """When each entity's earliest fact began (of ``edges``, every interval):
    the drawing as of an earlier date does not show it yet."""
    first: dict[int, datetime] = {}
    for e in edges:
        ts = e.valid_time if (e.valid_time.seconds or e.valid_time.nanos) else e.create_time  # type: ignore[attr-defined]
        if not ts.seconds and not ts.nanos:
            continue
        began = ts.ToDatetime(tzinfo=UTC)
        for i in (e.from_id, e.to_id):  # type: ignore[attr-defined]
            if i not in first or began < first[i]:
                first[i] = began
    return {i: to_rfc3339(t) for i, t in first.items()}


def slider_range(times: Sequence[str], now: str) -> dict[str, Any] | None:
    """The time slider over the facts' own span (their first and last
    change, with a margin), its right end being now: nothing changes after
    the last mark. None where no fact has a date: nothing to slide over."""
    if not times:
        return None
    first, last = (datetime.fromisoformat(t) for t in (times[0], times[-1]))
    margin = max(DAY, (last - first) * SLIDER_MARGIN)
    end = datetime.fromisoformat(now)
    low = first - margin
    high = min(end, last + margin)
    if high <= low:
        high = low + margin
    return {
        "min": to_rfc3339(low),
        "max": to_rfc3339(high),
        "now": now,
        "last": times[-1],
        "marks": list(times),
    }
