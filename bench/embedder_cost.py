"""CPU per text of each offline embedder, side by side in one process.

    .venv/bin/python bench/embedder_cost.py

Each model runs on one thread (as the server runs it: one thread per call, the
parallelism is across calls), and the CPU time of the process is read around
each loop, so a busy host inflates both models alike and the ratio holds.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from nexus_grpc.embedding import E5Embedder, MiniLMEmbedder  # noqa: E402

TURN = (
    "[8:18 pm on 6 July, 2023] Caroline: I've got lots of kids' books- classics, stories from "
    "different cultures, educational books, all of that. {i}\n"
    'Melanie: I loved reading "Charlotte\'s Web" as a kid. It was so cool seeing how '
    "friendship and compassion can make a difference."
)
QUERY = "What did Caroline research last week about adoption? {i}"


def measure(model: E5Embedder | MiniLMEmbedder, rounds: int = 3) -> tuple[float, float]:
    """(CPU ms per query, CPU ms per chat-length turn), best of ``rounds``."""
    model._warm_sync()
    per_query = per_turn = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for i in range(30):
            model._embed_queries_sync([QUERY.format(i=i)])
        per_query = min(per_query, (time.process_time() - start) / 30 * 1000)
        start = time.process_time()
        model._embed_sync([TURN.format(i=i) for i in range(32)])
        per_turn = min(per_turn, (time.process_time() - start) / 32 * 1000)
    return per_query, per_turn


def main() -> None:
    results = {}
    for cls in (MiniLMEmbedder, E5Embedder):
        results[cls.__name__] = measure(cls(threads=1))
    base_q, base_t = results["MiniLMEmbedder"]
    print("| embedder | CPU ms / query | CPU ms / chat turn | × MiniLM |")
    print("|---|---|---|---|")
    for name, (q, t) in results.items():
        print(f"| {name} | {q:.2f} | {t:.2f} | {q / base_q:.1f} / {t / base_t:.1f} |")


if __name__ == "__main__":
    main()
