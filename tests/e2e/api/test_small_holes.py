"""The smaller holes a probe found: oversized pages, one key holding every
watch slot, control characters in names.

Here, each over the wire (the wiring). The rules are tested directly in the
unit tier: a forged x-request-id replaced (tests/unit/test_limits_rules.py),
a forged log line escaped (tests/unit/test_api_log_lines.py), the control
characters a name may not hold (tests/unit/test_validation.py), a page of
large episodes cut to the message limit and paged on
(tests/unit/test_convert_page_fit.py; ListEpisodes' wiring, with every other
List RPC's, is tests/e2e/api/test_list_pages.py).
"""

from __future__ import annotations

import json
import logging

import grpc
import grpc.aio
import pytest

from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from tests.support import bearer, start_harness, wait_until

# The `small` server runs on SQLite and on PostgreSQL (tests/conftest.py).
BOTH_STORES = True

KEY_A = "watch-key-a-0000000000001"
KEY_B = "watch-key-b-0000000000001"
LIMIT = 1024 * 1024


@pytest.fixture
async def small(tmp_path, store_settings):
    """A server with a 1 MiB message limit."""
    h = await start_harness(tmp_path / "data", max_message_bytes=LIMIT, **store_settings)
    yield h
    await h.close()


async def test_a_response_over_the_limit_is_logged_and_counted_as_what_it_was(tmp_path, caplog):
    """grpc refuses an oversized response after the handler returned, where
    the access log and metrics had already called the call OK."""
    limit = 150_000
    h = await start_harness(tmp_path / "data", max_message_bytes=limit)
    try:
        session = await h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session())
        )
        with caplog.at_level(logging.INFO, logger="nexus_grpc.access"):
            small = await h.memory.CreateEpisode(
                memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="short one")
            )
            await h.memory.GetEpisode(memory_pb2.GetEpisodeRequest(id=small.id))
        assert any("GetEpisode OK" in r.getMessage() for r in caplog.records)
        # A request just under the limit: the episode it returns (id, times,
        # states added) is just over it.
        req = memory_pb2.CreateEpisodeRequest(
            session_id=session.id, user_message="u" * 100_000, ai_response=""
        )
        req.ai_response = "a" * (limit - 4 - req.ByteSize())
        assert req.ByteSize() <= limit
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="nexus_grpc.access"):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await h.memory.CreateEpisode(req)

            # The access line is written when the server's side of the call
            # is done, which may be just after the client has its status.
            async def logged() -> bool:
                lines = [r.getMessage() for r in caplog.records]
                return any("CreateEpisode RESOURCE_EXHAUSTED" in line for line in lines)

            await wait_until(logged)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "--max-message-bytes" in err.value.details()
        lines = [r.getMessage() for r in caplog.records]
        assert not any("CreateEpisode OK" in line for line in lines), lines
        assert any("exceeds --max-message-bytes" in line for line in lines), lines
    finally:
        await h.close()


async def test_control_characters_are_refused_in_names_and_titles(small):
    """Each RPC's name field is checked (the wiring); the characters refused are
    tested on domain/validation.py in tests/unit/test_validation.py."""
    h = small
    bad = "a\x1b[31mred"
    ok = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="fine"))
    )
    calls = {
        "project.name": h.memory.CreateProject(
            memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name=bad))
        ),
        "session.name": h.memory.CreateSession(
            memory_pb2.CreateSessionRequest(session=memory_pb2.Session(name=bad))
        ),
        "memory.title": h.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_PROJECT, title=bad, content="c", project_id=ok.id
                )
            )
        ),
        "name": h.graph.UpsertEntity(
            graph_pb2.UpsertEntityRequest(name=bad, type="person", project_id=ok.id)
        ),
    }
    for field, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        assert err.value.details().startswith(f"{field} must not contain control characters")
    counts = await h.app.db.read_sql(
        lambda c: [
            c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("projects", "sessions", "memories", "entities")
        ]
    )
    assert counts == [1, 0, 0, 0]  # only the positive case was written


async def test_one_key_cannot_hold_every_watch_slot(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "keys": [
                    {"key": KEY_A, "name": "a", "users": []},
                    {"key": KEY_B, "name": "b", "users": []},
                ]
            }
        )
    )
    h = await start_harness(
        tmp_path / "data", auth_keys_file=str(keys), max_watch_streams_per_key=2
    )
    events = h.app.graph_events
    try:
        a_calls = [
            h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(), metadata=bearer(KEY_A))
            for _ in range(2)
        ]

        async def open_streams(n: int):
            return events.watchers == n

        await wait_until(lambda: open_streams(2))
        refused = h.graph.WatchExtractions(
            graph_pb2.WatchExtractionsRequest(), metadata=bearer(KEY_A)
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await refused.read()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for text in ("'a' already has 2", "--max-watch-streams-per-key", "(now 2)"):
            assert text in err.value.details()
        # Another key still gets a stream: the global cap is far off.
        b_call = h.graph.WatchExtractions(
            graph_pb2.WatchExtractionsRequest(), metadata=bearer(KEY_B)
        )
        await wait_until(lambda: open_streams(3))
        # A slot the key frees is its own again.
        a_calls.pop().cancel()
        await wait_until(lambda: open_streams(2))
        a_calls.append(
            h.graph.WatchExtractions(graph_pb2.WatchExtractionsRequest(), metadata=bearer(KEY_A))
        )
        await wait_until(lambda: open_streams(3))
        for call in (*a_calls, b_call):
            call.cancel()
        await wait_until(lambda: open_streams(0))
    finally:
        await h.close()
