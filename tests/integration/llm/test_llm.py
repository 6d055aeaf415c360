"""nexus_grpc.llm: the client against the Ollama stub, and the pure prompt/parse code."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from nexus_grpc.llm import (
    LLMBadOutput,
    LLMClient,
    LLMUnavailable,
    LLMUnreachable,
    OllamaClient,
    StreamCleaner,
    clean_stream,
    strip_model_tokens,
    to_snake_case,
)
from nexus_grpc.llm.extraction_prompts import (
    EXTRACTION_OPTIONS,
    EXTRACTION_SCHEMA,
    ExtractedEntity,
    ExtractedRelationship,
    build_extraction_messages,
    parse_extraction,
)
from nexus_grpc.llm.selection_prompts import (
    RANKING_SCHEMA,
    SELECTION_SCHEMA,
    Selected,
    build_ranking_messages,
    build_selection_messages,
    parse_ranking,
    parse_selection,
)
from nexus_grpc.llm.summary_prompts import (
    MAX_OVERVIEW_INPUT_CHARS,
    PROJECT_OVERVIEW_OPTIONS,
    SESSION_SUMMARY_OPTIONS,
    build_project_overview_messages,
    build_session_summary_messages,
    truncate_recent,
)

try:
    from ollama_stub import OllamaStub, Reply
except ImportError:  # tests/ is a package
    from tests.ollama_stub import OllamaStub, Reply

MODEL = "qwen2.5:3b"
MSGS = [{"role": "user", "content": "hi"}]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- LLMClient --------------------------------------------------------------------


async def test_chat_json_sends_schema_and_options(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue({"entities": [], "relationships": []})
    result = await llm.chat_json(MODEL, MSGS, EXTRACTION_SCHEMA, **EXTRACTION_OPTIONS)
    assert result == {"entities": [], "relationships": []}
    (request,) = stub.requests_to("/api/chat")
    assert request["model"] == MODEL
    assert request["format"] == EXTRACTION_SCHEMA
    # num_ctx: the smallest step holding the prompt and 1,500 answer tokens.
    assert request["options"] == {"temperature": 0.1, "num_predict": 1500, "num_ctx": 2048}
    assert request["stream"] is False
    assert not request.truncated
    # The context window was read once, from /api/show, before the call.
    assert [r["model"] for r in stub.requests_to("/api/show")] == [MODEL]


async def test_chat_json_is_never_passed_through_the_think_stripper(
    stub: OllamaStub, llm: LLMClient
) -> None:
    note = {"name": "Qwen3", "notes": "emits <think>...</think> blocks before answering"}
    stub.enqueue({"entities": [note]})
    # The positive case: the answer is parsed as sent, the note intact.
    assert await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100) == {
        "entities": [note]
    }
    # Text around JSON is not JSON: a schema-constrained answer never has any.
    stub.enqueue('<think>let me see</think>\n{"a": 1}')
    with pytest.raises(LLMBadOutput, match="did not answer JSON"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=100)


@pytest.mark.parametrize("content", ["not json at all", "[1, 2]", "", "<think>never closed"])
async def test_chat_json_bad_answer(stub: OllamaStub, llm: LLMClient, content: str) -> None:
    stub.enqueue(content)
    with pytest.raises(LLMBadOutput):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)


async def test_malformed_body_is_bad_output(stub: OllamaStub, llm: LLMClient) -> None:
    stub.malformed()
    with pytest.raises(LLMBadOutput, match="malformed response body"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    with pytest.raises(LLMBadOutput):
        async for _ in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
            pass


async def test_closed_port_is_unavailable() -> None:
    client = OllamaClient(f"http://127.0.0.1:{_closed_port()}", timeout=2)
    try:
        with pytest.raises(LLMUnreachable, match="cannot reach Ollama"):
            await client.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
        with pytest.raises(LLMUnreachable):
            await client.list_models()
        with pytest.raises(LLMUnreachable):
            async for _ in client.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
                pass
    finally:
        await client.close()


async def test_per_call_timeout(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply.slow(10, "{}"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(LLMUnavailable, match="did not answer within 0.2s"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0.2)
    assert loop.time() - started < 3
    with pytest.raises(LLMUnavailable, match="deadline already expired"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10, timeout=0)


async def test_stream_deadline_mid_stream(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="a b c", chunks=("a", "b", "c"), chunk_delay=5))
    got: list[str] = []
    with pytest.raises(LLMUnavailable):
        async for delta in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=9, timeout=0.5):
            got.append(delta)
    assert got == ["a"]


async def test_http_errors_map(stub: OllamaStub, llm: LLMClient) -> None:
    stub.fail_with(503, "server busy")
    with pytest.raises(LLMUnavailable, match="HTTP 503") as busy:
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    assert not isinstance(busy.value, LLMUnreachable)  # a failing answer, not an outage
    stub.clear_faults()
    with pytest.raises(LLMUnreachable, match="ollama pull llama9"):
        await llm.chat_json("llama9", MSGS, {}, temperature=0, num_predict=10)
    stub.enqueue(Reply.error_status(400, "invalid format"))
    with pytest.raises(LLMBadOutput, match="rejected the request"):
        await llm.chat_json(MODEL, MSGS, {}, temperature=0, num_predict=10)
    stub.enqueue(Reply(content="half", stream_error="runner crashed"))
    with pytest.raises(LLMUnavailable, match="runner crashed"):
        async for _ in llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=10):
            pass


async def test_stream_yields_deltas(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="Hello there world", chunks=("Hello", " there", " world")))
    deltas = [d async for d in llm.chat_stream(MODEL, MSGS, **PROJECT_OVERVIEW_OPTIONS, timeout=5)]
    assert deltas == ["Hello", " there", " world"]
    request = stub.requests_to("/api/chat")[0]
    assert request["stream"] is True and "format" not in request
    assert request["options"] == {"temperature": 0.2, "num_predict": 1200, "num_ctx": 2048}


async def test_stream_closed_early_cancels_producer(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue(Reply(content="a b", chunks=("a", "b"), chunk_delay=30))
    stream = llm.chat_stream(MODEL, MSGS, temperature=0, num_predict=9)
    assert await anext(stream) == "a"
    await asyncio.wait_for(stream.aclose(), 2)  # must not wait for the slow chunk


async def test_list_models_and_recovery(stub: OllamaStub, llm: LLMClient) -> None:
    assert MODEL in await llm.list_models()
    stub.stop()
    with pytest.raises(LLMUnavailable):
        await llm.list_models()
    stub.start()
    assert MODEL in await llm.list_models()


async def test_chat_text_for_summaries(stub: OllamaStub, llm: LLMClient) -> None:
    stub.enqueue("<think>hmm</think>  The user set up Postgres.  ")
    msgs = build_session_summary_messages([("q", "a")], None)
    text = await llm.chat_text(MODEL, msgs, **SESSION_SUMMARY_OPTIONS)
    assert text == "The user set up Postgres."
    (request,) = stub.requests_to("/api/chat")
    assert request["options"] == {"temperature": 0.2, "num_predict": 500, "num_ctx": 2048}


# -- text ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<think>reasoning</think>answer", "answer"),
        ("<THINK>a\nb</THINK>\n\nanswer", "answer"),
        ("<think>cut off while thinking", ""),
        ("reasoning only</think>answer", "answer"),
        ("<|im_start|>assistant\nHello<|im_end|>", "Hello"),
        ("<|im_start|>Hi<|im_end|><|endoftext|>", "Hi"),
        ("a <b> c", "a <b> c"),
    ],
)
def test_strip_model_tokens(raw: str, clean: str) -> None:
    assert strip_model_tokens(raw) == clean


@pytest.mark.parametrize(
    ("label", "snake"),
    [
        ("Works At", "works_at"),
        ("worksAt", "works_at"),
        ("works-at", "works_at"),
        ("WORKS_AT", "works_at"),
        ("  is part of  ", "is_part_of"),
        ("usesHTTPServer", "uses_http_server"),
        ("!!", ""),
    ],
)
def test_to_snake_case(label: str, snake: str) -> None:
    assert to_snake_case(label) == snake


def test_stream_cleaner_handles_split_tags() -> None:
    pieces = ["<th", "ink>sec", "ret</thi", "nk>\n", "<|im_", "start|>assis", "tant\nHel", "lo <b>"]
    pieces += ["<|im_end|>", " end"]
    cleaner = StreamCleaner()
    out = "".join(cleaner.feed(p) for p in pieces) + cleaner.flush()
    assert out == "Hello <b> end"
    raw = "".join(pieces)
    assert strip_model_tokens(raw) == out


async def test_clean_stream_wraps_deltas() -> None:
    async def deltas() -> AsyncIterator[str]:
        for d in ["<think>x", "</think>", "Over", "view"]:
            yield d

    assert [d async for d in clean_stream(deltas())] == ["Over", "view"]


# -- extraction ---------------------------------------------------------------------


def test_extraction_prompt_contents() -> None:
    known = [(f"Entity{i}", "concept") for i in range(25)]
    msgs = build_extraction_messages("I work at Acme on Nexus.", "Nice, Nexus sounds fun.", known)
    prompt = "\n".join(m["content"] for m in msgs)
    assert "I work at Acme on Nexus." in prompt and "Nice, Nexus sounds fun." in prompt
    listed = [f"Entity{i} (concept)" for i in range(5, 25)]
    assert all(item in prompt for item in listed)  # the last 20
    assert "Entity4 (concept)" not in prompt
    assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"


def test_extraction_filters() -> None:
    result = parse_extraction(
        {
            "entities": [
                {"name": " Alice ", "type": "Person", "notes": "engineer"},
                {"name": "alice", "type": "person", "notes": "dup"},
                {"name": "Acme Corp", "type": "ORGANIZATION", "notes": None},
                {"name": "Hello", "type": "concept", "notes": None},
                {"name": "Thank You", "type": "concept", "notes": None},
                {"name": "user", "type": "person", "notes": None},
                {"name": "Tuesday", "type": "date", "notes": None},
                {"name": "", "type": "person", "notes": None},
                {"name": 42, "type": "person"},
                "garbage",
            ],
            "relationships": [
                {"from": "alice", "to": "Acme Corp", "label": "Works At", "notes": "since 2020"},
                {"from": "Alice", "to": "Acme Corp", "label": "worksAt", "notes": None},
                {"from": "Alice", "to": "Tuesday", "label": "met on", "notes": None},
                {"from": "Hello", "to": "Alice", "label": "greets", "notes": None},
                {"from": "Alice", "to": "Alice", "label": "is", "notes": None},
                {"from": "Alice", "to": "Acme Corp", "label": "   ", "notes": None},
                {"to": "Acme Corp", "label": "x"},
            ],
        }
    )
    assert result.entities == [
        ExtractedEntity("Alice", "person", "engineer"),
        ExtractedEntity("Acme Corp", "organization", None),
    ]
    assert result.relationships == [
        ExtractedRelationship("Alice", "Acme Corp", "works_at", "since 2020"),
    ]


def test_extraction_same_name_different_type_kept() -> None:
    result = parse_extraction(
        {
            "entities": [
                {"name": "Python", "type": "technology", "notes": None},
                {"name": "Python", "type": "concept", "notes": None},
            ],
            "relationships": [],
        }
    )
    assert [(e.name, e.type) for e in result.entities] == [
        ("Python", "technology"),
        ("Python", "concept"),
    ]


@pytest.mark.parametrize(
    "obj",
    [{"entities": {}}, {"entities": [], "relationships": "none"}, {"other": 1}, ["x"]],
)
def test_extraction_bad_shape(obj: object) -> None:
    with pytest.raises(LLMBadOutput):
        parse_extraction(obj)  # type: ignore[arg-type]


def test_extraction_schema_shape() -> None:
    props = EXTRACTION_SCHEMA["properties"]
    assert set(props) == {"entities", "relationships", "ended"}
    assert set(props["relationships"]["items"]["properties"]) == {"from", "to", "label", "notes"}
    # Ended facts name the facts the prompt showed: their ends and label.
    assert set(props["ended"]["items"]["properties"]) == {"from", "to", "label"}
    assert set(EXTRACTION_SCHEMA["required"]) == {"entities", "relationships"}


# -- summaries ----------------------------------------------------------------------


def test_truncate_recent() -> None:
    assert truncate_recent("abcdef", 3) == "def"
    assert truncate_recent("abc", 3) == "abc"
    assert truncate_recent("abc", 0) == ""


def test_overview_keeps_most_recent_8000_chars() -> None:
    old = "OLD" * 4000  # 12,000 chars, all older than the last source
    recent = "R" * 7000 + "NEWEST"
    msgs = build_project_overview_messages("Nexus", [old, recent], from_summaries=True)
    prompt = msgs[-1]["content"]
    joined = old + "\n\n---\n\n" + recent
    assert joined[-MAX_OVERVIEW_INPUT_CHARS:] in prompt
    assert joined[: len(joined) - MAX_OVERVIEW_INPUT_CHARS] not in prompt
    assert prompt.count("OLD") < 1000 and "NEWEST" in prompt
    assert "Nexus" in prompt and "Session summaries" in prompt
    fallback = build_project_overview_messages("Nexus", ["ep"], from_summaries=False)
    assert "Conversation excerpts" in fallback[-1]["content"]


def test_session_summary_new_and_cumulative() -> None:
    fresh = build_session_summary_messages([("Q1", "A1"), ("Q2", "A2")], None)[-1]["content"]
    assert "Q1" in fresh and "A2" in fresh and "Current summary" not in fresh
    update = build_session_summary_messages([("Q3", "A3")], "Earlier: Q1/Q2.")[-1]["content"]
    assert "Earlier: Q1/Q2." in update and "Q3" in update and "A3" in update
    assert SESSION_SUMMARY_OPTIONS == {"temperature": 0.2, "num_predict": 500}


# -- selection ----------------------------------------------------------------------


def test_selection_prompt() -> None:
    msgs = build_selection_messages(
        "How do I deploy?", [(1, "Deploy notes"), (2, "Cats")], None, {2}
    )
    prompt = msgs[-1]["content"]
    assert "How do I deploy?" in prompt and "[1] Deploy notes" in prompt
    assert "[2] Cats  (already used in this thread)" in prompt
    assert "[1] Deploy notes  (already" not in prompt
    ranking = build_ranking_messages("q", [(7, "T", "body text")], "thread so far")
    assert "[7] T\nbody text" in ranking[-1]["content"]
    assert "thread so far" in ranking[-1]["content"]


def test_parse_selection_drops_invented_ids_and_clamps() -> None:
    picks = parse_selection(
        {
            "selected": [
                {"id": 1, "relevance": 1.7, "category": "necessary"},
                {"id": 99, "relevance": 0.9, "category": "necessary"},  # invented
                {"id": "2", "relevance": -0.5, "category": "Supporting"},
                {"id": 3, "relevance": 0.4, "category": "weird"},
                {"id": 3, "relevance": 0.6, "category": "necessary"},
                {"id": True, "relevance": 0.5, "category": "necessary"},
                {"id": 4, "relevance": "high", "category": "necessary"},
                {"relevance": 0.5},
            ]
        },
        valid_ids={1, 2, 3, 4},
    )
    assert picks == [
        Selected(1, 1.0, "necessary"),
        Selected(3, 0.6, "necessary"),
        Selected(2, 0.0, "supporting"),
    ]


def test_parse_ranking() -> None:
    ranked = parse_ranking(
        {
            "ranked": [
                {"id": 5, "relevance": 0.2},
                {"id": 6, "relevance": 3},
                {"id": 8, "relevance": 1},
            ]
        },
        valid_ids=[5, 6],
    )
    assert ranked == {6: 1.0, 5: 0.2}
    assert list(ranked) == [6, 5]
    with pytest.raises(LLMBadOutput):
        parse_ranking({"ranked": "nope"}, valid_ids=[5])
    with pytest.raises(LLMBadOutput):
        parse_selection({}, valid_ids=[5])
    assert SELECTION_SCHEMA["required"] == ["selected"] and RANKING_SCHEMA["required"] == ["ranked"]
