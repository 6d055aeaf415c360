"""Entity names: the key two spellings of one name share, and how alike two names are.

Pure functions, no I/O: entity resolution (domain/resolution_rules.py), the store's
alias index and its migration, and the graph evaluation all derive keys here, so "Dr. Priya
Raman's", "priya raman" and "PRIYA  RAMAN" meet on one key everywhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# Dropped from the front of a person's name: "Dr. Raman" is Raman.
PERSON_TITLES: frozenset[str] = frozenset(
    {"dr", "mr", "mrs", "ms", "miss", "mx", "prof", "professor", "sir", "dame", "rev", "fr"}
)
# Dropped from the end of an organization's name: "Acme Corp." is Acme. Only
# legal forms, never a word that tells two companies apart ("Acme Labs").
ORGANIZATION_SUFFIXES: frozenset[str] = frozenset(
    {"inc", "corp", "corporation", "ltd", "llc", "plc", "gmbh", "co", "company", "ag", "sa", "bv"}
)
# Types whose names are compositional, so a name that is part of another
# ("Priya" of "Priya Raman") may be the same thing. Places are not ("York",
# "New York"), nor technologies ("Java", "JavaScript" are two tokens apart anyway).
CONTAINMENT_TYPES: frozenset[str] = frozenset({"person"})
# Types a model mixes up for one thing: the same name under either is one
# entity when the names match exactly. Person, place and organization never mix.
_COMPATIBLE: dict[str, frozenset[str]] = {
    "technology": frozenset({"technology", "concept"}),
    "concept": frozenset({"concept", "technology"}),
}

_POSSESSIVE = re.compile(r"(?:['’‘`]s|(?<=[sS])['’‘`])$")
# Apostrophes and dots join what they sit in ("O'Brien", "Node.js"); any
# other punctuation separates words.
_JOINERS = re.compile(r"['’‘`.]")
_SEPARATORS = re.compile(r"[^\w]+|_")
_LEADING_TITLE = re.compile(r"^\s*(\w+)\.?\s+(?=\S)", re.UNICODE)


def compatible_types(etype: str) -> frozenset[str]:
    """The types whose entities may be this type's entity under the same name."""
    return _COMPATIBLE.get(etype, frozenset({etype}))


