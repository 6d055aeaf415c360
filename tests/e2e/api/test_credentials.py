"""No RPC answer and no log line shows a credential of the configuration.

The probe found ``GetServiceStatus`` returning ``--ollama-url
http://user:secret@host`` verbatim to any key. Here every configurable URL
carries a credential of its own (a password, and for the database a
``password=`` query parameter too), and so do the two key settings; the
servers they point at are away, so the credentials meet every path that
quotes a URL: the status lines, job errors stored on episodes, refusals,
the degraded-search trailer, memory selection's fallback reason, and the
log at DEBUG. A real server on the embedded PostgreSQL, real gRPC calls.
How each URL is masked is tested on core/redact.py directly in
tests/unit/test_errors_masked_urls.py.
"""

from __future__ import annotations

import base64
import io
import logging
import socket
from collections.abc import Iterator

import grpc
import grpc.aio
import pytest
from google.protobuf.message import Message

from nexus_grpc.app import App
from nexus_grpc.core import redact
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.observability import logs
from nexus_grpc.runtime.config import KEY_SETTINGS, URL_SETTINGS, Settings
from nexus_grpc.server import start_server
from tests.ollama_stub import OllamaStub
from tests.support import Harness, HashingEmbedder, harness_for, wait_until

SECRETS = {
    "database_url": "pg-pass-5e1c",
    "database_url?": "pg-query-5e1c",
    "qdrant_url": "qd-pass-5e1c",
    "qdrant_api_key": "qd-key-5e1c",
    "ollama_url": "ol-pass-5e1c",
    "llm_url": "llm-pass-5e1c",
    "llm_api_key": "llm-key-5e1c",
    "otel_endpoint": "otel-pass-5e1c",
    "reranker_url": "rr-pass-5e1c",
    "reranker_api_key": "rr-key-5e1c",
}


