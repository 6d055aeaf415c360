"""What the ``nexus-grpc`` command (nexus_grpc/cli.py) refuses from its
arguments before it dials anything (the status and the words of each
refusal), the count line, stdout's closed-pipe wrapper, and the GetUsage
request ``usage`` makes of its options (nexus_grpc/ops/against_server/usage.py,
with a scripted client; its refusals are tests/unit/test_client_usage_table.py's).
The commands against a running server are tests/e2e/client/ (test_privacy_cli.py,
test_usage_cli.py, test_cli_closed_pipe.py, test_light_install.py) and
tests/e2e/api/test_auth.py."""

from __future__ import annotations

import io

import pytest

from nexus_grpc import cli
from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
from nexus_grpc.ops.against_server.usage import usage_table


def test_import_into_a_negative_project_id_is_refused_with_status_2(capsys):
    assert cli.main(["import", "export.jsonl", "--into", "-1"]) == 2
    assert capsys.readouterr().err == "import: --into must be a project id, got -1\n"


def test_a_restore_into_an_existing_project_is_refused_with_status_2(capsys):
    assert cli.main(["import", "export.jsonl", "--restore", "--into", "3"]) == 2
    assert capsys.readouterr().err == (
        "import: --restore writes a new project; it takes no --into\n"
    )


def test_a_client_certificate_without_its_key_is_refused_before_dialling():
    with pytest.raises(SystemExit) as refused:
        cli.main(["export", "4", "--cert", "client.pem"])
    assert str(refused.value) == "export: --cert and --key go together (mTLS)"


def test_a_client_file_that_cannot_be_read_is_named_by_the_command(tmp_path):
    with pytest.raises(SystemExit) as refused:
        cli.main(["export-user", "--user", "ann", "--cacert", str(tmp_path / "ca.pem")])
    assert str(refused.value).startswith("export-user: [Errno 2]")
    assert "ca.pem" in str(refused.value)


def test_doctor_refuses_half_a_client_certificate():
    with pytest.raises(SystemExit) as refused:
        cli.main(["doctor", "--key", "client.key"])
    assert str(refused.value) == (
        "doctor: --cert and --key go together (a client certificate for mTLS)"
    )


def test_doctor_refuses_a_client_certificate_without_a_ca(tmp_path):
    (tmp_path / "c.pem").write_bytes(b"chain")
    (tmp_path / "c.key").write_bytes(b"key")
    with pytest.raises(SystemExit) as refused:
        cli.main(["doctor", "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "c.key")])
    assert str(refused.value) == "doctor: --cert/--key need --cacert (mTLS runs over TLS)"


def test_doctor_names_a_file_it_cannot_read(tmp_path):
    with pytest.raises(SystemExit) as refused:
        cli.main(["doctor", "--cacert", str(tmp_path / "gone.pem")])
    assert str(refused.value).startswith("doctor: [Errno 2]")


def test_the_count_line_lists_each_kind_in_order_or_says_nothing():
    assert cli._counted({"sessions": 2, "episodes": 14}) == "2 sessions, 14 episodes"
    assert cli._counted({}) == "nothing"


class _Pipe(io.StringIO):
    def __init__(self, broken: bool) -> None:
        super().__init__()
        self.broken = broken

    def write(self, text: str) -> int:
        if self.broken:
            raise BrokenPipeError
        return super().write(text)

    def flush(self) -> None:
        if self.broken:
            raise BrokenPipeError


def test_stdout_passes_writes_through_until_its_reader_is_gone():
    out = cli._Stdout(_Pipe(broken=False))
    out.writelines(["a", "b\n"])
    assert out.getvalue() == "ab\n"  # other attributes reach the stream itself
    gone = cli._Stdout(_Pipe(broken=True))
    with pytest.raises(cli._ReaderGone):
        gone.write("x")
    with pytest.raises(cli._ReaderGone):
        gone.flush()
    # Not an Exception: no command's own `except OSError` mistakes it for its failure.
    assert not issubclass(cli._ReaderGone, Exception)


class _UsageClient:
    def __init__(self) -> None:
        self.asked: dict = {}

    async def get_usage(self, **kw) -> memory_pb2.GetUsageResponse:
        self.asked = kw
        return memory_pb2.GetUsageResponse(tenant=kw["tenant"] or "own")


async def test_usage_asks_for_the_window_back_from_now_in_the_bucket_named():
    client = _UsageClient()
    text = await usage_table(client, tenant="acme", since="2h", bucket="hour", now=1_000_000.0)  # type: ignore[arg-type]
    asked = client.asked
    assert (asked["project_id"], asked["tenant"]) == (0, "acme")
    assert (asked["start_time"].seconds, asked["end_time"].seconds) == (1_000_000 - 7200, 1_000_000)
    assert asked["bucket"] == memory_pb2.USAGE_BUCKET_HOUR
    assert text.startswith("LLM usage of tenant 'acme', ")