def _fold(text: str) -> str:
    """NFKC, case folded, diacritics removed: "Só Paulo" and "SO PAULO" agree."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))


def _words(text: str) -> list[str]:
    return _SEPARATORS.sub(" ", _JOINERS.sub("", text)).split()


def strip_possessive(name: str) -> str:
    """ "Priya's" -> "Priya", "James'" -> "James"."""
    return _POSSESSIVE.sub("", name.strip()).rstrip()


def display_form(name: str, etype: str) -> str:
    """The name as shown: spacing collapsed, a possessive and (for a person) a
    leading title dropped, case kept. "Dr. Priya Raman's" -> "Priya Raman"."""
    clean = " ".join(strip_possessive(unicodedata.normalize("NFKC", name)).split())
    if etype == "person":
        m = _LEADING_TITLE.match(clean)
        if m and _fold(m.group(1)) in PERSON_TITLES:
            clean = clean[m.end() :]
    return clean


def name_key(name: str, etype: str) -> str:
    """The matching key: two surface names with one key are one name.

    NFKC, case, whitespace, punctuation and diacritics folded; a trailing
    possessive dropped; for a person a leading title, for an organization a
    trailing legal form, for anything else a leading "the". A name that is
    nothing but such words keeps them ("The The").
    """
    words = _words(_fold(strip_possessive(unicodedata.normalize("NFKC", name))))
    if etype == "person":
        stripped = words[1:] if len(words) > 1 and words[0] in PERSON_TITLES else words
    elif etype == "organization":
        stripped = words[1:] if len(words) > 1 and words[0] == "the" else list(words)
        while len(stripped) > 1 and stripped[-1] in ORGANIZATION_SUFFIXES:
            stripped.pop()
    else:
        stripped = words[1:] if len(words) > 1 and words[0] == "the" else words
    # A name of punctuation alone still needs a key of its own.
    return " ".join(stripped) or " ".join(_fold(name).split())


def search_key(text: str) -> str:
    """A query phrase folded as names are, with no type-specific words dropped."""
    return " ".join(_words(_fold(text)))


def tokens(key: str) -> frozenset[str]:
    return frozenset(key.split())


# Common English diminutives and the names they stand for: "Kate" is part of
# no word of "Katherine Wu", so containment alone would not see it.
NICKNAMES: dict[str, frozenset[str]] = {
    short: frozenset(full.split())
    for short, full in {
        "kate": "katherine catherine kathryn kathleen", "katie": "katherine catherine kathleen",
        "bob": "robert", "rob": "robert", "bobby": "robert", "bill": "william",
        "will": "william", "liam": "william", "liz": "elizabeth", "beth": "elizabeth",
        "betty": "elizabeth", "jim": "james", "jimmy": "james", "mike": "michael",
        "mick": "michael", "dave": "david", "dan": "daniel", "danny": "daniel",
        "tom": "thomas", "tommy": "thomas", "chris": "christopher christina christine",
        "alex": "alexander alexandra alexis", "sam": "samuel samantha", "matt": "matthew",
        "nick": "nicholas nicolas", "tony": "anthony antonio", "andy": "andrew",
        "joe": "joseph", "jen": "jennifer", "jenny": "jennifer", "sue": "susan",
        "steve": "steven stephen", "ben": "benjamin", "ed": "edward", "ted": "edward theodore",
        "pat": "patrick patricia", "maggie": "margaret", "meg": "margaret",
        "peggy": "margaret", "abby": "abigail", "becky": "rebecca", "josh": "joshua",
        "greg": "gregory", "jon": "jonathan", "rick": "richard", "rich": "richard",
        "charlie": "charles", "fred": "frederick", "larry": "lawrence", "harry": "harold henry",
        "hank": "henry", "vicky": "victoria", "nate": "nathan nathaniel", "zach": "zachary",
        "gabe": "gabriel", "manny": "manuel", "pepe": "jose", "paco": "francisco",
        "sasha": "alexander alexandra", "misha": "mikhail", "dima": "dmitri dmitry",
    }.items()
}  # fmt: skip
# Words an acronym leaves out: "Swiss National Science Foundation" is SNSF.
_ACRONYM_SKIP = frozenset({"of", "for", "the", "and", "de", "du", "des", "la", "le", "&"})


def initials(key: str) -> str | None:
    """The acronym a name of two or more words makes ("snsf"), else None."""
    words = [w for w in key.split() if w not in _ACRONYM_SKIP]
    return "".join(w[0] for w in words) if len(words) >= 2 else None


def index_tokens(key: str) -> frozenset[str]:
    """What the store indexes a name's key by: its words, and its acronym
    marked "@" ("@snsf"), which a mention of the acronym looks up."""
    found = tokens(key)
    acronym = initials(key)
    return found | {f"@{acronym}"} if acronym else found


def acronym_lookup(key: str) -> str | None:
    """The index token a mention that may be an acronym ("SNSF", "ETH") looks up."""
    return f"@{key}" if " " not in key and 2 <= len(key) <= 6 and key.isalpha() else None


def prefixes(key: str) -> frozenset[str]:
    """The blocks near-duplicate search looks in: each word's first four
    characters (three for a word under six), so "postgres" and "postgresql"
    meet in "post"; words under three characters block nothing."""
    return frozenset(w[:4] if len(w) >= 6 else w[:3] for w in key.split() if len(w) >= 3)


def shingles(key: str, size: int = 3) -> frozenset[str]:
    """Character ``size``-grams of the key, padded so short names still have some."""
    padded = f" {key} "
    if len(padded) <= size:
        return frozenset({padded})
    return frozenset(padded[i : i + size] for i in range(len(padded) - size + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def display_rank(name: str) -> tuple[int, int, int]:
    """Larger is a better name to show: more words ("Priya Raman" over "Priya"),
    then capitalised over all lower case, then shorter (no trailing noise)."""
    words = name.split()
    cased = int(any(c.isupper() for c in name) and not name.isupper())
    return (len(words), cased, -len(name))


def best_display(names: Iterable[str]) -> str:
    return max(names, key=display_rank)
