"""The graph evaluation's arithmetic: pure functions over what the service
answered, so the scores can be checked on cases small enough to work out by
hand (tests/e2e/service/test_graph_eval.py).

Entity resolution is scored over mention items, each an (episode, extracted
mention) pair with a gold cluster (the expected entity it names) and a
predicted one (the entity the service keeps it in):

- B-cubed: for each item, precision is the share of its predicted entity's
  items that are in its gold cluster, recall the share of its gold cluster's
  items that are in its predicted entity; each is averaged over the items and
  F1 is their harmonic mean;
- duplicate entities: over gold clusters, the distinct predicted entities
  holding its items, less one;
- false merges: over predicted entities, the distinct gold clusters among
  its items, less one.

An item the service did not keep (the model did not extract it, or it cannot
be told apart in the episode's answer) has no predicted entity: it is left
out of these and counted on its own (``located`` against ``mentions``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

It = TypeVar("It", bound=Hashable)  # an item
G = TypeVar("G", bound=Hashable)  # a gold cluster
P = TypeVar("P", bound=Hashable)  # a predicted entity

# Dropped from the front of a name when matching a mention to the service's
# aliases, as the service stores a person's alias without it ("Dr. Raman" is
# kept as "Raman"). The matching is the evaluation's own, not the service's:
# it only has to find, among the few entities one episode named, the one a
# surface name went to.
_TITLES = frozenset(
    {"dr", "mr", "mrs", "ms", "miss", "mx", "prof", "professor", "sir", "dame", "rev", "fr"}
)
_POSSESSIVE = re.compile(r"(?:['’‘`]s|(?<=s)['’‘`])$")
_JOINERS = re.compile(r"['’‘`.]")
_SEPARATORS = re.compile(r"[^\w]+|_")


def fold(name: str) -> str:
    """A surface name folded for matching: case, accents, spacing,
    punctuation, a trailing possessive and a leading title aside."""
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = _POSSESSIVE.sub("", text)
    words = _SEPARATORS.sub(" ", _JOINERS.sub("", text)).split()
    if len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    return " ".join(words)


@dataclass(frozen=True)
class SeenEntity:
    """An entity as an extraction event showed it."""

    id: int
    name: str
    type: str
    aliases: tuple[str, ...] = ()

    def folded(self) -> frozenset[str]:
        return frozenset(fold(n) for n in (self.name, *self.aliases))


FOUND, MISSING, AMBIGUOUS = "found", "missing", "ambiguous"


def locate(name: str, etype: str, entities: Sequence[SeenEntity]) -> tuple[int | None, str]:
    """Which of an episode's entities holds the mention ``name``: the one
    carrying it as a name or alias (of its type, when several do; then the
    one whose own name it is). (None, MISSING) when none does,
    (None, AMBIGUOUS) when that leaves several."""
    key = fold(name)
    hits = [e for e in entities if key in e.folded()]
    if len(hits) > 1:
        hits = [e for e in hits if e.type == etype] or hits
    if len(hits) > 1:
        hits = [e for e in hits if fold(e.name) == key] or hits
    if not hits:
        return None, MISSING
    if len(hits) > 1:
        return None, AMBIGUOUS
    return hits[0].id, FOUND


def follow(entity_id: int, merged_into: Mapping[int, int]) -> int:
    """The entity an id ends up in after the merges (source -> target) made since."""
    seen = {entity_id}
    while entity_id in merged_into:
        entity_id = merged_into[entity_id]
        if entity_id in seen:  # a cycle cannot come from live merges; stop rather than spin
            break
        seen.add(entity_id)
    return entity_id


def _members(assignment: Mapping[It, G]) -> dict[G, set[It]]:
    out: dict[G, set[It]] = {}
    for item, cluster in assignment.items():
        out.setdefault(cluster, set()).add(item)
    return out


def scored_items(
    gold: Mapping[It, G], predicted: Mapping[It, P]
) -> tuple[dict[It, G], dict[It, P]]:
    """The items both sides have (those the service kept)."""
    items = [i for i in gold if i in predicted]
    return {i: gold[i] for i in items}, {i: predicted[i] for i in items}


@dataclass(frozen=True)
class BCubed:
    precision: float
    recall: float
    f1: float
    items: int


def bcubed(gold: Mapping[It, G], predicted: Mapping[It, P]) -> BCubed:
    """B-cubed precision, recall and F1 of ``predicted`` against ``gold``
    (item -> cluster each), over the items both have; 1.0 each with none."""
    kept, held = scored_items(gold, predicted)
    if not kept:
        return BCubed(1.0, 1.0, 1.0, 0)
    gold_members, predicted_members = _members(kept), _members(held)
    p = r = 0.0
    for item, cluster in kept.items():
        mine = predicted_members[held[item]]
        theirs = gold_members[cluster]
        both = len(mine & theirs)
        p += both / len(mine)
        r += both / len(theirs)
    precision, recall = p / len(kept), r / len(kept)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BCubed(precision, recall, f1, len(kept))


def split_clusters(gold: Mapping[It, G], predicted: Mapping[It, P]) -> dict[G, set[P]]:
    """Gold clusters kept in more than one entity: cluster -> the entities."""
    kept, held = scored_items(gold, predicted)
    out: dict[G, set[P]] = {}
    for item, cluster in kept.items():
        out.setdefault(cluster, set()).add(held[item])
    return {c: ids for c, ids in out.items() if len(ids) > 1}


def merged_entities(gold: Mapping[It, G], predicted: Mapping[It, P]) -> dict[P, set[G]]:
    """Entities holding more than one gold cluster: entity -> the clusters."""
    return split_clusters(predicted, gold)


def duplicate_entities(gold: Mapping[It, G], predicted: Mapping[It, P]) -> int:
    return sum(len(ids) - 1 for ids in split_clusters(gold, predicted).values())


def false_merges(gold: Mapping[It, G], predicted: Mapping[It, P]) -> int:
    return sum(len(keys) - 1 for keys in merged_entities(gold, predicted).values())


def majority(gold: Mapping[It, str], predicted: Mapping[It, P]) -> dict[P, str]:
    """Entity -> the gold cluster most of its items are in (ties: the first
    key in order), so the service's facts can be read in gold keys."""
    votes: dict[P, Counter[str]] = {}
    kept, held = scored_items(gold, predicted)
    for item, cluster in kept.items():
        votes.setdefault(held[item], Counter())[cluster] += 1
    return {entity: min(counts, key=lambda k: (-counts[k], k)) for entity, counts in votes.items()}


