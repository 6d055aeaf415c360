"""What the ``nexus-grpc`` transfer, privacy and usage commands
(nexus_grpc/cli.py) print and return for each result their operation gives,
with the operation scripted in place (no server): where an import went, a
resumed or renamed import, an import that failed part way and how to finish
it, a restore, an export's counts, and the status of each failure. The
operations themselves are tests/unit/test_ops_*'s; the commands against a
server are tests/e2e/client/'s."""

from __future__ import annotations

import grpc
import pytest

from nexus_grpc import cli
from nexus_grpc.client.base import NexusClientError
from nexus_grpc.ops.against_server import forgetting, transfer, usage
from nexus_grpc.ops.against_server.transfer import ImportResult, RestoreResult


class _Client:
    async def __aenter__(self) -> _Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


@pytest.fixture(autouse=True)
def no_dialling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_client", lambda args: _Client())


def _importing(monkeypatch, result=None, *, told=(), fails=None):
    async def import_project(client, lines, *, into, on_project):
        for project_id, resumed, renamed in told:
            on_project(project_id, resumed, renamed)
        if fails is not None:
            raise fails
        return result

    monkeypatch.setattr(transfer, "import_project", import_project)


def _file(tmp_path) -> str:
    path = tmp_path / "export.jsonl"
    path.write_text("", encoding="utf-8")
    return str(path)


def test_an_import_into_a_new_project_prints_its_id_and_what_it_wrote(
    monkeypatch, tmp_path, capsys
):
    result = ImportResult(12, False, {"sessions": 2, "episodes": 9}, {})
    _importing(monkeypatch, result, told=[(12, False, "")])
    assert cli.main(["import", _file(tmp_path)]) == 0
    out = capsys.readouterr()
    assert out.out == "12\n"  # stdout: the id alone, for a script
    assert out.err == (
        "import: importing into new project 12\nimported into project 12: 2 sessions, 9 episodes\n"
    )


def test_a_resumed_import_under_a_new_name_says_both(monkeypatch, tmp_path, capsys):
    result = ImportResult(12, True, {"episodes": 3}, {"sessions": 2, "episodes": 9})
    _importing(monkeypatch, result, told=[(12, True, "atlas (2)")])
    assert cli.main(["import", _file(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "import: project 12 already holds this file's first records:"
        " importing what it does not hold yet"
    )
    assert err[1].endswith("the new project is called 'atlas (2)'")
    assert err[2] == ("imported into project 12: 3 episodes; already there: 2 sessions, 9 episodes")


def test_an_import_with_nothing_new_says_the_project_holds_it_all(monkeypatch, tmp_path, capsys):
    _importing(monkeypatch, ImportResult(12, True, {}, {"sessions": 2}))
    assert cli.main(["import", _file(tmp_path)]) == 0
    assert capsys.readouterr().err == (
        "import: nothing to import: project 12 already holds everything in this file (2 sessions)\n"
    )


def test_an_import_that_fails_part_way_says_how_to_finish_it(monkeypatch, tmp_path, capsys):
    failure = NexusClientError(grpc.StatusCode.UNAVAILABLE, "server gone")
    _importing(monkeypatch, told=[(12, False, "")], fails=failure)
    assert cli.main(["import", _file(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == [
        "import: UNAVAILABLE: server gone",
        "import: project 12 holds what was imported so far; the same command with --into 12"
        " finishes it (nothing is imported twice)",
    ]


def test_an_import_that_fails_before_any_project_names_none(monkeypatch, tmp_path, capsys):
    _importing(monkeypatch, fails=ValueError("line 1: not an ExportRecord: x"))
    assert cli.main(["import", _file(tmp_path)]) == 1
    assert capsys.readouterr().err == "import: line 1: not an ExportRecord: x\n"


def test_an_import_of_a_missing_file_fails_with_status_1(tmp_path, capsys):
    assert cli.main(["import", str(tmp_path / "gone.jsonl")]) == 1
    assert capsys.readouterr().err.startswith("import: [Errno 2]")


def test_a_restore_prints_the_new_project_or_that_nothing_was_restored(
    monkeypatch, tmp_path, capsys
):
    async def restored(client, lines):
        return RestoreResult(14, {"sessions": 1})

    monkeypatch.setattr(transfer, "restore_project", restored)
    assert cli.main(["import", _file(tmp_path), "--restore"]) == 0
    out = capsys.readouterr()
    assert (out.out, out.err) == ("14\n", "restored into new project 14: 1 sessions\n")

    async def refused(client, lines):
        raise NexusClientError(grpc.StatusCode.PERMISSION_DENIED, "admin only")

    monkeypatch.setattr(transfer, "restore_project", refused)
    assert cli.main(["import", _file(tmp_path), "--restore"]) == 1
    assert capsys.readouterr().err == (
        "import: PERMISSION_DENIED: admin only\nimport: nothing was restored\n"
    )


def test_an_export_to_a_file_counts_what_it_wrote_or_fails_with_status_1(
    monkeypatch, tmp_path, capsys
):
    async def exported(client, project_id, out):
        out.write("{}\n")
        return {"sessions": 1, "episodes": 4}

    monkeypatch.setattr(transfer, "export_project", exported)
    target = tmp_path / "out.jsonl"
    assert cli.main(["export", "3", "-o", str(target)]) == 0
    assert target.read_text() == "{}\n"
    assert capsys.readouterr().err == "exported 1 sessions, 4 episodes\n"
    assert cli.main(["export", "3", "-o", str(tmp_path / "no" / "dir.jsonl")]) == 1
    assert capsys.readouterr().err.startswith("export: [Errno 2]")


def test_an_empty_user_export_says_it_exported_nothing(monkeypatch, capsys):
    async def nothing(client, user_id, project_id, out):
        return {}

    monkeypatch.setattr(forgetting, "export_user", nothing)
    assert cli.main(["export-user", "--user", "ann"]) == 0
    assert capsys.readouterr().err == "exported nothing\n"


def test_forget_user_failing_returns_1_naming_the_command(monkeypatch, capsys):
    async def refused(client, user_id, project_id, **kw):
        raise NexusClientError(grpc.StatusCode.NOT_FOUND, "user 'ann' holds nothing here")

    monkeypatch.setattr(forgetting, "forget_user", refused)
    assert cli.main(["forget-user", "--user", "ann", "--quiet"]) == 1
    assert capsys.readouterr().err == "forget-user: NOT_FOUND: user 'ann' holds nothing here\n"


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (usage.UsageError("no project named 'x' in this key's tenant"), 2),
        (NexusClientError(grpc.StatusCode.UNAVAILABLE, "down"), 1),
    ],
)
def test_usage_fails_2_for_a_bad_command_line_and_1_for_the_server(
    monkeypatch, capsys, failure, status
):
    async def table(client, **kw):
        raise failure

    monkeypatch.setattr(usage, "usage_table", table)
    assert cli.main(["usage"]) == status
    assert capsys.readouterr().err == f"usage: {failure}\n"
