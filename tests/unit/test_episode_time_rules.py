"""A LoCoMo session date as an episode's occur_time (evaluation/recall.py's
``session_time``), the pure rule the recall evaluation's timed construction
dates its episodes by.

That the timed construction stores those times beside the README's (and
finds its evidence) is tests/e2e/service/test_episode_time.py's
``test_recall_eval_stores_the_timed_construction_beside_the_readme_one``.
"""

from __future__ import annotations

import pytest

from nexus_grpc.evaluation.eval_errors import EvalError
from nexus_grpc.evaluation.recall import session_time

# 8 May 2023, 13:56 UTC.
BASE = 1_683_554_160


def test_a_session_date_is_read_as_utc():
    assert session_time("1:56 pm on 8 May, 2023") == BASE
    assert session_time(" 1:56 pm on 8 May, 2023\n") == BASE
    assert session_time("10:37 am on 27 June, 2023") == BASE + 50 * 86_400 - 3 * 3600 - 19 * 60


def test_a_date_of_another_form_is_refused_naming_the_form():
    with pytest.raises(EvalError) as refused:
        session_time("2023-05-08 13:56")
    assert "'2023-05-08 13:56'" in str(refused.value)
    assert "'1:56 pm on 8 May, 2023'" in str(refused.value)
