"""``nexus-grpc bench``'s two refusals that tests/unit/test_bench_results.py
leaves out (nexus_grpc/ops/against_server/bench.py): an --rpc list that names
nothing, and a --cacert it cannot read, each status 2 before anything is
dialled. Its arithmetic, option checks, warnings and table are
tests/unit/test_bench_results.py's; runs against a server are
tests/e2e/client/test_bench.py's."""

from __future__ import annotations

import argparse

from nexus_grpc.ops.against_server import bench


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_an_rpc_list_that_names_nothing_is_refused_with_status_2(capsys):
    assert bench.main(_args("--rpc", " , ")) == 2
    err = capsys.readouterr().err
    assert "nexus-grpc bench: unknown --rpc ' , '; expected health, create_episode" in err


def test_a_cacert_that_cannot_be_read_is_refused_with_status_2(tmp_path, capsys):
    missing = tmp_path / "ca.pem"
    assert bench.main(_args("--cacert", str(missing))) == 2
    assert capsys.readouterr().err.startswith("nexus-grpc bench: [Errno 2]")
