"""What our interceptor chain costs a call, in microseconds, old code against new.

    .venv/bin/python -m bench.interceptor_cost --base REV [--rounds 7] [--calls 20000]

The req/s of bench/ab_hot_path.py move by several per cent from one second to
the next on shared cores; this isolates the part of a call the interceptors
own. For each tree (``git archive REV``, and the working tree) it runs, in a
fresh interpreter with that tree's ``nexus_grpc``, the production chain
(``server.interceptor_chain``: shutdown gate, auth with a one-key ring, service
interceptor) as grpc.aio runs it, ``intercept_service`` then the handler, on a
servicer function that returns at once and a stand-in ServicerContext, for a
unary call and for a server stream of 3 messages. Access logs are off (their
cost does not depend on the interceptors). The two trees alternate, each
``--rounds`` times; each round reports its mean CPU microseconds a call
(process time), and the table shows each tree's fastest round (the least
disturbed) and new ÷ old.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEY = "interceptor-cost-key-0123"
METHOD = "/nexus.memory.v1.MemoryService/GetEpisode"


class Context:
    """The few ServicerContext methods the interceptors call."""

    def __init__(self) -> None:
        self.done: list[Any] = []

    def time_remaining(self) -> float | None:
        return None

    def set_trailing_metadata(self, _metadata: Any) -> None:
        pass

    def add_done_callback(self, callback: Any) -> None:
        self.done.append(callback)

    def code(self) -> None:
        return None

    async def abort(self, code: Any, details: str) -> None:
        raise RuntimeError(f"aborted: {code} {details}")


async def measure_one(calls: int) -> dict[str, float]:
    """Microseconds a call through this interpreter's ``nexus_grpc`` chain."""
    import grpc

    from nexus_grpc.gen.nexus.memory.v1 import memory_service_pb2 as memory_pb2
    from nexus_grpc.rpc.auth import KeyRing
    from nexus_grpc.runtime.config import Settings
    from nexus_grpc.server import ShutdownGate, interceptor_chain

    logging.getLogger("nexus_grpc").setLevel(logging.WARNING)
    keys = KeyRing.from_dict({"keys": [{"key": KEY, "name": "bench", "users": "*"}]})
    chain = interceptor_chain(ShutdownGate(), keys, None, Settings())
    metadata = (("authorization", f"Bearer {KEY}"),)
    request = memory_pb2.GetEpisodeRequest(id=1)
    answer = memory_pb2.Episode(id=1)

    async def unary(_request: Any, _context: Any) -> Any:
        return answer

    async def stream(_request: Any, _context: Any) -> Any:
        for _ in range(3):
            yield answer

    class Details:
        method = METHOD
        invocation_metadata = metadata

    def handler_for(kind: str) -> Any:
        if kind == "unary":
            return grpc.unary_unary_rpc_method_handler(unary)
        return grpc.unary_stream_rpc_method_handler(stream)

    async def resolve(kind: str) -> Any:
        # As grpc.aio's server does: each interceptor gets the next one's
        # intercept_service as its continuation.
        async def last(_details: Any) -> Any:
            return handler_for(kind)

        continuation = last
        for interceptor in reversed(chain):

            def step(details: Any, interceptor: Any = interceptor, nxt: Any = continuation) -> Any:
                return interceptor.intercept_service(nxt, details)

            continuation = step
        return await continuation(Details())

    async def one_unary() -> None:
        handler = await resolve("unary")
        context = Context()
        await handler.unary_unary(request, context)
        for callback in context.done:
            callback(context)

    async def one_stream() -> None:
        handler = await resolve("stream")
        context = Context()
        async for _ in handler.unary_stream(request, context):
            pass
        for callback in context.done:
            callback(context)

    async def bare() -> None:
        # The servicer function alone, called as grpc would: the floor.
        await unary(request, Context())

    out = {}
    for name, fn in (("bare", bare), ("unary", one_unary), ("stream", one_stream)):
        for _ in range(calls // 10):  # warm
            await fn()
        # CPU time, not wall time: a neighbour taking the core does not count.
        started = time.process_time()
        for _ in range(calls):
            await fn()
        out[name] = (time.process_time() - started) / calls * 1e6
    return out


def run_tree(tree: Path, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure", "--calls", str(calls)],
        check=True, capture_output=True, text=True, cwd=tree, env=env,
    )  # fmt: skip
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the old revision (git rev)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(measure_one(args.calls))))
        return 0
    if not args.base:
        parser.error("--base is required")
    from bench.ab_hot_path import unpack

    with tempfile.TemporaryDirectory(prefix="interceptor-cost-") as tmp:
        old_tree = Path(tmp) / "old"
        commit = unpack(args.base, old_tree)
        rounds: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for r in range(args.rounds):
            order = (("old", old_tree), ("new", ROOT))
            for name, tree in order if r % 2 == 0 else reversed(order):
                figures = run_tree(tree, args.calls)
                rounds[name].append(figures)
                print(f"  {name}: " + ", ".join(f"{k} {v:.2f} µs" for k, v in figures.items()),
                      file=sys.stderr)  # fmt: skip
    print(f"old: {args.base} ({commit[:10]}); new: the working tree; {args.rounds} rounds of"
          f" {args.calls} calls each, alternating; fastest round of each")  # fmt: skip
    print("| µs a call | old | new | new ÷ old |")
    print("|---|---|---|---|")
    labels = {
        "bare": "servicer function alone (the floor)",
        "unary": "unary call through gate + auth + service interceptor",
        "stream": "server stream of 3 through the same",
    }
    for key, label in labels.items():
        old = min(f[key] for f in rounds["old"])
        new = min(f[key] for f in rounds["new"])
        print(f"| {label} | {old:.2f} | {new:.2f} | {new / old:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
