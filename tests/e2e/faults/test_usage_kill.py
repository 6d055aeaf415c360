"""kill -9 loses no record of an LLM call whose result was kept.

The real ``nexus-grpc serve`` extracts a backlog of episodes through the
Ollama stand-in and gets SIGKILL while extractions are in flight, then is
started again and drains the rest. A call is written in the transaction that
keeps its result (the job's outcome), so in the end every episode extracted
has exactly one ``ok`` extraction call in the account, and the calls whose
answers the kill threw away (sent, never kept) have none: the stand-in
served at least as many requests as the account holds.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2_grpc as memory_grpc
from tests.ollama_stub import OllamaStub, Reply
from tests.process import ServerProcess, read_only, wait_queue_empty

EPISODES = 24
EMPTY = {"entities": [], "relationships": []}
DONE = 2  # JobState.DONE in the episodes table


def _done(server: ServerProcess) -> int:
    with read_only(server.sqlite_path) as db:
        found = db.execute("SELECT COUNT(*) FROM episodes WHERE extract_state = ?", (DONE,))
        return int(found.fetchone()[0])


async def test_a_kill_mid_extraction_keeps_the_account_of_every_kept_result(tmp_path):
    with OllamaStub(default=Reply.of(EMPTY, delay=0.05)) as stub:
        server = ServerProcess(
            tmp_path / "data", "--ollama-url", stub.url, "--vector-prewarm-mb", "0"
        ).start()
        try:
            async with grpc.aio.insecure_channel(server.target) as channel:
                memory = memory_grpc.MemoryServiceStub(channel)
                project = await memory.CreateProject(
                    memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="p"))
                )
                session = await memory.CreateSession(
                    memory_pb2.CreateSessionRequest(
                        session=memory_pb2.Session(project_id=project.id)
                    )
                )
                for i in range(EPISODES):
                    await memory.CreateEpisode(
                        memory_pb2.CreateEpisodeRequest(
                            session_id=session.id, user_message=f"note {i}", ai_response="ok"
                        )
                    )
            # Some extractions kept, others on their way: then kill -9.
            deadline = time.monotonic() + 60
            while _done(server) < 4:
                assert time.monotonic() < deadline, server.log_tail()
                await asyncio.sleep(0.01)
            server.kill()
            kept_before = _done(server)
            assert kept_before < EPISODES, "the backlog finished before the kill"

            server.start()
            await wait_queue_empty(server.target, "extract:episode", 120)
        finally:
            server.stop()

    with read_only(server.sqlite_path) as db:
        done = db.execute(
            "SELECT COUNT(*) FROM episodes WHERE extract_state = ?", (DONE,)
        ).fetchone()[0]
        calls = dict(
            db.execute(
                "SELECT outcome, COUNT(*) FROM llm_calls WHERE stage = 'extraction'"
                " AND project_id = ? GROUP BY outcome",
                (project.id,),
            ).fetchall()
        )
    assert done == EPISODES
    assert calls == {"ok": EPISODES}
    assert len(stub.requests_to("/api/chat")) >= EPISODES