def dead_port() -> int:
    """A port nothing listens on: every call to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_password(pg_url: str) -> str:
    """The test database's URL with a password in it, twice (the embedded
    server trusts local connections, so neither is checked, but both are
    sent, as a real deployment's would be)."""
    head, _, rest = pg_url.partition("://")
    user, _, tail = rest.partition("@")
    user = user.split(":")[0]
    return f"{head}://{user}:{SECRETS['database_url']}@{tail}&password={SECRETS['database_url?']}"


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """Every log line the server writes, at DEBUG, as an operator's log would hold it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    logs.configure("DEBUG", "text", stream=out)
    yield out
    logs.stop()
    root.handlers[:] = handlers
    root.setLevel(level)
    redact.forget()


async def answers(h: Harness) -> list[str]:
    """The text of every answer of a walk over the RPCs that quote a server:
    messages, error details and trailers."""
    seen: list[str] = []

    async def call(rpc) -> Message | None:
        try:
            response = await rpc
        except grpc.aio.AioRpcError as exc:
            seen.append(f"{exc.code().name} {exc.details()} {exc.trailing_metadata()}")
            return None
        seen.append(str(response))
        return response

    async def stream(rpc) -> None:
        try:
            async for item in rpc:
                seen.append(str(item))
        except grpc.aio.AioRpcError as exc:
            seen.append(f"{exc.code().name} {exc.details()}")
        seen.append(str(await rpc.trailing_metadata()))

    m = h.memory
    session = await call(m.CreateSession(memory_pb2.CreateSessionRequest()))
    assert session is not None
    episode = await call(
        m.CreateEpisode(
            memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="hello there")
        )
    )
    assert episode is not None

    async def extraction_failed() -> bool:
        got = await m.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode.id))
        return bool(got.extraction_error)

    # The LLM is away: the extraction job's error is stored on the episode.
    await wait_until(extraction_failed, timeout=30)
    await call(m.GetEpisode(memory_pb2.GetEpisodeRequest(id=episode.id)))
    await call(m.GetServiceStatus(memory_pb2.GetServiceStatusRequest()))
    for mode in (memory_pb2.SEARCH_MODE_SEMANTIC, memory_pb2.SEARCH_MODE_HYBRID):
        await stream(
            m.SearchEpisodes(
                memory_pb2.SearchEpisodesRequest(query="hello", session_id=session.id, mode=mode)
            )
        )
    await call(
        m.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                memory=memory_pb2.Memory(
                    kind=memory_pb2.MEMORY_KIND_USER, user_id="alice", title="tea", content="tea"
                )
            )
        )
    )
    scope = memory_pb2.MemoryScope(user_id="alice")
    await stream(m.SelectMemories(memory_pb2.SelectMemoriesRequest(prompt="tea?", scope=scope)))
    await stream(
        m.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="tea", scope=scope, mode=memory_pb2.SEARCH_MODE_SEMANTIC
            )
        )
    )
    summarize = summary_pb2.SummarizeSessionRequest(session_id=session.id)
    await call(h.summary.SummarizeSession(summarize))
    return seen


def assert_no_secret(texts: list[str], where: str, secrets: dict[str, str] = SECRETS) -> None:
    for name, secret in secrets.items():
        leaked = [t for t in texts if secret in t]
        assert not leaked, f"{name}'s credential in {where}: {leaked[0][:300]}"


def basic(user: str, password: str) -> str:
    """The Authorization value httpx makes of a URL's user info."""
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.timeout(120)
async def test_no_credential_of_an_ollama_deployment_reaches_an_answer_or_the_log(
    tmp_path, pg_url, log_text
):
    """Ollama for the LLM and the embedder and a reranker, both refusing every
    call, the reranker quoting back the credentials it was sent (Ollama is
    sent none: its client drops a URL's user info); Qdrant for vectors, away.
    Masking at the source cannot know the words a server answers: only
    ``scrub`` at the boundary keeps them in."""
    from tests.rerank_stub import RerankStub

    port = dead_port()
    with OllamaStub() as ollama, RerankStub("llama.cpp") as reranker:
        ollama.refuse_quoting_credentials()
        reranker.refuse_quoting_credentials()
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            database_url=with_password(pg_url),
            qdrant_url=f"http://qd:{SECRETS['qdrant_url']}@127.0.0.1:{port}",
            qdrant_api_key=SECRETS["qdrant_api_key"],
            ollama_url=ollama.url.replace("://", f"://ol:{SECRETS['ollama_url']}@"),
            embedder="ollama",
            llm_timeout=2,
            reranker_url=reranker.url.replace("://", f"://rr:{SECRETS['reranker_url']}@") + "/v1",
            reranker_api_key=SECRETS["reranker_api_key"],
        )
        running = await start_server(settings, App(settings))
        h = harness_for(running)
        try:
            texts = await answers(h)
            status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        finally:
            await h.close()
        sent = [r.headers.get("authorization", "") for r in reranker.requests]
    # The reranker was asked with the URL's credentials (httpx sends its user
    # info as Basic, in place of the key's Bearer) and quoted them back into
    # the hits' reasons the walk read: scrub had something to keep in.
    assert f"Basic {basic('rr', SECRETS['reranker_url'])}" in sent
    assert any("invalid credentials Basic" in t for t in texts), "no answer quoted a server"
    assert any("invalid credentials" in t for t in texts if "Ollama" in t)
    secrets = {**SECRETS, "basic": basic("rr", SECRETS["reranker_url"])}
    assert_no_secret(texts, "an answer", secrets)
    assert_no_secret([log_text.getvalue()], "the log", secrets)
    # The URLs are still shown, masked: an operator can tell which server is meant.
    details = " ".join(d.detail for d in status.dependencies)
    assert f"http://***@127.0.0.1:{ollama.port}" in details
    assert f"http://***@127.0.0.1:{port}" in details
    assert "***@" in log_text.getvalue()


