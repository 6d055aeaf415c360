"""api/convert.py, the conversions between protobuf messages and the domain's
values, called directly: what a time, a duration, a Struct or an enum becomes
on the way in (and what is refused, naming the field), and what a domain value
keeps, leaves unset or defaults on the way out. No server: a message built
here stands in for the one a client sends.

Whole-server tests keep the wiring (that an RPC reads its fields through these
and the refusal reaches the client as INVALID_ARGUMENT):
tests/e2e/service/test_episode_time.py, tests/e2e/service/test_memory_expiry.py,
tests/e2e/service/test_project_retention.py.
"""

from __future__ import annotations

import math

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from nexus_grpc.api import convert
from nexus_grpc.core import models
from nexus_grpc.core.models import Episode, JobState, Project, SearchMode, SearchSource, Session
from nexus_grpc.core.records import Memory, MemoryUsage, Revision
from nexus_grpc.domain.retrieval.hits import EpisodeHit, MemoryHit, StageScore
from nexus_grpc.domain.selection import Selection
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.runtime.loop_lag import LAG_BUCKETS, LoopLag

BASE = 1_700_000_000
TIMESTAMP_MIN, TIMESTAMP_MAX = -62_135_596_800, 253_402_300_799
DURATION_MAX = 315_576_000_000


def refusal(fn, *args) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as err:
        fn(*args)
    return err.value


def a_memory(**fields) -> Memory:
    values = {"id": 7, "kind": 1, "title": "port", "content": "5432", "tier": 3, **fields}
    return Memory(**values)


# Times -----------------------------------------------------------------------


def test_an_unset_or_zero_time_goes_out_unset_and_a_set_one_keeps_its_fraction():
    assert convert.timestamp(None) is None
    assert convert.timestamp(0.0) is None
    assert convert.timestamp(1.25) == Timestamp(seconds=1, nanos=250_000_000)


def test_an_exact_timestamp_is_always_set_the_epoch_included():
    assert convert.exact_timestamp(0.0) == Timestamp()
    episode = memory_pb2.Episode(occur_time=convert.exact_timestamp(0.0))
    assert episode.HasField("occur_time")
    # Exact: the float's nearest nanosecond (1.001 s is 1000999999.99... ns as a float).
    assert convert.exact_timestamp(1.001) == Timestamp(seconds=1, nanos=1_000_000)


def test_a_time_field_reads_as_epoch_seconds_and_unset_as_none():
    unset = memory_pb2.CreateEpisodeRequest()
    assert convert.time_field(unset, "occur_time") is None
    epoch = memory_pb2.CreateEpisodeRequest(occur_time=Timestamp())
    assert convert.time_field(epoch, "occur_time") == 0.0  # set: not "now"
    quarter = memory_pb2.CreateEpisodeRequest(occur_time=Timestamp(seconds=BASE, nanos=250_000_000))
    assert convert.time_field(quarter, "occur_time") == BASE + 0.25


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [
        (BASE, -1),  # the values tests/e2e/service/test_episode_time.py sends
        (-(10**12), 0),
        (BASE, 2_000_000_000),
        (TIMESTAMP_MAX + 1, 0),
        (TIMESTAMP_MIN - 1, 0),
    ],
)
def test_a_time_outside_timestamps_range_is_refused_naming_its_field(seconds, nanos):
    request = memory_pb2.SearchEpisodesRequest(end_time=Timestamp(seconds=seconds, nanos=nanos))
    e = refusal(convert.time_field, request, "end_time")
    assert e.field == "end_time"
    assert e.message == f"end_time is not a valid timestamp (seconds {seconds}, nanos {nanos})"


def test_the_ends_of_timestamps_range_are_accepted():
    first = memory_pb2.SearchEpisodesRequest(start_time=Timestamp(seconds=TIMESTAMP_MIN))
    assert convert.time_field(first, "start_time") == TIMESTAMP_MIN
    last = memory_pb2.SearchEpisodesRequest(
        start_time=Timestamp(seconds=TIMESTAMP_MAX, nanos=999_999_999)
    )
    assert convert.time_field(last, "start_time") == pytest.approx(TIMESTAMP_MAX + 1)


# Durations -------------------------------------------------------------------


def test_a_duration_reads_as_seconds_and_unset_as_none():
    assert convert.duration_field(memory_pb2.Memory(), "ttl") is None
    ttl = memory_pb2.Memory(ttl=Duration(seconds=90, nanos=500_000_000))
    assert convert.duration_field(ttl, "ttl") == 90.5
    # A negative duration has both parts negative: well formed (the domain decides).
    back = memory_pb2.Memory(ttl=Duration(seconds=-5, nanos=-500_000_000))
    assert convert.duration_field(back, "ttl") == -5.5


