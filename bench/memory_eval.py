"""``make eval-memories``: the memory formation evaluation against a server
started for it (docs/memory-eval.md).

Starts ``nexus-grpc serve`` on an ephemeral port over a fresh data directory
with one of two LLMs, as ``make eval-graph`` does (bench/graph_eval.py):
the careful stand-in (tests/careful_memory_model.py, default), or a real
model (``--llama-server BIN --model GGUF``; ``make eval-memories LLM=e2e``),
then runs ``nexus-grpc eval memories``' evaluation and prints the report.

    python -m bench.memory_eval --data bench/eval/memory-dev.json [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.graph_eval import careful_model, real_model
from nexus_grpc.evaluation.memory_eval import evaluate, format_report
from nexus_grpc.loadtest.launcher import ServerProcess

ROOT = Path(__file__).resolve().parent.parent


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="nexus-eval-memories-"))
    llm = (
        real_model(args, work)
        if args.llama_server
        else careful_model(args.data, work, "careful_memory_model.py")
    )
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
            report = asyncio.run(evaluate(server.target, args.data, timeout=args.episode_timeout))
        finally:
            server.stop()
            (work / "server.log").write_text(server.log_tail(400))
    report["llm"] = (
        f"{args.model.name} on llama.cpp llama-server (-c {args.ctx} -t {args.threads})"
        if args.llama_server
        else "the careful model (tests/careful_memory_model.py)"
    )
    report["work_dir"] = str(work)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", nargs="+", default=[str(ROOT / "bench/eval/memory-dev.json")])
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", type=Path, help="also write the JSON report here")
    p.add_argument(
        "--server-tree", type=Path, help="serve another checkout's code (before/after runs)"
    )
    p.add_argument("--episode-timeout", type=float, default=None, help="seconds a formation")
    real = p.add_argument_group("a real model (make eval-memories LLM=e2e)")
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
    args.episode_timeout = args.episode_timeout or (1800.0 if args.llama_server else 60.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    report = run(args)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(
            f"LLM: {report['llm']}; {time.monotonic() - started:.0f} s in all;"
            f" server log and files in {report['work_dir']}"
        )
        print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
