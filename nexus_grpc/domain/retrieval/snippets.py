"""Snippets: the matching text of each keyword hit on the page, its words
wrapped in [ and ], read for the returned hits only (reading every
candidate's was a third of a hybrid search's SQLite time)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nexus_grpc.core.models import SearchSource
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain.retrieval.call import Call, Ranked
from nexus_grpc.domain.retrieval.pipeline import Engine, Stage

#: (match expression, ids) -> each id's snippet.
Snippets = Callable[[UnitOfWork, str, Sequence[int]], dict[int, str]]


class KeywordSnippets(Stage):
    reads = True

    def __init__(self, snippets: Snippets, match: Callable[[Call], str | None]) -> None:
        self.snippets = snippets
        self.match = match

    def apply(
        self, engine: Engine[Any], call: Call, ranked: Ranked, uow: UnitOfWork | None
    ) -> Ranked:
        assert uow is not None
        match = self.match(call)
        matched = [c.key for c in ranked if SearchSource.KEYWORD in c.sources]
        if match and matched:
            found = self.snippets(uow, match, matched)
            for c in ranked:
                c.snippet = found.get(c.key) or None
        return ranked