@dataclass(frozen=True)
class Mismatch:
    """A (subject, label) whose objects differ: what was expected and what the service had."""

    subject: str
    label: str
    expected: tuple[str, ...]
    actual: tuple[str, ...]
    time: float | None = None


def compare_groups(
    expected: Mapping[tuple[str, str], Iterable[str]],
    actual: Mapping[tuple[str, str], Iterable[str]],
) -> tuple[int, int, list[Mismatch]]:
    """Exact set match per (subject, label) over the groups either side has:
    (correct, groups, mismatches)."""
    groups = sorted(set(expected) | set(actual))
    wrong = []
    for subject, label in groups:
        want = frozenset(expected.get((subject, label), ()))
        got = frozenset(actual.get((subject, label), ()))
        if want != got:
            wrong.append(Mismatch(subject, label, tuple(sorted(want)), tuple(sorted(got))))
    return len(groups) - len(wrong), len(groups), wrong


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, 1.0 when there is nothing to count."""
    return numerator / denominator if denominator else 1.0


__all__ = [
    "AMBIGUOUS",
    "FOUND",
    "MISSING",
    "BCubed",
    "Mismatch",
    "SeenEntity",
    "bcubed",
    "compare_groups",
    "duplicate_entities",
    "false_merges",
    "fold",
    "follow",
    "locate",
    "majority",
    "merged_entities",
    "ratio",
    "split_clusters",
]
