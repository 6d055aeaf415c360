"""The wording of ``nexus-grpc usage``'s budget lines and of ``forget-user``'s
progress and receipt (nexus_grpc/ops/against_server/usage.py, forgetting.py),
from a TenantBudget or an Erasure built in place: the budget states and user
lines tests/unit/test_client_usage_table.py leaves out (which holds the
table, the header, --since and the first budget lines), the progress bar and
the receipt's counts; and, with a scripted client, how forget-user follows an
erasure to its receipt and what export-user writes. The commands against a
server are tests/e2e/client/test_usage_cli.py's and test_privacy_cli.py's."""

from __future__ import annotations

import io
import json

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.forgetting import (
    BAR,
    export_user,
    forget_user,
    progress_line,
    receipt_text,
)
from nexus_grpc.ops.against_server.usage import budget_lines

MIDNIGHT = 1_765_065_600  # 2025-12-07T00:00:00Z


def _budget(spent: int, per_day: int = 0, **kw) -> memory_pb2.TenantBudget:
    budget = memory_pb2.TenantBudget(llm_tokens_today=spent, llm_tokens_per_day=per_day, **kw)
    budget.resets_at.FromSeconds(MIDNIGHT)
    return budget


def test_a_users_key_without_a_daily_budget_is_told_its_users_spend():
    assert budget_lines(_budget(1234), mine=True) == [
        "today: 1,234 tokens spent by this key's users' work (no daily budget)"
    ]


def test_a_spent_budget_seen_by_a_users_key_counts_its_users_work():
    assert budget_lines(_budget(80, 100, exhausted=True), mine=True) == [
        "today: the budget of 100 tokens is spent (80 by this key's users' work);"
        " LLM work waits until it resets 2025-12-07 00:00 UTC"
    ]


def test_an_overspent_budget_has_nothing_left_not_a_negative():
    assert budget_lines(_budget(120, 100)) == [
        "today: 120 of 100 tokens spent, 0 left (resets 2025-12-07 00:00 UTC)"
    ]


def test_each_user_is_shown_against_the_share_or_alone_without_one():
    budget = _budget(300, 1000, llm_tokens_per_day_per_user=100)
    budget.users.add(user_id="ann", llm_tokens_today=100, exhausted=True)
    budget.users.add(user_id="bo", llm_tokens_today=130)
    assert budget_lines(budget)[1:] == [
        "  user 'ann': 100 of 100 tokens a user (spent: their LLM work waits)",
        "  user 'bo': 130 of 100 tokens a user (0 left)",
    ]
    budget.llm_tokens_per_day_per_user = 0
    assert budget_lines(budget)[1:] == ["  user 'ann': 100 tokens", "  user 'bo': 130 tokens"]


def _erasure(**kw) -> memory_pb2.Erasure:
    values = {"state": memory_pb2.ERASURE_STATE_RUNNING} | kw
    erasure = memory_pb2.Erasure(id=9, user_id="alice", tenant="acme", phase="episodes", **values)
    erasure.planned.episodes, erasure.planned.sessions, erasure.planned.memories = 6, 2, 2
    return erasure


def test_the_progress_bar_fills_with_what_went_of_what_was_found():
    erasure = _erasure()
    erasure.counts.episodes, erasure.counts.sessions = 3, 2
    line = progress_line(erasure)
    assert line == (
        f"[{'#' * 15}{'.' * (BAR - 15)}]  50% episodes  episodes 3/6, sessions 2/2, memories 0/2"
    )


def test_counts_past_the_plan_do_not_overfill_the_bar():
    erasure = _erasure()
    erasure.counts.episodes = 60  # more went than was found: a row written meanwhile
    assert progress_line(erasure).startswith(f"[{'#' * 18}{'.' * 12}]  60%")


def test_a_done_erasure_or_one_that_found_nothing_shows_a_full_bar():
    done = _erasure(state=memory_pb2.ERASURE_STATE_DONE)
    assert progress_line(done).startswith(f"[{'#' * BAR}] 100%")
    empty = memory_pb2.Erasure(phase="started")
    assert progress_line(empty).startswith(f"[{'#' * BAR}] 100% started")


