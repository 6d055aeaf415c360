"""Entity resolution: which existing entity, if any, a name names.

A cascade, cheapest first, inside one graph and never across incompatible
types (core/names.compatible_types: "Jordan" the person is never "Jordan"
the place):

1. **Key.** The name's key (case, spacing, punctuation, diacritics, a title or
   possessive folded) is an entity's own key: that entity.
2. **Containment** (people only). The name is part of exactly one person's
   name ("Priya", "Dr. Raman" of "Priya Raman"), or exactly one person's
   name is part of it ("Priya Raman" when only "Priya" is known), or the key
   is an alias of exactly one: that person. Two or more ("Alex" with "Alex
   Kim" and "Alex Chen") is not guessed.
3. **Shingles.** Character-trigram Jaccard of the keys: at or above
   ``SHINGLE_MATCH`` (a different spelling of one name, "Kubernetes" and
   "Kubernets") for anything but a person, whose near-identical names are
   as often two people ("Alex Kim", "Alex King"); above ``SHINGLE_ASK`` it
   is a question for the LLM.
4. Otherwise it is new. The caller may still find near neighbours by vector
   (domain/entity_resolution.py) and ask the LLM about them.

Every step is deterministic and reads only the candidates the store found
through its alias and token indexes, so its cost follows the matches, not
the size of the graph. The thresholds are measured (docs/graph.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nexus_grpc.core.graph import (
    METHOD_CONTAINMENT,
    METHOD_EXACT,
    METHOD_SHINGLE,
    RESOLVED,
    CandidateRow,
)
from nexus_grpc.core.names import (
    CONTAINMENT_TYPES,
    NICKNAMES,
    acronym_lookup,
    compatible_types,
    initials,
    jaccard,
    name_key,
    prefixes,
    shingles,
    tokens,
)

# Measured on the name pairs of tests/unit/test_names_and_timeline.py and
# the graph evaluation's dev set (docs/graph.md): spelling variants of one
# name score 0.45-0.75, different names that look alike 0.27-0.58. The
# ranges overlap, so a score asks the LLM; only near-identity decides.
SHINGLE_MATCH = 0.85
SHINGLE_ASK = 0.45
# The most entities a word-prefix block may hold to be read: a prefix more
# share is too common to tell anything apart ("inte", "john"), and reading it
# would make a name's cost follow the graph's size.
BLOCK_LIMIT = 50


@dataclass(frozen=True)
class Mention:
    """A name extraction gave, with the type and notes it gave."""

    surface: str
    type: str
    notes: str | None = None

    @property
    def key(self) -> str:
        return name_key(self.surface, self.type)


@dataclass(frozen=True)
class Match:
    entity_id: int
    method: str
    score: float


@dataclass(frozen=True)
class Unsure:
    """Rules cannot tell which of these (if any) the name is."""

    candidates: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class Novel:
    """Nothing in the graph is it."""


Decision = Match | Unsure | Novel


def lookups(mentions: Iterable[Mention]) -> tuple[set[str], set[str]]:
    """The keys the store reads the first candidates by, and the index tokens:
    the name's words (a name may be part of another), the full names a
    diminutive stands for, and the acronym it may be."""
    keys: set[str] = set()
    words: set[str] = set()
    for m in mentions:
        key = m.key
        keys.add(key)
        words |= tokens(key)
        if m.type in CONTAINMENT_TYPES and key in NICKNAMES:
            words |= NICKNAMES[key]
        acronym = acronym_lookup(key)
        if acronym is not None:
            words.add(acronym)
    return keys, words


def blocks(m: Mention) -> frozenset[str]:
    """The word-prefix blocks the store reads near-duplicates of ``m`` from."""
    return prefixes(m.key)


Nearby = Callable[[Mention], Iterable[CandidateRow]]


class Resolver:
    """Decides mentions against a set of candidate entities; ``add`` makes
    an entity created meanwhile (earlier in the same episode) a candidate.

    The candidates a name's key and words reach are read up front; its
    near-duplicate blocks only when those found nothing (``nearby``), since
    most names are settled before that step and a block reads the most.
    """

    def __init__(self, candidates: Iterable[CandidateRow], nearby: Nearby | None = None) -> None:
        self._rows: dict[int, CandidateRow] = {}
        # (entity id, words compared) -> shingles: computed once per resolver.
        self._shingled: dict[tuple[int, int], list[frozenset[str]]] = {}
        self._nearby = nearby
        for row in candidates:
            self.add(row)

    def add(self, row: CandidateRow) -> None:
        self._rows[row.id] = row
        self._shingled = {k: v for k, v in self._shingled.items() if k[0] != row.id}

    def row(self, entity_id: int) -> CandidateRow | None:
        return self._rows.get(entity_id)

    def decide(self, m: Mention) -> Decision:
        key = m.key
        types = compatible_types(m.type)
        pool = [r for r in self._rows.values() if r.type in types]
        own = sorted((r for r in pool if r.name_key == key), key=lambda r: (r.type != m.type, r.id))
        if own and own[0].resolution == RESOLVED:
            return Match(own[0].id, METHOD_EXACT, 1.0)
        exact = own + [r for r in pool if key in r.keys and r not in own]
        if m.type not in CONTAINMENT_TYPES and not exact:
            # A thing's name part of another's ("ETH", "ETH Zurich"), or its
            # acronym ("SNSF"): as often another thing ("Google", "Google
            # Cloud"), so a question, never an answer.
            related = self._related(key, pool)
            if related:
                names = ", ".join(repr(self._rows[i].name) for i in related[:5])
                return Unsure(tuple(related[:5]), f"{m.surface!r} may be part of {names}")
        contained = self._containment(key, m.type, pool)
        found = list(dict.fromkeys(r.id for r in [*exact, *contained]))
        if len(found) == 1:
            only = self._rows[found[0]]
            if only in exact:
                return Match(only.id, METHOD_EXACT, 1.0)
            return Match(only.id, METHOD_CONTAINMENT, _containment_score(key, only.name_key))
        if found:
            names = ", ".join(repr(self._rows[i].name) for i in found[:5])
            return Unsure(tuple(found), f"{m.surface!r} may be any of {names}")
        if self._nearby is not None:
            for row in self._nearby(m):
                self._rows.setdefault(row.id, row)
            pool = [r for r in self._rows.values() if r.type in types]
        return self._shingles(key, m, pool)

    def _shingles_of(self, r: CandidateRow, words: int) -> list[frozenset[str]]:
        """The shingles a name of ``words`` words is compared with: each of
        the entity's keys, and for a person each run of that many words in
        them (a misspelt surname is near the surname, not the whole name)."""
        found = self._shingled.get((r.id, words))
        if found is None:
            keys = r.keys | {r.name_key}
            if words:
                keys = keys | {
                    " ".join(parts[i : i + words])
                    for k in keys
                    for parts in [k.split()]
                    for i in range(len(parts) - words + 1)
                }
            found = self._shingled[(r.id, words)] = [shingles(k) for k in keys]
        return found

    def _containment(self, key: str, etype: str, pool: list[CandidateRow]) -> list[CandidateRow]:
        """People whose name holds this one, or is held by it; a diminutive
        ("Kate") is held by the full names it stands for ("Katherine Wu")."""
        if etype not in CONTAINMENT_TYPES:
            return []
        mine = tokens(key)
        fuller = NICKNAMES.get(key, frozenset())
        found = []
        for r in pool:
            if r.type != etype:
                continue
            theirs = tokens(r.name_key)
            if mine < theirs or theirs < mine or (fuller and len(theirs) > 1 and fuller & theirs):
                found.append(r)
        return found

    def _related(self, key: str, pool: list[CandidateRow]) -> list[int]:
        mine = tokens(key)
        acronym = acronym_lookup(key)
        found = []
        for r in pool:
            for theirs in r.keys | {r.name_key}:
                words = tokens(theirs)
                if (mine < words) or (acronym and initials(theirs) == key):
                    found.append(r.id)
                    break
        return found

    def _shingles(self, key: str, m: Mention, pool: list[CandidateRow]) -> Decision:
        mine = shingles(key)
        words = len(key.split()) if m.type in CONTAINMENT_TYPES else 0
        scored = sorted(
            (
                (max(jaccard(mine, other) for other in self._shingles_of(r, words)), r.id)
                for r in pool
            ),
            reverse=True,
        )
        close = [(s, i) for s, i in scored if s >= SHINGLE_ASK]
        if not close:
            return Novel()
        best, best_id = close[0]
        runner_up = close[1][0] if len(close) > 1 else 0.0
        if (
            best >= SHINGLE_MATCH
            and runner_up < SHINGLE_MATCH
            and m.type not in CONTAINMENT_TYPES
            and self._rows[best_id].resolution == RESOLVED
        ):
            return Match(best_id, METHOD_SHINGLE, round(best, 3))
        names = ", ".join(f"{self._rows[i].name!r} ({s:.2f})" for s, i in close[:5])
        return Unsure(tuple(i for _, i in close[:5]), f"{m.surface!r} is spelled like {names}")


def _containment_score(a: str, b: str) -> float:
    ta, tb = tokens(a), tokens(b)
    return round(len(ta & tb) / max(len(ta | tb), 1), 3)
