"""The recall regression floor: one dev conversation (LoCoMo, shared/eval) stored
through a real ``nexus-grpc serve`` with its real embedder, then asked.

Floors sit a little under what this build reaches on conversation 26 (the
figures below, and docs/recall.md), so a ranking change that loses recall
fails here first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexus_grpc.evaluation.recall import evaluate
from tests.process import ServerProcess

DATA = Path(
    os.environ.get(
        "NEXUS_EVAL_DATA",
        Path(__file__).resolve().parents[3].parent / "shared" / "eval" / "locomo-dev" / "26.json",
    )
)
# What this build reaches on conversation 26 with the default embedder
# (MiniLM), likelihood fusion, session cohesion and the keyword lead, the same
# on every run of `nexus-grpc eval recall --data ../shared/eval/locomo-dev/26.json
# --modes keyword,semantic,default` against a fresh `nexus-grpc serve` (what this
# test does; docs/recall.md):
#
#   mode      R@1    R@5    R@10   (197 questions)
#   keyword   0.492  0.853  0.888
#   semantic  0.371  0.711  0.777
#   default   0.492  0.868  0.929
#
# The floors leave room for the few questions that tie-breaking and another
# CPU's int8 kernels move (about two at R@10, three at R@5).
DEFAULT_RECALL_AT_10_FLOOR = 0.92
DEFAULT_RECALL_AT_5_FLOOR = 0.85
# At rank 1 the default ties keyword alone (97 of 197 questions each): its first
# hit is keyword's unless the semantic list is confident, and which of two
# nearly equal hits comes first is exactly what tie-breaking and int8 kernels
# move. So at k=1 "never below the best single signal" allows two questions of
# such noise, the same room the R@10 floor leaves; the fusion failure this
# check is for (a weak semantic list dragging keyword's top hits down) costs
# far more than two questions. At 5 and 10 the default leads by 3 and 8
# questions, and the check stays strict.
RANK_ONE_NOISE_QUESTIONS = 2


def _data() -> Path:
    if not DATA.exists():
        # Research data the project may not copy (shared/eval/README.md): a
        # runner without it skips this floor, and says so (.ci/run warns, and
        # make test lists every skip with its reason).
        pytest.skip(f"LoCoMo dev data not found at {DATA} (set NEXUS_EVAL_DATA)")
    return DATA


@pytest.mark.timeout(240)
async def test_default_search_keeps_its_recall_floor_on_a_dev_conversation(tmp_path):
    data = _data()
    server = ServerProcess(tmp_path / "data").start()
    try:
        report = await evaluate(
            server.target,
            [str(data)],
            modes=("keyword", "semantic", "default"),
            progress_out=None,
        )
    finally:
        server.terminate()
    modes = report["modes"]
    default = modes["default"]
    assert report["questions"] > 150
    assert default["recall@10"] >= DEFAULT_RECALL_AT_10_FLOOR, modes
    assert default["recall@5"] >= DEFAULT_RECALL_AT_5_FLOOR, modes
    # Fusion never ranks below the best single signal it fuses, at any k (at
    # k=1, within the noise of two questions: see RANK_ONE_NOISE_QUESTIONS).
    for k in (1, 5, 10):
        best_single = max(modes["keyword"][f"recall@{k}"], modes["semantic"][f"recall@{k}"])
        room = RANK_ONE_NOISE_QUESTIONS / report["questions"] if k == 1 else 0.0
        assert default[f"recall@{k}"] >= best_single - room, (k, modes)