def test_the_receipt_says_whose_erasure_where_and_only_the_counts_that_are_not_zero():
    erasure = _erasure(state=memory_pb2.ERASURE_STATE_DONE, project_id=4)
    erasure.start_time.FromSeconds(MIDNIGHT)
    erasure.counts.episodes, erasure.counts.memory_history = 6, 3
    assert receipt_text(erasure).splitlines() == [
        "erasure 9 of user 'alice' in tenant 'acme', project 4: done",
        "  started  2025-12-07T00:00:00Z",
        "  episodes               6",
        "  memory history         3",
    ]


def test_a_receipt_without_a_user_or_a_project_says_a_user_in_every_project():
    erasure = memory_pb2.Erasure(id=1, tenant="acme", state=memory_pb2.ERASURE_STATE_RUNNING)
    erasure.end_time.FromSeconds(MIDNIGHT)
    assert receipt_text(erasure).splitlines() == [
        "erasure 1 of a user in tenant 'acme', every project: running",
        "  finished 2025-12-07T00:00:00Z",
    ]


# ---- forget-user and export-user, with a scripted client ------------------------------------


class ScriptedErasures:
    """forget_user, watch_erasure and export_user answered from a script."""

    def __init__(self, started: memory_pb2.Erasure, watched: list[memory_pb2.Erasure]) -> None:
        self.started, self.watched = started, watched
        self.asked: list = []

    async def forget_user(self, **kw):
        self.asked.append(("forget_user", kw))
        return self.started

    async def watch_erasure(self, **kw):
        self.asked.append(("watch_erasure", kw))
        for erasure in self.watched:
            yield erasure

    async def export_user(self, **kw):
        self.asked.append(("export_user", kw))
        yield memory_pb2.ExportRecord(session=memory_pb2.Session(id=1, name="café"))
        yield memory_pb2.ExportRecord(episode=memory_pb2.Episode(id=2))
        yield memory_pb2.ExportRecord(episode=memory_pb2.Episode(id=3))


def _step(state: int, episodes: int) -> memory_pb2.Erasure:
    erasure = memory_pb2.Erasure(id=9, tenant="acme", state=state, phase="episodes")
    erasure.planned.episodes, erasure.counts.episodes = 2, episodes
    return erasure


async def test_forgetting_waits_for_the_receipt_showing_each_step_and_names_the_user():
    RUNNING, DONE = memory_pb2.ERASURE_STATE_RUNNING, memory_pb2.ERASURE_STATE_DONE
    client = ScriptedErasures(
        memory_pb2.Erasure(id=9, joined=True),
        [_step(RUNNING, 1), _step(DONE, 2), _step(RUNNING, 99)],  # nothing read past DONE
    )
    steps: list[str] = []
    out = io.StringIO()
    receipt = await forget_user(client, "alice", 4, out=out, progress=steps.append)  # type: ignore[arg-type]
    assert client.asked[0] == ("forget_user", {"user_id": "alice", "project_id": 4})
    assert steps[0] == "joined erasure 9, already running"
    assert [s.split("]")[1].split()[0] for s in steps[1:]] == ["50%", "100%"]
    assert receipt.user_id == "alice"  # a done receipt forgets the id; the caller named it
    assert out.getvalue().startswith(
        "erasure 9 of user 'alice' in tenant 'acme', every project: done\n"
    )


async def test_forgetting_without_waiting_prints_the_erasure_as_it_started_as_json():
    started = memory_pb2.Erasure(id=9, user_id="alice", state=memory_pb2.ERASURE_STATE_RUNNING)
    client = ScriptedErasures(started, [])
    out = io.StringIO()
    await forget_user(client, "alice", 0, wait=False, as_json=True, out=out)  # type: ignore[arg-type]
    assert [name for name, _ in client.asked] == ["forget_user"]
    assert json.loads(out.getvalue()) == {
        "id": "9", "user_id": "alice", "state": "ERASURE_STATE_RUNNING",
    }  # fmt: skip


async def test_a_users_export_is_one_json_line_a_record_counted_by_kind():
    client = ScriptedErasures(memory_pb2.Erasure(), [])
    out = io.StringIO()
    counts = await export_user(client, "alice", 4, out)  # type: ignore[arg-type]
    assert dict(counts) == {"session": 1, "episode": 2}
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "café" in lines[0]  # as written, not \\u-escaped
    assert json.loads(lines[1]) == {"episode": {"id": "2"}}
