"""What ``export`` and ``import`` decide without a server
(nexus_grpc/ops/against_server/transfer.py): the JSON Lines an export writes
and how a line that is not a record is refused, the keys an import compares
records by (what counts as the same episode, memory or summary), the
project values a new project is created with, and the free name taken when
the file's is in use (with a scripted client). The whole export and import
through a server are tests/e2e/service/test_export_project.py's and
tests/e2e/client/'s."""

from __future__ import annotations

import json

import grpc
import pytest

from nexus_grpc.client.base import NexusClientError
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.gen.nexus.summary.v1 import summary_service_pb2 as summary_pb2
from nexus_grpc.ops.against_server.transfer import (
    FREE_NAME_TRIES,
    _create_under_a_free_name,
    _episode_key,
    _key,
    _memory_key,
    _project_values,
    _summary_key,
    read_records,
    record_to_json,
)


def test_a_record_survives_its_json_line_with_the_protos_field_names():
    record = memory_pb2.ExportRecord(
        episode=memory_pb2.Episode(id=7, session_id=3, user_message="hi", ai_response="hello")
    )
    line = json.dumps(record_to_json(record))
    assert '"user_message": "hi"' in line  # not userMessage
    assert list(read_records([line])) == [record]


def test_blank_lines_are_skipped_and_a_bad_line_is_refused_by_its_number():
    good = json.dumps(record_to_json(memory_pb2.ExportRecord(session=memory_pb2.Session(id=1))))
    assert len(list(read_records(["\n", good, "   "]))) == 1
    with pytest.raises(ValueError, match=r"^line 3: not an ExportRecord: "):
        list(read_records([good, "", "{not json"]))
    with pytest.raises(ValueError, match=r"^line 1: not an ExportRecord: "):
        list(read_records(['{"no_such_field": 1}']))


def test_a_key_depends_on_the_order_of_its_parts_but_not_of_a_dicts_keys():
    assert _key(1, 2) != _key(2, 1)
    assert _key({"a": 1, "b": 2}) == _key({"b": 2, "a": 1})


def _episode(**kw) -> memory_pb2.Episode:
    return memory_pb2.Episode(**({"user_message": "hi", "ai_response": "hello"} | kw))


def test_an_episodes_key_leaves_out_its_id_and_time_but_not_its_session_or_text():
    first = _episode(id=1)
    first.occur_time.FromSeconds(100)
    again = _episode(id=99)
    again.occur_time.FromSeconds(200)
    assert _episode_key(3, first) == _episode_key(3, again)
    assert _episode_key(3, first) != _episode_key(4, first)
    assert _episode_key(3, first) != _episode_key(3, _episode(user_message="hi!"))
    tagged = _episode()
    tagged.metadata.update({"tag": "x"})
    assert _episode_key(3, first) != _episode_key(3, tagged)


def test_a_memory_without_a_confidence_is_the_same_as_one_of_full_confidence():
    plain = memory_pb2.Memory(id=1, title="t", content="c")
    full = memory_pb2.Memory(id=2, title="t", content="c", confidence=1.0)
    assert _memory_key(plain) == _memory_key(full)
    assert _memory_key(plain) != _memory_key(
        memory_pb2.Memory(title="t", content="c", confidence=0.5)
    )
    assert _memory_key(plain) != _memory_key(
        memory_pb2.Memory(title="t", content="c", user_id="ann")
    )


def test_a_summarys_key_is_its_session_text_and_span():
    s = summary_pb2.Summary(id=1, content="they met", episode_count=4)
    assert _summary_key(3, s, 10, 13) == _summary_key(
        3, summary_pb2.Summary(id=2, content="they met", episode_count=4), 10, 13
    )
    assert _summary_key(3, s, 10, 13) != _summary_key(3, s, 10, 14)


def test_a_new_project_takes_the_files_settings_but_not_its_id_or_times():
    exported = memory_pb2.Project(
        id=7, name="atlas", description="d", colour="#fff", icon="i", notes="n",
        system_prompt="p", single_valued_labels=["lives_in"],
    )  # fmt: skip
    exported.create_time.FromSeconds(100)
    values = _project_values(exported)
    assert (values.id, values.HasField("create_time")) == (0, False)
    assert (values.name, values.notes, list(values.single_valued_labels)) == (
        "atlas",
        "n",
        ["lives_in"],
    )
    assert not values.HasField("retention")
    exported.retention.FromSeconds(86_400)
    assert _project_values(exported).retention.seconds == 86_400


class Projects:
    """create_project answering ALREADY_EXISTS for the names taken."""

    def __init__(self, taken: set[str], code: grpc.StatusCode = grpc.StatusCode.ALREADY_EXISTS):
        self.taken, self.code = taken, code
        self.tried: list[str] = []

    async def create_project(self, project: memory_pb2.Project) -> memory_pb2.Project:
        self.tried.append(project.name)
        if project.name in self.taken:
            raise NexusClientError(self.code, "taken")
        return memory_pb2.Project(id=5, name=project.name)


async def test_a_taken_name_gets_the_first_free_number():
    client = Projects({"atlas", "atlas (2)"})
    created = await _create_under_a_free_name(client, memory_pb2.Project(name="atlas"))  # type: ignore[arg-type]
    assert created.name == "atlas (3)"
    assert client.tried == ["atlas", "atlas (2)", "atlas (3)"]


async def test_any_other_refusal_is_not_retried_under_another_name():
    client = Projects({"atlas"}, code=grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(NexusClientError):
        await _create_under_a_free_name(client, memory_pb2.Project(name="atlas"))  # type: ignore[arg-type]
    assert client.tried == ["atlas"]


async def test_the_free_name_search_gives_up_after_its_tries():
    client = Projects({"atlas"} | {f"atlas ({n})" for n in range(2, FREE_NAME_TRIES + 5)})
    with pytest.raises(NexusClientError):
        await _create_under_a_free_name(client, memory_pb2.Project(name="atlas"))  # type: ignore[arg-type]
    assert len(client.tried) == FREE_NAME_TRIES