@pytest.mark.parametrize(
    "duration",
    [
        Duration(seconds=5, nanos=-1),  # tests/e2e/service/test_project_retention.py's
        Duration(seconds=-5, nanos=1),
        Duration(seconds=DURATION_MAX + 1),
        Duration(seconds=-DURATION_MAX - 1),
        Duration(seconds=1, nanos=1_000_000_000),
    ],
)
def test_a_malformed_duration_is_refused_naming_its_owner_and_field(duration):
    e = refusal(
        convert.duration_field, memory_pb2.Project(retention=duration), "retention", "project"
    )
    assert e.field == "project.retention"
    assert e.message == (
        f"project.retention is not a valid duration"
        f" (seconds {duration.seconds}, nanos {duration.nanos})"
    )


def test_a_memorys_duration_is_named_under_memory_by_default():
    # tests/e2e/service/test_memory_expiry.py's malformed ttl.
    e = refusal(convert.memory_values, memory_pb2.Memory(ttl=Duration(seconds=1, nanos=-1)))
    assert e.field == "memory.ttl"


def test_the_longest_duration_is_accepted():
    longest = memory_pb2.Memory(ttl=Duration(seconds=DURATION_MAX, nanos=999_999_999))
    assert convert.duration_field(longest, "ttl") == pytest.approx(DURATION_MAX + 1)


# Structs ---------------------------------------------------------------------


def test_metadata_goes_out_and_comes_back_as_the_same_json_values():
    value = {"source": "chat", "n": 3, "tags": ["a", True, None], "nested": {"k": 1.5}}
    assert convert.from_struct(convert.struct(value)) == value
    assert convert.struct({}) == Struct()
    assert convert.from_struct(Struct()) == {}


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_metadata_with_no_json_form_is_refused_naming_the_field(number):
    s = Struct()
    s.update({"x": number})
    e = refusal(convert.from_struct, s, "session.metadata")
    assert e.field == "session.metadata"
    assert e.message.startswith("session.metadata must be JSON-representable: ")
    assert refusal(convert.from_struct, s).field == "metadata"


# Enums -----------------------------------------------------------------------


def test_an_unset_search_mode_is_hybrid_and_a_set_one_is_kept():
    assert convert.search_mode(memory_pb2.SEARCH_MODE_UNSPECIFIED) == SearchMode.HYBRID
    assert convert.search_mode(memory_pb2.SEARCH_MODE_KEYWORD) == SearchMode.KEYWORD
    assert convert.search_mode(memory_pb2.SEARCH_MODE_SEMANTIC) == SearchMode.SEMANTIC


@pytest.mark.parametrize("mode", [4, 99, -1])
def test_a_search_mode_the_proto_does_not_define_is_refused(mode):
    e = refusal(convert.search_mode, mode)
    assert e.field == "mode"
    assert e.message == f"mode {mode} is not a SearchMode"


@pytest.mark.parametrize(
    ("source", "wire"),
    [
        ("client", memory_pb2.MEMORY_SOURCE_CLIENT),
        ("formation", memory_pb2.MEMORY_SOURCE_FORMATION),
        ("import", memory_pb2.MEMORY_SOURCE_UNSPECIFIED),  # one the proto has no name for
    ],
)
def test_a_memorys_source_goes_out_as_its_enum_or_unspecified(source, wire):
    assert convert.memory(a_memory(source=source)).source == wire


# Memories --------------------------------------------------------------------


def test_a_memory_goes_out_with_every_field_it_keeps():
    m = a_memory(
        project_id=3,
        agent_id="bot",
        user_id="alice",
        session_id=4,
        confidence=0.75,
        metadata={"k": "v"},
        created_at=BASE,
        updated_at=BASE + 1,
        last_used_at=BASE + 2,
        use_count=5,
        expire_at=BASE + 3,
        source="formation",
        source_episode_id=11,
    )
    out = convert.memory(m)
    assert (out.id, out.kind, out.title, out.content, out.tier) == (7, 1, "port", "5432", 3)
    assert (out.project_id, out.agent_id, out.user_id, out.session_id) == (3, "bot", "alice", 4)
    assert out.confidence == 0.75 and convert.from_struct(out.metadata) == {"k": "v"}
    assert out.create_time.seconds == BASE and out.update_time.seconds == BASE + 1
    assert out.last_used_time.seconds == BASE + 2 and out.use_count == 5
    assert out.expire_time.seconds == BASE + 3
    assert out.source_episode_id == 11


def test_a_memory_that_never_expires_or_was_never_used_leaves_those_times_unset():
    out = convert.memory(a_memory())
    for field in ("expire_time", "last_used_time", "create_time"):
        assert not out.HasField(field), field
    assert out.source_episode_id == 0  # None: its episode was deleted, or none
    # An expiry at the epoch is a time, not "never": it stays set.
    assert convert.memory(a_memory(expire_at=0.0)).HasField("expire_time")


