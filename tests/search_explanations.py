"""What the search-honesty tests ask and read, through a real server:
``QUESTION`` (the newcomer's question of the README's project), ``indexed``
(waits until every index job is done) and ``note`` (what a hit's explanation
says of one stage). Not a test module: the honesty tests
(tests/e2e/service/test_search_honesty.py) and the explain reasons'
(test_search_explain_reasons.py) ask the same question and read the same
notes; the score-independence test (tests/e2e/api/test_score_independence.py)
waits for the index alike."""

from __future__ import annotations

from tests.support import Harness, wait_until

QUESTION = "which port is the database on"


async def indexed(h: Harness) -> None:
    """Every index job queued so far is done (a search sees what was written)."""

    async def idle() -> bool:
        pending = await h.app.db.read_sql(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM jobs WHERE kind LIKE 'index:%'"
                " AND state IN ('pending', 'running')"
            ).fetchone()[0]
        )
        return pending == 0

    await wait_until(idle, timeout=60)


def note(hit, stage: str) -> str:
    """What ``hit``'s explanation says of ``stage``."""
    return next(s.note for s in hit.explanation.stages if s.stage == stage)
