"""The README's Docker section on a podman host whose hard limits are below
podman's defaults: the plain `docker run` stops there with `error setting
rlimit type 7`, so the section names that error and gives the run that works,
with the limits deploy/engine.sh gives `make image-test`'s containers: this
shell's own, the process limit no higher than kernel.pid_max. Its lines are
run here in a shell whose open-files limit is lowered, as on such a host."""

from __future__ import annotations

import subprocess

from tests import readme

HEADING = "## Docker"


def _section() -> str:
    text = readme.README.read_text()
    start = text.index(f"\n{HEADING}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _podman_block() -> str:
    [block] = [b for b in readme.blocks(HEADING, "sh") if "podman run" in b]
    return block


def test_the_docker_section_names_the_rlimit_error_and_the_run_past_it():
    assert "error setting rlimit type 7: operation not permitted" in _section()
    run = _podman_block().split("podman run", 1)[1]
    assert "--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc nexus-grpc" in run
    assert "-p 50051:50051 -v nexus-data:/data" in run  # the same run as docker's


def test_the_limits_it_gives_the_container_are_this_shells_own():
    limits = _podman_block().split("podman run", 1)[0]
    # A hard open-files limit far below podman's 1,048,576, as on the hosts
    # where the plain run fails (soft and hard); lowering one needs no privilege.
    script = f"ulimit -n 4096\n{limits}echo $nofile $nproc $pid_max $(ulimit -Hu)\n"
    done = subprocess.run(["bash", "-euc", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    nofile, nproc, pid_max, hard_nproc = done.stdout.split()
    assert nofile == "4096"
    assert int(nproc) <= int(pid_max)
    if hard_nproc != "unlimited":
        assert int(nproc) <= int(hard_nproc)