def test_a_memorys_values_are_read_from_the_message_as_the_domain_takes_them():
    message = memory_pb2.Memory(
        kind=memory_pb2.MEMORY_KIND_USER,
        title="t",
        content="c",
        tier=memory_pb2.TIER_LONGTERM,
        project_id=2,
        agent_id="a",
        user_id="u",
        session_id=5,
        confidence=0.5,
        metadata=convert.struct({"x": 1}),
        expire_time=Timestamp(seconds=BASE),
    )
    assert convert.memory_values(message) == {
        "kind": memory_pb2.MEMORY_KIND_USER,
        "title": "t",
        "content": "c",
        "tier": memory_pb2.TIER_LONGTERM,
        "project_id": 2,
        "agent_id": "a",
        "user_id": "u",
        "session_id": 5,
        "confidence": 0.5,
        "metadata": {"x": 1},
        "expire_time": BASE,
        "ttl": None,
    }
    # expire_time and ttl are one oneof: a ttl is read instead of a time.
    message.ttl.FromSeconds(60)
    assert convert.memory_values(message)["expire_time"] is None
    assert convert.memory_values(message)["ttl"] == 60
    unset = convert.memory_values(memory_pb2.Memory())
    assert unset["expire_time"] is None and unset["ttl"] is None and unset["metadata"] == {}


def test_a_memorys_expire_time_out_of_range_is_refused_naming_expire_time():
    # tests/e2e/service/test_memory_expiry.py's malformed expire_time.
    message = memory_pb2.Memory(expire_time=Timestamp(seconds=1, nanos=-1))
    assert refusal(convert.memory_values, message).field == "expire_time"


def test_a_scope_keeps_each_of_its_fields():
    scope = memory_pb2.MemoryScope(
        project_id=1, user_id="u", session_id=2, agent_id="a", include_archived=True
    )
    assert convert.memory_scope(scope) == models.MemoryScope(
        project_id=1, user_id="u", session_id=2, agent_id="a", include_archived=True
    )
    assert convert.memory_scope(memory_pb2.MemoryScope()) == models.MemoryScope()


def test_a_revision_goes_out_with_the_memory_as_it_was_and_no_episode_as_zero():
    before = a_memory(content="old")
    r = Revision(
        id=1,
        memory_id=7,
        action=memory_pb2.MEMORY_CHANGE_UPDATE,
        changed=["content"],
        previous=before,
        request_id="r-1",
        principal="ops",
        changed_at=BASE,
        purge_after=None,
        reason="why",
    )
    out = convert.memory_revision(r)
    assert out.change == memory_pb2.MEMORY_CHANGE_UPDATE
    assert list(out.changed_fields) == ["content"] and out.previous.content == "old"
    assert (out.request_id, out.principal, out.reason) == ("r-1", "ops", "why")
    assert out.episode_id == 0 and out.change_time.seconds == BASE
    formed = convert.memory_revision(Revision(**{**r.__dict__, "episode_id": 9}))
    assert formed.episode_id == 9


def test_a_usage_row_keeps_its_category_and_time():
    u = MemoryUsage(
        id=1, memory_id=2, thread_id="t", context="which port?", relevance=0.5, category=2,
        used_at=BASE,
    )  # fmt: skip
    out = convert.memory_usage(u)
    assert (out.memory_id, out.thread_id, out.context) == (2, "t", "which port?")
    assert out.category == memory_pb2.MEMORY_CATEGORY_SUPPORTING
    assert out.time.seconds == BASE and out.relevance == 0.5


# Hits and explanations ---------------------------------------------------------


def test_a_hit_carries_an_explanation_only_when_the_search_asked_for_one():
    plain = convert.memory_hit(MemoryHit(a_memory(), 0.5, (SearchSource.KEYWORD,)))
    assert not plain.HasField("explanation")
    assert list(plain.sources) == [memory_pb2.SEARCH_SOURCE_KEYWORD]
    stages = (StageScore("keyword", 1, 2.5, "port"), StageScore("semantic", 0, 0.0, "skipped"))
    explained = convert.memory_hit(MemoryHit(a_memory(), 0.5, (), explanation=stages))
    assert [(s.stage, s.rank, s.score, s.note) for s in explained.explanation.stages] == [
        ("keyword", 1, 2.5, "port"),
        ("semantic", 0, 0.0, "skipped"),
    ]


def test_a_degraded_reason_goes_out_with_a_urls_credentials_masked():
    reason = "semantic search down: http://user:hunter2@embedder:8080/v1"
    hit = convert.memory_hit(MemoryHit(a_memory(), 0.5, (), degraded_reason=reason))
    assert "hunter2" not in hit.degraded_reason
    assert hit.degraded_reason.startswith("semantic search down: http://***@embedder:8080/v1")


