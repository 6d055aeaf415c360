"""The graph evaluation's set format: scripted episodes and the graph a careful
reader would expect from them (docs/graph-eval.md describes every field).

A set file is JSON::

    {"projects": [{
        "name": "...", "single_valued_labels": ["lives_in", ...],   # optional
        "sessions": [{"name": "...", "episodes": [{
            "occur_time": "2024-03-01T09:00:00Z", "user": "...", "assistant": "...",
            "import": false,                                           # optional
            "extraction": {
                "entities": [{"name", "type", "notes", "is": "<gold key>"}],
                "relationships": [{"from", "to", "label", "notes"}],
                "ended": [{"from", "to", "label"}]}}]}],
        "expected": {
            "entities": [{"key", "name", "type", "aliases"}],
            "relationships": [{"from": "<key>", "label", "to": "<key>",
                               "valid_from": "<time>", "valid_to": "<time>" | null}],
            "as_of": [{"entity": "<key>", "label", "time", "expect": ["<key>", ...]}]}}]}

Loading validates everything the evaluation and the careful stand-in rely
on, and a mistake fails with the place it is at
(``set.json: projects[1].sessions[0].episodes[3].extraction.entities[2].is``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nexus_grpc.evaluation.eval_errors import DataError

# The six types the service keeps (an extraction of any other is dropped
# there, so a set that scripts one would measure nothing). Kept here, not
# imported: the evaluation is a client and never imports the server's code.
ENTITY_TYPES: tuple[str, ...] = (
    "person",
    "place",
    "project",
    "technology",
    "concept",
    "organization",
)
_LABEL = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")


@dataclass(frozen=True)
class Mention:
    """A name a careful reader extracts from an exchange, as written there."""

    name: str
    type: str
    notes: str | None
    #: The gold cluster: the key of the expected entity it names.
    key: str


@dataclass(frozen=True)
class ScriptedEdge:
    source: str
    target: str
    label: str
    notes: str | None = None


@dataclass(frozen=True)
class Episode:
    project: int  # index into GraphSet.projects
    session: int  # index into Project.sessions
    #: Where it is in the file, for messages: "set.json: projects[0]...".
    where: str
    occur_time: float  # epoch seconds
    user: str
    assistant: str
    imported: bool
    entities: tuple[Mention, ...]
    relationships: tuple[ScriptedEdge, ...]
    ended: tuple[ScriptedEdge, ...]

    def extraction(self) -> dict[str, Any]:
        """What a careful model answers for this exchange: the scripted
        extraction without the gold keys."""
        return {
            "entities": [{"name": m.name, "type": m.type, "notes": m.notes} for m in self.entities],
            "relationships": [
                {"from": r.source, "to": r.target, "label": r.label, "notes": r.notes}
                for r in self.relationships
            ],
            "ended": [{"from": r.source, "to": r.target, "label": r.label} for r in self.ended],
        }


@dataclass(frozen=True)
class Session:
    name: str
    episodes: tuple[Episode, ...]


@dataclass(frozen=True)
class ExpectedEntity:
    key: str
    name: str
    type: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class ExpectedFact:
    """(source, label, target) held over [valid_from, valid_to); valid_to
    None: it holds now."""

    source: str
    label: str
    target: str
    valid_from: float
    valid_to: float | None

    def holds_at(self, at: float) -> bool:
        return self.valid_from <= at and (self.valid_to is None or at < self.valid_to)


@dataclass(frozen=True)
class Probe:
    """What (entity, label) pointed at, at ``time``: the set's own probes
    and one in the middle of every expected interval."""

    entity: str
    label: str
    time: float
    expect: frozenset[str]
    origin: str  # "set" or "midpoint"


@dataclass(frozen=True)
class Project:
    name: str
    where: str
    single_valued_labels: tuple[str, ...] | None
    sessions: tuple[Session, ...]
    entities: Mapping[str, ExpectedEntity]
    facts: tuple[ExpectedFact, ...]
    probes: tuple[Probe, ...]

    def episodes(self) -> list[Episode]:
        return [e for s in self.sessions for e in s.episodes]

    def current(self) -> dict[tuple[str, str], frozenset[str]]:
        """(source key, label) -> the target keys that hold now."""
        out: dict[tuple[str, str], set[str]] = {}
        for f in self.facts:
            if f.valid_to is None:
                out.setdefault((f.source, f.label), set()).add(f.target)
        return {k: frozenset(v) for k, v in out.items()}

    def expected_at(self, entity: str, label: str, at: float) -> frozenset[str]:
        return _expected_at(self.facts, entity, label, at)


@dataclass(frozen=True)
class GraphSet:
    files: tuple[str, ...]
    projects: tuple[Project, ...]

    def episodes(self) -> list[Episode]:
        """Every episode, in file order: the order they are sent in."""
        return [e for p in self.projects for e in p.episodes()]


# Reading ---------------------------------------------------------------------------


class _At:
    """A place in a file, for messages."""

    def __init__(self, path: str, parts: tuple[str, ...] = ()) -> None:
        self.path = path
        self.parts = parts

    def __truediv__(self, part: str | int) -> _At:
        if isinstance(part, int):
            if not self.parts:
                return _At(self.path, (f"[{part}]",))
            return _At(self.path, (*self.parts[:-1], f"{self.parts[-1]}[{part}]"))
        return _At(self.path, (*self.parts, part))

    @property
    def place(self) -> str:
        return ".".join(self.parts) or "(top level)"

    def __str__(self) -> str:
        return f"{self.path}: {self.place}"

    def fail(self, problem: str) -> DataError:
        return DataError(f"{self}: {problem}")


def _obj(value: Any, at: _At) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise at.fail(f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, at: _At, *, empty: bool = True) -> Sequence[Any]:
    if not isinstance(value, list):
        raise at.fail(f"expected a list, got {type(value).__name__}")
    if not empty and not value:
        raise at.fail("must not be empty")
    return value


def _text(value: Any, at: _At) -> str:
    if not isinstance(value, str) or not value.strip():
        raise at.fail("expected non-empty text")
    return value


def _notes(value: Any, at: _At) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise at.fail("expected text or null")
    return value or None


def _known_keys(obj: Mapping[str, Any], at: _At, allowed: Iterable[str]) -> None:
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise at.fail(f"unknown field {extra[0]!r} (known: {', '.join(sorted(allowed))})")


def _required(obj: Mapping[str, Any], at: _At, name: str) -> Any:
    if name not in obj:
        raise at.fail(f"missing {name!r}")
    return obj[name]


def parse_time(value: Any, at: _At) -> float:
    """An ISO 8601 time with its offset ("2024-03-01T09:00:00Z") as epoch seconds."""
    if not isinstance(value, str):
        raise at.fail("expected an ISO 8601 time such as 2024-03-01T09:00:00Z")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise at.fail(f"{value!r} is not an ISO 8601 time such as 2024-03-01T09:00:00Z") from exc
    if parsed.tzinfo is None:
        raise at.fail(f"{value!r} has no offset; write it as UTC with Z, or +01:00")
    return parsed.timestamp()


def _label(value: Any, at: _At) -> str:
    label = _text(value, at)
    if not _LABEL.match(label):
        raise at.fail(f"{label!r} is not a snake_case label (lives_in, works_at)")
    return label


def _type(value: Any, at: _At) -> str:
    etype = _text(value, at)
    if etype not in ENTITY_TYPES:
        raise at.fail(f"{etype!r} is not one of {', '.join(ENTITY_TYPES)}")
    return etype


def _expected_entities(raw: Any, at: _At) -> dict[str, ExpectedEntity]:
    entities: dict[str, ExpectedEntity] = {}
    for i, item in enumerate(_list(raw, at, empty=False)):
        here = at / i
        obj = _obj(item, here)
        _known_keys(obj, here, ("key", "name", "type", "aliases"))
        key = _text(_required(obj, here, "key"), here / "key")
        if key in entities:
            raise (here / "key").fail(f"{key!r} is used twice")
        aliases = _list(obj.get("aliases", []), here / "aliases")
        entities[key] = ExpectedEntity(
            key,
            _text(_required(obj, here, "name"), here / "name"),
            _type(_required(obj, here, "type"), here / "type"),
            tuple(_text(a, here / "aliases" / j) for j, a in enumerate(aliases)),
        )
    return entities


def _key(value: Any, at: _At, entities: Mapping[str, ExpectedEntity], what: str) -> str:
    key = _text(value, at)
    if key not in entities:
        raise at.fail(f"{key!r} is not a key of {what}")
    return key


def _expected_facts(
    raw: Any, at: _At, entities: Mapping[str, ExpectedEntity], where_entities: str
) -> tuple[ExpectedFact, ...]:
    facts: list[ExpectedFact] = []
    for i, item in enumerate(_list(raw, at)):
        here = at / i
        obj = _obj(item, here)
        _known_keys(obj, here, ("from", "label", "to", "valid_from", "valid_to"))
        start = parse_time(_required(obj, here, "valid_from"), here / "valid_from")
        end_raw = _required(obj, here, "valid_to")
        end = None if end_raw is None else parse_time(end_raw, here / "valid_to")
        if end is not None and end <= start:
            raise (here / "valid_to").fail("must be after valid_from (or null: it holds now)")
        facts.append(
            ExpectedFact(
                _key(_required(obj, here, "from"), here / "from", entities, where_entities),
                _label(_required(obj, here, "label"), here / "label"),
                _key(_required(obj, here, "to"), here / "to", entities, where_entities),
                start,
                end,
            )
        )
    return tuple(facts)


def _edges(raw: Any, at: _At, *, notes: bool) -> tuple[ScriptedEdge, ...]:
    edges: list[ScriptedEdge] = []
    fields = ("from", "to", "label", "notes") if notes else ("from", "to", "label")
    for i, item in enumerate(_list(raw, at)):
        here = at / i
        obj = _obj(item, here)
        _known_keys(obj, here, fields)
        edges.append(
            ScriptedEdge(
                _text(_required(obj, here, "from"), here / "from"),
                _text(_required(obj, here, "to"), here / "to"),
                _label(_required(obj, here, "label"), here / "label"),
                _notes(obj.get("notes"), here / "notes") if notes else None,
            )
        )
    return tuple(edges)


def _episode(
    raw: Any,
    at: _At,
    project: int,
    session: int,
    entities: Mapping[str, ExpectedEntity],
    where_entities: str,
) -> Episode:
    obj = _obj(raw, at)
    _known_keys(obj, at, ("occur_time", "user", "assistant", "import", "extraction"))
    imported = obj.get("import", False)
    if not isinstance(imported, bool):
        raise (at / "import").fail("expected true or false")
    ex_at = at / "extraction"
    extraction = _obj(_required(obj, at, "extraction"), ex_at)
    _known_keys(extraction, ex_at, ("entities", "relationships", "ended"))
    mentions: list[Mention] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(_list(_required(extraction, ex_at, "entities"), ex_at / "entities")):
        here = ex_at / "entities" / i
        e = _obj(item, here)
        _known_keys(e, here, ("name", "type", "notes", "is"))
        name = _text(_required(e, here, "name"), here / "name")
        etype = _type(_required(e, here, "type"), here / "type")
        key = _key(_required(e, here, "is"), here / "is", entities, where_entities)
        if entities[key].type != etype:
            raise (here / "type").fail(
                f"{etype!r}, but {key!r} is a {entities[key].type} in {where_entities}"
            )
        # The service keeps one entity per name and type of an answer.
        if (name.lower(), etype) in seen:
            raise (here / "name").fail(f"{name!r} ({etype}) is listed twice in this extraction")
        seen.add((name.lower(), etype))
        mentions.append(Mention(name, etype, _notes(e.get("notes"), here / "notes"), key))
    names = {m.name.lower() for m in mentions}
    relationships = _edges(extraction.get("relationships", []), ex_at / "relationships", notes=True)
    for i, r in enumerate(relationships):
        for end, name in (("from", r.source), ("to", r.target)):
            if name.lower() not in names:
                # The service drops an edge whose end is not in the answer.
                raise (ex_at / "relationships" / i / end).fail(
                    f"{name!r} is not a name in this extraction's entities"
                )
    return Episode(
        project,
        session,
        str(at),
        parse_time(_required(obj, at, "occur_time"), at / "occur_time"),
        _text(_required(obj, at, "user"), at / "user"),
        _text(_required(obj, at, "assistant"), at / "assistant"),
        imported,
        tuple(mentions),
        relationships,
        _edges(extraction.get("ended", []), ex_at / "ended", notes=False),
    )


def _probes(
    raw: Any, at: _At, entities: Mapping[str, ExpectedEntity], where_entities: str
) -> list[tuple[str, str, float, frozenset[str]]]:
    probes = []
    for i, item in enumerate(_list(raw, at)):
        here = at / i
        obj = _obj(item, here)
        _known_keys(obj, here, ("entity", "label", "time", "expect"))
        expect = _list(_required(obj, here, "expect"), here / "expect")
        probes.append(
            (
                _key(_required(obj, here, "entity"), here / "entity", entities, where_entities),
                _label(_required(obj, here, "label"), here / "label"),
                parse_time(_required(obj, here, "time"), here / "time"),
                frozenset(
                    _key(k, here / "expect" / j, entities, where_entities)
                    for j, k in enumerate(expect)
                ),
            )
        )
    return probes


def midpoint_probes(facts: Sequence[ExpectedFact], horizon: float) -> list[Probe]:
    """A probe in the middle of every expected interval; an open one ends at
    ``horizon`` (a day after the project's last episode)."""
    out = []
    for f in facts:
        end = f.valid_to if f.valid_to is not None else max(horizon, f.valid_from + 86_400)
        out.append(Probe(f.source, f.label, (f.valid_from + end) / 2, frozenset(), "midpoint"))
    return out


def _project(raw: Any, at: _At, index: int) -> Project:
    obj = _obj(raw, at)
    _known_keys(obj, at, ("name", "description", "single_valued_labels", "sessions", "expected"))
    name = _text(_required(obj, at, "name"), at / "name")
    labels_raw = obj.get("single_valued_labels")
    labels = None
    if labels_raw is not None:
        labels = tuple(
            _label(x, at / "single_valued_labels" / i)
            for i, x in enumerate(_list(labels_raw, at / "single_valued_labels"))
        )
    exp_at = at / "expected"
    expected = _obj(_required(obj, at, "expected"), exp_at)
    _known_keys(expected, exp_at, ("entities", "relationships", "as_of"))
    where_entities = (exp_at / "entities").place
    entities = _expected_entities(_required(expected, exp_at, "entities"), exp_at / "entities")
    facts = _expected_facts(
        expected.get("relationships", []), exp_at / "relationships", entities, where_entities
    )
    sessions = []
    for s, raw_session in enumerate(
        _list(_required(obj, at, "sessions"), at / "sessions", empty=False)
    ):
        s_at = at / "sessions" / s
        session = _obj(raw_session, s_at)
        _known_keys(session, s_at, ("name", "episodes"))
        episodes = tuple(
            _episode(e, s_at / "episodes" / i, index, s, entities, where_entities)
            for i, e in enumerate(
                _list(_required(session, s_at, "episodes"), s_at / "episodes", empty=False)
            )
        )
        sessions.append(Session(str(session.get("name") or f"session {s + 1}"), episodes))
    horizon = max(e.occur_time for s in sessions for e in s.episodes) + 86_400
    probes = [
        Probe(entity, label, time, expect, "set")
        for entity, label, time, expect in _probes(
            expected.get("as_of", []), exp_at / "as_of", entities, where_entities
        )
    ]
    probes += [
        Probe(p.entity, p.label, p.time, _expected_at(facts, p.entity, p.label, p.time), p.origin)
        for p in midpoint_probes(facts, horizon)
    ]
    for i, p in enumerate(probes):
        if p.origin == "set" and p.expect != _expected_at(facts, p.entity, p.label, p.time):
            raise (exp_at / "as_of" / i / "expect").fail(
                f"{sorted(p.expect)} disagrees with expected.relationships, which hold"
                f" {sorted(_expected_at(facts, p.entity, p.label, p.time))} then"
            )
    return Project(name, str(at), labels, tuple(sessions), entities, facts, tuple(probes))


def _expected_at(
    facts: Sequence[ExpectedFact], entity: str, label: str, at: float
) -> frozenset[str]:
    return frozenset(
        f.target for f in facts if f.source == entity and f.label == label and f.holds_at(at)
    )


def load_file(path: str | Path, first_index: int = 0) -> list[Project]:
    """The projects of one set file; ``first_index`` is the index its first
    project gets in the whole set."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: {exc}") from exc
    at = _At(str(path))
    top = _obj(raw, at)
    _known_keys(top, at, ("description", "projects"))
    return [
        _project(p, at / "projects" / i, first_index + i)
        for i, p in enumerate(_list(_required(top, at, "projects"), at / "projects", empty=False))
    ]


def load(paths: Sequence[str | Path]) -> GraphSet:
    """Every project of every file, in order; each exchange's text must be
    unique in the whole set (the careful stand-in finds an episode by it)."""
    if not paths:
        raise DataError("no set file given")
    projects: list[Project] = []
    for path in paths:
        projects += load_file(path, len(projects))
    names: dict[str, str] = {}
    users: dict[str, str] = {}
    for p in projects:
        if p.name in names:
            raise DataError(f"{p.where}: project name {p.name!r} is also {names[p.name]}'s")
        names[p.name] = p.where
        for e in p.episodes():
            if e.user in users:
                raise DataError(f"{e.where}.user: the same text as {users[e.user]}'s")
            users[e.user] = e.where
    return GraphSet(tuple(str(p) for p in paths), tuple(projects))


__all__ = [
    "ENTITY_TYPES",
    "Episode",
    "ExpectedEntity",
    "ExpectedFact",
    "GraphSet",
    "Mention",
    "Probe",
    "Project",
    "ScriptedEdge",
    "Session",
    "DataError",
    "load",
    "load_file",
    "parse_time",
]