@pytest.mark.timeout(120)
async def test_no_credential_of_an_openai_deployment_reaches_an_answer_or_the_log(
    tmp_path, pg_url, log_text
):
    """An OpenAI-compatible LLM server with a URL password and an API key,
    refusing every call and quoting back the credentials it was sent."""
    with OllamaStub() as server:
        server.refuse_quoting_credentials()
        url = server.url.replace("://", f"://llm:{SECRETS['llm_url']}@") + "/v1"
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            database_url=with_password(pg_url),
            llm_api="openai",
            llm_url=url,
            llm_api_key=SECRETS["llm_api_key"],
            llm_timeout=2,
        )
        running = await start_server(settings, App(settings, embedder=HashingEmbedder()))
        h = harness_for(running)
        try:
            texts = await answers(h)
            status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
        finally:
            await h.close()
        sent = [r.headers.get("authorization", "") for r in server.requests]
    # httpx sends the URL's user info as Basic, in place of the key's Bearer.
    assert f"Basic {basic('llm', SECRETS['llm_url'])}" in sent
    assert any("invalid credentials Basic" in t for t in texts), "no answer quoted the server"
    secrets = {**SECRETS, "basic": basic("llm", SECRETS["llm_url"])}
    assert_no_secret(texts, "an answer", secrets)
    assert_no_secret([log_text.getvalue()], "the log", secrets)
    [llm] = [d for d in status.dependencies if d.name == "openai"]
    assert not llm.ok and f"http://***@127.0.0.1:{server.port}" in llm.detail


async def test_an_otel_endpoint_with_a_credential_is_refused_without_showing_it(tmp_path, log_text):
    """OTLP/gRPC would dial "user:password@host" as a host name (and gRPC's
    own log would print it): the start is refused, the URL masked."""
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        otel_endpoint=f"http://otel:{SECRETS['otel_endpoint']}@127.0.0.1:4317",
    )
    with pytest.raises(ValueError) as err:
        await start_server(settings, App(settings, embedder=HashingEmbedder()))
    assert "http://***@127.0.0.1:4317" in str(err.value)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in str(err.value)
    assert_no_secret([str(err.value), log_text.getvalue()], "the refusal")


def test_every_configurable_url_and_key_is_covered():
    """A URL or key setting added later must be added to URL_SETTINGS or
    KEY_SETTINGS, and here."""
    from nexus_grpc.runtime.config import OPTIONS

    named = {n for n in OPTIONS if n.endswith(("_url", "_endpoint", "api_key"))}
    assert named == set(URL_SETTINGS) | set(KEY_SETTINGS)
    assert {n.rstrip("?") for n in SECRETS} == named


RERANK_SECRETS = {
    "token-user": "TOKENUSER-rr-5e1c",
    "password": "ECHOPASS-rr-5e1c",
    "code": "CODE-rr-5e1c",
    "sig": "SIG-rr-5e1c",
    "x-api-key": "XAPI-rr-5e1c",
    "api-key": "BEARER-rr-5e1c",
}


def _rerank_url(stub_url: str, form: str) -> str:
    """The stand-in's URL with credentials in one of the forms the probe tried:
    a token as the user name, a user and password (httpx then sends Basic
    auth), or secrets in query parameters no list of names would know."""
    host = stub_url.removeprefix("http://")
    query = (
        f"?code={RERANK_SECRETS['code']}&sig={RERANK_SECRETS['sig']}"
        f"&x-api-key={RERANK_SECRETS['x-api-key']}"
    )
    return {
        "token-user": f"http://{RERANK_SECRETS['token-user']}@{host}/v1{query}",
        "basic": f"http://u:{RERANK_SECRETS['password']}@{host}/v1{query}",
        "bearer": f"http://{host}/v1{query}",
    }[form]