def test_an_episode_hit_carries_its_snippet_and_the_paths_that_found_it():
    episode = Episode(id=3, session_id=2, user_message="u", ai_response="a", occur_at=BASE)
    hit = EpisodeHit(
        episode, 0.8, "the <port>", (SearchSource.KEYWORD, SearchSource.SEMANTIC), reranked=True
    )
    out = convert.episode_hit(hit)
    assert (out.episode.id, out.score, out.snippet, out.reranked) == (3, 0.8, "the <port>", True)
    assert list(out.sources) == [
        memory_pb2.SEARCH_SOURCE_KEYWORD,
        memory_pb2.SEARCH_SOURCE_SEMANTIC,
    ]
    assert not out.HasField("explanation") and out.degraded_reason == ""


def test_a_selected_memory_says_how_and_why_it_was_chosen():
    chosen = Selection(
        a_memory(), 0.9, models.MemoryCategory.NECESSARY, True, "semantic",
        degraded_reason="no model: http://u:hunter2@llm/v1", title_batches=2,
    )  # fmt: skip
    out = convert.selected_memory(chosen)
    assert (out.memory.id, out.relevance, out.previously_used) == (7, 0.9, True)
    assert out.category == memory_pb2.MEMORY_CATEGORY_NECESSARY
    assert (out.method, out.title_batches) == ("semantic", 2)
    assert "hunter2" not in out.degraded_reason and out.degraded_reason.startswith("no model")


# Projects, sessions, episodes -------------------------------------------------


def test_a_project_that_never_chose_goes_out_unset():
    out = convert.project(Project(id=1, name="p"))
    assert not out.HasField("retention")
    assert list(out.single_valued_labels) == []
    assert out.memory_formation == memory_pb2.MEMORY_FORMATION_UNSPECIFIED
    # A retention of 0 seconds is a choice, not "unset".
    assert convert.project(Project(id=1, name="p", retention=0.0)).HasField("retention")


def test_a_projects_values_come_back_as_they_went_out():
    p = Project(
        id=1,
        name="p",
        description="d",
        colour="#fff",
        icon="i",
        notes="n",
        system_prompt="s",
        retention=86_400.5,
        single_valued_labels=("works_at",),
        memory_formation=2,
        tenant="t1",
    )
    assert convert.project_values(convert.project(p)) == {
        "name": "p",
        "description": "d",
        "colour": "#fff",
        "icon": "i",
        "notes": "n",
        "system_prompt": "s",
        "retention": 86_400.5,
        "single_valued_labels": ["works_at"],
        "memory_formation": 2,
    }
    assert convert.project(p).tenant == "t1"  # output only: not among the values read


def test_a_projects_malformed_retention_is_refused_naming_project_retention():
    message = memory_pb2.Project(retention=Duration(seconds=5, nanos=-1))
    assert refusal(convert.project_values, message).field == "project.retention"


def test_a_session_goes_out_with_its_metadata_and_owner():
    s = Session(
        id=2, external_id="e", name="n", project_id=1, metadata={"k": [1]}, created_at=BASE,
        user_id="u", agent_id="a",
    )  # fmt: skip
    out = convert.session(s)
    assert (out.id, out.external_id, out.name, out.project_id) == (2, "e", "n", 1)
    assert (out.user_id, out.agent_id) == ("u", "a")
    assert convert.from_struct(out.metadata) == {"k": [1]} and out.create_time.seconds == BASE


def test_an_episode_goes_out_with_its_states_its_errors_masked_and_its_occur_time_set():
    e = Episode(
        id=3,
        session_id=2,
        user_message="u",
        ai_response="a",
        metadata={},
        created_at=BASE,
        occur_at=0.0,
        embed_state=JobState.FAILED,
        extract_state=JobState.DONE,
        embed_error="POST http://key:secret@embedder/v1 failed",
    )
    out = convert.episode(e)
    assert out.embedding_state == memory_pb2.JOB_STATE_FAILED
    assert out.extraction_state == memory_pb2.JOB_STATE_DONE
    assert out.memory_state == memory_pb2.JOB_STATE_UNSPECIFIED  # None: no formation job
    assert "secret" not in out.embedding_error and "embedder/v1" in out.embedding_error
    assert out.HasField("occur_time") and out.occur_time == Timestamp()


# The event loop --------------------------------------------------------------


def test_the_event_loop_status_counts_the_samples_over_100ms():
    within = LAG_BUCKETS.index(0.1)
    counts = tuple(10 if i < within else (16 if i == within else 20) for i in range(12))
    lag = LoopLag(samples=20, max_seconds=0.75, bucket_counts=counts, total_seconds=1.0)
    out = convert.event_loop(lag)
    assert (out.samples, out.max_lag_ms, out.over_100ms) == (20, 750, 4)
    assert convert.event_loop(None) == memory_pb2.EventLoopStatus()
