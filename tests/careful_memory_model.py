"""The careful model for memory formation: an LLM stand-in that answers as a
careful reader of a memory evaluation set would (docs/memory-eval.md).

An ``OllamaStub`` responder (tests/ollama_stub.py), built from set files:

- an **extraction** request whose schema asks for ``memories`` gets the
  episode's scripted candidates (found by the exchange's exact text in the
  prompt), without the set's answer keys, and no entities;
- a **formation** question (the prompt lists "Kept memories:") is answered
  from the set: a kept memory stating the candidate's fact is NOTHING (UPDATE
  when the candidate says it more fully: ``refines``); one on the same topic
  but another fact is SUPERSEDE, whatever the dates (that older news changes
  nothing is the server's rule, which the evaluation must test, so the model
  does not apply it for the server); otherwise ADD. Facts are named by their texts, and a
  candidate text two users share is read as the fact of the owner whose
  memories it is shown with;
- anything else gets ``{}``.

It knows what a careful reader knows (the exchange, the candidate and the
memories it is shown, read against the set) and nothing of the service's
internals. For tests only; production code does not know it exists.

As a subprocess (``make eval-memories`` starts it)::

    python tests/careful_memory_model.py --data bench/eval/memory-dev.json --port 0
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.ollama_stub import GENERATION_ENDPOINTS, OllamaStub, Reply

DECISION_MARK = "Kept memories:"
ANSWER_KEYS = ("fact", "topic", "refines")


def _fold(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


@dataclass(frozen=True)
class Said:
    fact: str
    topic: str
    owner: str
    refines: bool


class CarefulMemoryModel:
    def __init__(self, paths: Sequence[str]) -> None:
        self.episodes: dict[str, list[dict[str, Any]]] = {}
        self.by_text: dict[str, list[Said]] = {}
        for path in paths:
            data = json.loads(Path(path).read_text())
            for project in data["projects"]:
                for session in project["sessions"]:
                    for e in session["episodes"]:
                        self.episodes[
                            f"User message:\n{e['user']}\n\nAI response:\n{e['assistant']}"
                        ] = e["memories"]
                        for m in e["memories"]:
                            owner = (
                                "" if m.get("about") == "project" else session.get("user_id", "")
                            )
                            said = Said(m["fact"], m["topic"], owner, bool(m.get("refines")))
                            self.by_text.setdefault(_fold(m["content"]), []).append(said)

    def __call__(self, endpoint: str, body: dict[str, Any]) -> Reply | None:
        if endpoint not in GENERATION_ENDPOINTS:
            return None
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        if DECISION_MARK in prompt:
            return Reply.of({"decisions": self.decide(prompt)})
        schema = body.get("format") or {}
        if isinstance(schema, dict) and "memories" in schema.get("properties", {}):
            for exchange, memories in self.episodes.items():
                if exchange in prompt:
                    return Reply.of(
                        {
                            "entities": [],
                            "relationships": [],
                            "ended": [],
                            "memories": [
                                {k: v for k, v in m.items() if k not in ANSWER_KEYS}
                                for m in memories
                            ],
                        }
                    )
            return Reply.of({"entities": [], "relationships": [], "ended": [], "memories": []})
        return Reply.of({})

    def _facts(self, text: str, owners: set[str] | None = None) -> Said | None:
        found = self.by_text.get(_fold(text), [])
        if owners:
            found = [s for s in found if s.owner in owners] or found
        return found[0] if found else None

    def decide(self, prompt: str) -> list[dict[str, Any]]:
        decisions = []
        for block in re.split(r"(?m)^Candidate ", prompt)[1:]:
            head = block.splitlines()[0]
            number = int(head.split(" ", 1)[0].rstrip(":"))
            content = re.search(r': "(.*)"$', head).group(1)  # type: ignore[union-attr]
            kept_facts = [
                (int(i), self._facts(text))
                for i, _since, text in re.findall(
                    r'- id (\d+)(?: \(since ([\d-]+)\))?: "(.*)"', block
                )
            ]
            owners = {s.owner for _, s in kept_facts if s is not None}
            mine = self._facts(content, owners)
            action, memory_id = "ADD", 0
            if mine is not None:
                for i, theirs in kept_facts:
                    if theirs is None:
                        continue
                    if theirs.fact == mine.fact:
                        action, memory_id = ("UPDATE" if mine.refines else "NOTHING"), i
                        break
                    if theirs.topic == mine.topic:
                        # A new value of the same topic supersedes, whatever
                        # the dates: that older news changes nothing is the
                        # server's rule to keep (domain/formation.py), not
                        # the model's, so the evaluation tests the server.
                        action, memory_id = "SUPERSEDE", i
                        break
            decisions.append(
                {"candidate": number, "action": action, "memory_id": memory_id, "reason": "careful"}
            )
        return decisions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the careful memory model, an Ollama stand-in")
    parser.add_argument("--data", nargs="+", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    stub = OllamaStub(port=args.port, responder=CarefulMemoryModel(args.data))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with stub:
        print(f"OLLAMA_STUB_READY {stub.url}", flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
