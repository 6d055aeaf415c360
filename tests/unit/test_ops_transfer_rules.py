"""What ``export`` and ``import`` decide without a server
(nexus_grpc/ops/against_server/transfer.py): the JSON Lines an export writes
and how a line that is not a record is refused, the keys an import compares
records by (what counts as the same episode, memory or summary), the
project values a new project is created with, the free name taken when the
file's is in use, and (with a scripted client) an import's decisions: a file
out of shape refused, a new project created with formation off and the
file's set back at the end, a second run writing only what the project does
not hold, and the refusals of another tenant's project, of a session outside
any project and of an episode the server refuses. The whole export and import
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
    import_project,
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


# ---- an import's decisions, with a scripted client ------------------------------------------


def _lines(*records: memory_pb2.ExportRecord) -> list[str]:
    return [json.dumps(record_to_json(r)) for r in records]


FILE_PROJECT = memory_pb2.ExportRecord(
    project=memory_pb2.Project(
        id=3, name="atlas", notes="n", memory_formation=memory_pb2.MEMORY_FORMATION_USER
    )
)
FILE_SESSION = memory_pb2.ExportRecord(
    session=memory_pb2.Session(id=30, external_id="s-ext", name="first")
)


def _file_episode(episode_id: int, text: str, at: int) -> memory_pb2.ExportRecord:
    episode = memory_pb2.Episode(id=episode_id, session_id=30, user_message=text)
    episode.occur_time.FromSeconds(at)
    return memory_pb2.ExportRecord(episode=episode)


class ImportClient:
    """The calls an import makes, answered from what the "server" holds."""

    def __init__(self, *, held_session=None, held_records=(), tenant="acme", failing=()):
        self.held_session = held_session
        self.held_records = list(held_records)
        self.tenant = tenant
        self.failing = set(failing)
        self.calls: list[tuple[str, object]] = []

    async def get_session(self, *, external_id):
        if self.held_session is None:
            raise NexusClientError(grpc.StatusCode.NOT_FOUND, "no session")
        return self.held_session

    async def get_project(self, *, id):
        return memory_pb2.Project(
            id=id, tenant="acme", memory_formation=memory_pb2.MEMORY_FORMATION_OFF
        )

    async def get_service_status(self):
        return memory_pb2.ServiceStatus(tenant=self.tenant)

    async def export_project(self, *, project_id, timeout):  # noqa: ASYNC109 - the client's
        for record in self.held_records:
            yield record

    async def create_project(self, *, project):
        self.calls.append(
            (
                "create_project",
                memory_pb2.Project(name=project.name, memory_formation=project.memory_formation),
            )
        )
        return memory_pb2.Project(id=50, name=project.name)

    async def create_session(self, *, session):
        self.calls.append(("create_session", session.project_id))
        return memory_pb2.Session(id=60, project_id=session.project_id)

    async def import_episodes(self, requests, *, timeout):  # noqa: ASYNC109 - the client's
        sent = [
            (r.episode.session_id, r.episode.user_message, r.episode.request_id) for r in requests
        ]
        self.calls.append(("import_episodes", sent))
        answer = memory_pb2.ImportEpisodesResponse(
            created=len(sent), episode_ids=range(70, 70 + len(sent))
        )
        for index, (_, text, _) in enumerate(sent):
            if text in self.failing:
                answer.failed += 1
                answer.errors.add(index=index, message="refused")
        return answer

    async def update_project(self, *, project, update_mask):
        self.calls.append(
            ("update_project", (project.id, project.memory_formation, list(update_mask.paths)))
        )
        return project


@pytest.mark.parametrize(
    ("records", "says"),
    [
        ([FILE_SESSION], "the file must begin with its project record"),
        ([], "the file must begin with its project record"),
        ([FILE_PROJECT, FILE_PROJECT], "the file holds more than one project"),
        ([FILE_PROJECT, memory_pb2.ExportRecord()], "an empty ExportRecord"),
        (
            [FILE_PROJECT, memory_pb2.ExportRecord(memory_revision=memory_pb2.MemoryRevision())],
            "a memory_revision comes before any memory",
        ),
    ],
)
async def test_a_file_out_of_shape_is_refused(records, says):
    client = ImportClient()
    with pytest.raises(ValueError, match=says):
        await import_project(client, _lines(*records))  # type: ignore[arg-type]


async def test_a_new_import_creates_the_project_with_formation_off_then_sets_the_files():
    """The file brings the memories its episodes formed: forming them again
    while its episodes go in would say them twice."""
    client = ImportClient()
    told = []
    lines = _lines(
        FILE_PROJECT, FILE_SESSION, _file_episode(31, "hi", 100), _file_episode(32, "bye", 200)
    )
    result = await import_project(client, lines, on_project=lambda *a: told.append(a))  # type: ignore[arg-type]
    assert client.calls == [
        (
            "create_project",
            memory_pb2.Project(name="atlas", memory_formation=memory_pb2.MEMORY_FORMATION_OFF),
        ),
        ("create_session", 50),
        ("import_episodes", [(60, "hi", "import-31"), (60, "bye", "import-32")]),
        ("update_project", (50, memory_pb2.MEMORY_FORMATION_USER, ["memory_formation"])),
    ]
    assert told == [(50, False, "")]
    assert (result.project_id, result.resumed) == (50, False)
    assert result.created == {"project": 1, "session": 1, "episode": 2}


async def test_an_import_run_again_writes_only_what_the_project_does_not_hold():
    held = [
        FILE_SESSION,
        memory_pb2.ExportRecord(session=memory_pb2.Session(id=80, external_id="s-ext")),
        _file_episode(81, "hi", 100),
    ]
    held[2].episode.session_id = 80
    held[2].episode.occur_time.nanos = 400  # read back a few hundred ns off: the same
    client = ImportClient(
        held_session=memory_pb2.Session(id=80, project_id=9), held_records=held[1:]
    )
    lines = _lines(
        FILE_PROJECT, FILE_SESSION, _file_episode(31, "hi", 100), _file_episode(32, "bye", 200)
    )
    result = await import_project(client, lines)  # type: ignore[arg-type]
    assert [c for c in client.calls if c[0] != "update_project"] == [
        ("import_episodes", [(80, "bye", "import-32")]),
    ]
    assert (result.project_id, result.resumed) == (9, True)
    assert result.created == {"episode": 1}
    assert result.existing == {"project": 1, "session": 1, "episode": 1}


async def test_an_import_into_another_tenants_project_is_refused_before_writing():
    client = ImportClient(tenant="bravo")
    with pytest.raises(ValueError, match="project 9 belongs to tenant 'acme', not to this key's"):
        await import_project(client, _lines(FILE_PROJECT, FILE_SESSION), into=9)  # type: ignore[arg-type]
    assert client.calls == []


async def test_a_file_whose_session_is_on_the_server_outside_any_project_is_refused():
    client = ImportClient(held_session=memory_pb2.Session(id=80, project_id=0))
    with pytest.raises(
        ValueError, match="session s-ext of this file is already on the server, outside any"
    ):
        await import_project(client, _lines(FILE_PROJECT, FILE_SESSION))  # type: ignore[arg-type]
    assert client.calls == []


async def test_an_episode_the_server_refuses_fails_the_import_naming_its_exported_id():
    client = ImportClient(failing={"bye"})
    lines = _lines(
        FILE_PROJECT, FILE_SESSION, _file_episode(31, "hi", 100), _file_episode(32, "bye", 200)
    )
    with pytest.raises(
        ValueError, match=r"^1 episodes were not imported; the first \(exported id 32\): refused"
    ):
        await import_project(client, lines)  # type: ignore[arg-type]