@pytest.mark.parametrize("form", ["token-user", "basic", "bearer"])
async def test_no_reranker_credential_reaches_a_hit_the_status_or_the_log(tmp_path, log_text, form):
    """The rerank service refuses every call and quotes back what it was sent
    (the Authorization header: the Bearer key, or the Basic value httpx made
    of the URL's user info; and the URL's query). Every exit is walked: the
    status, the hits of all three kinds with their ``degraded_reason``, the
    trailers and the log. Only ``scrub`` at the boundary can catch a remote
    service quoting a credential: no mask at the source knows its words."""
    import base64

    from tests.rerank_stub import RerankStub

    with RerankStub("llama.cpp") as stub:
        stub.refuse_quoting_credentials()
        settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            reranker_url=_rerank_url(stub.url, form),
            reranker_api_key=RERANK_SECRETS["api-key"],
        )
        running = await start_server(settings, App(settings, embedder=HashingEmbedder()))
        h = harness_for(running)
        seen: list[str] = []
        try:
            seen += await _walk_every_hit_kind(h)
            status = await h.memory.GetServiceStatus(memory_pb2.GetServiceStatusRequest())
            seen.append(str(status))
            sent = [r.headers.get("authorization", "") for r in stub.requests]
        finally:
            await h.close()
    # The stand-in was asked, and quoted what it was sent: the walk met it.
    assert sent and all(sent)
    secrets = dict(RERANK_SECRETS)
    if form == "token-user":
        secrets["basic"] = base64.b64encode(f"{RERANK_SECRETS['token-user']}:".encode()).decode()
    if form == "basic":
        secrets["basic"] = base64.b64encode(f"u:{RERANK_SECRETS['password']}".encode()).decode()
    assert any("invalid credentials" in t for t in seen), "no hit said why it was not reranked"
    for where, texts in (("an answer", seen), ("the log", [log_text.getvalue()])):
        for name, secret in secrets.items():
            leaked = [t for t in texts if secret in t]
            assert not leaked, f"the reranker's {name} in {where}: {leaked[0][:300]}"
    [reranker] = [d for d in status.dependencies if d.name == "reranker"]
    assert "/v1/rerank?code=***&sig=***&x-api-key=***" in reranker.detail


async def _walk_every_hit_kind(h: Harness) -> list[str]:
    """An episode, a memory and an entity, then a default search of each kind
    (the reranker orders the default mode): every hit and trailer, as text."""
    from nexus_grpc.gen.nexus.graph.v1 import graph_service_pb2 as graph_pb2

    seen: list[str] = []
    project = await h.memory.CreateProject(
        memory_pb2.CreateProjectRequest(project=memory_pb2.Project(name="rr"))
    )
    session = await h.memory.CreateSession(
        memory_pb2.CreateSessionRequest(session=memory_pb2.Session(project_id=project.id))
    )
    await h.memory.CreateEpisode(
        memory_pb2.CreateEpisodeRequest(session_id=session.id, user_message="tea with lemon")
    )
    await h.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(
            memory=memory_pb2.Memory(
                kind=memory_pb2.MEMORY_KIND_PROJECT, project_id=project.id,
                title="tea", content="the team drinks tea with lemon",
            )
        )
    )  # fmt: skip
    await h.graph.UpsertEntity(
        graph_pb2.UpsertEntityRequest(name="Lemon Tea", type="concept", project_id=project.id)
    )
    calls = [
        h.memory.SearchEpisodes(
            memory_pb2.SearchEpisodesRequest(query="tea lemon", project_id=project.id)
        ),
        h.memory.SearchMemories(
            memory_pb2.SearchMemoriesRequest(
                query="tea lemon", scope=memory_pb2.MemoryScope(project_id=project.id)
            )
        ),
        h.graph.SearchEntities(
            graph_pb2.SearchEntitiesRequest(query="lemon tea", project_id=project.id)
        ),
    ]
    for call in calls:
        hits = [hit async for hit in call]
        assert hits, "each kind is found, so its degraded_reason is there to read"
        seen += [str(hit) for hit in hits]
        seen.append(str(await call.trailing_metadata()))
    return seen
