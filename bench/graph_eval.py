"""``make eval-graph``: the graph evaluation against a server started for it.

Starts ``nexus-grpc serve`` on an ephemeral port over a fresh data directory
(nexus_grpc/loadtest/launcher.py, as every benchmark does) with one of two
LLMs, runs ``nexus-grpc eval graph``'s evaluation against it and prints the
report:

- the careful model (default): tests/careful_model.py as a subprocess, an
  Ollama stand-in that answers as a careful reader of the set would, so what
  falls short is the service's;
- a real model (``--llama-server BIN --model GGUF``; ``make eval-graph
  LLM=e2e`` passes what bench/e2e_llm/setup.sh built): llama.cpp's
  llama-server serving it, reached with ``--llm-api openai``, as ``make
  e2e-llm`` does. Its quality is the model's; the run checks the plumbing
  holds (every episode DONE or FAILED with a reason, nothing crashes).

    python -m bench.graph_eval --data bench/eval/graph-dev.json [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nexus_grpc.evaluation.graph_eval import evaluate, format_report
from nexus_grpc.loadtest.launcher import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
READY = "OLLAMA_STUB_READY "


@contextmanager
def careful_model(
    data: Sequence[str], work: Path, script: str = "careful_model.py"
) -> Iterator[list[str]]:
    """The careful stand-in (``tests/<script>``) as a subprocess; yields the
    server flags that reach it."""
    log = (work / "careful-model.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / script), "--data", *data, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # its first line says where it listens
        if not line.startswith(READY):
            raise SystemExit(f"the careful model did not start: {line!r}; see {log.name}")
        yield ["--ollama-url", line[len(READY) :].strip()]
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@contextmanager
def real_model(args: argparse.Namespace, work: Path) -> Iterator[list[str]]:
    """llama-server serving the GGUF model, as ``make e2e-llm`` runs it."""
    from bench.e2e_llm.run import ALIAS, LlamaServer

    llama = LlamaServer(
        args.llama_server,
        args.model,
        ctx=args.ctx,
        threads=args.threads,
        log_path=work / "llama-server.log",
    )
    try:
        llama.wait_ready(180)
        yield [
            "--llm-api", "openai", "--llm-url", llama.url,
            "--extraction-model", ALIAS, "--summary-model", ALIAS, "--selection-model", ALIAS,
            "--llm-timeout", str(args.llm_timeout), "--llm-concurrency", "1",
            "--job-max-attempts", str(args.job_max_attempts),
        ]  # fmt: skip
    finally:
        llama.stop()


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="nexus-eval-graph-"))
    llm = real_model(args, work) if args.llama_server else careful_model(args.data, work)
    with llm as flags:
        # --server-tree: another checkout's server (a before/after run); started in
        # that tree, since `python -m` puts the working directory first on sys.path.
        tree = args.server_tree.resolve() if args.server_tree else None
        server = ServerProcess(
            work / "data",
            *flags,
            env={"PYTHONPATH": str(tree)} if tree else None,
            cwd=tree,
            keep_log=False,
        )
        server.start(timeout=300)
        try:
            report = asyncio.run(
                evaluate(
                    server.target,
                    args.data,
                    episode_timeout=args.episode_timeout,
                    settle_timeout=args.settle_timeout,
                )
            )
        finally:
            server.stop()
            (work / "server.log").write_text(server.log_tail(400))
    report["llm"] = (
        f"{args.model.name} on llama.cpp llama-server (-c {args.ctx} -t {args.threads})"
        if args.llama_server
        else "the careful model (tests/careful_model.py)"
    )
    report["work_dir"] = str(work)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", nargs="+", default=[str(ROOT / "bench/eval/graph-dev.json")])
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", type=Path, help="also write the JSON report here")
    p.add_argument(
        "--server-tree", type=Path, help="serve another checkout's code (before/after runs)"
    )
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds (eval graph's)")
    p.add_argument("--settle-timeout", type=float, default=None, help="seconds (eval graph's)")
    real = p.add_argument_group("a real model (make eval-graph LLM=e2e)")
    real.add_argument("--llama-server", type=Path, help="llama-server binary")
    real.add_argument("--model", type=Path, help="GGUF model file")
    real.add_argument("--ctx", type=int, default=8192, help="llama-server context (-c)")
    real.add_argument("--threads", type=int, default=1, help="llama-server threads (-t)")
    real.add_argument("--llm-timeout", type=float, default=120.0, help="nexus --llm-timeout")
    real.add_argument("--job-max-attempts", type=int, default=6, help="nexus --job-max-attempts")
    args = p.parse_args(argv)
    if bool(args.llama_server) != bool(args.model):
        p.error("--llama-server and --model go together")
    # A real model retries for minutes before it gives an episode up.
    slow = args.llama_server is not None
    args.episode_timeout = args.episode_timeout or (1800.0 if slow else 60.0)
    args.settle_timeout = args.settle_timeout or (600.0 if slow else 60.0)
    # Stopped (kill, or a background job's SIGINT being ignored): leave no
    # llama-server or nexus server behind; the context managers stop them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    report = run(args)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(f"LLM: {report['llm']}; {time.monotonic() - started:.0f} s in all;"
              f" server log and files in {report['work_dir']}")  # fmt: skip
        print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
