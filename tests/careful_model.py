"""The careful model: an LLM stand-in that answers the graph's questions as a
careful reader of a graph evaluation set would (docs/graph-eval.md).

It is an ``OllamaStub`` responder (tests/ollama_stub.py), built from set files:

- an **extraction** request (its answer schema asks for ``entities``, and the
  prompt holds an episode's exact user and assistant text) gets that
  episode's scripted extraction, without the gold keys: the names as the text
  writes them, which is what exercises resolution;
- a **resolution** question (the prompt has "Names and their candidates") is
  answered from the gold clusters: for each numbered name, the candidate
  whose name and aliases belong to the gold cluster that name has in the
  episode it came from, else 0 ("none of these");
- anything else (a session summary, which quotes the episodes too) gets a
  plain sentence, or ``{}`` where a JSON answer is asked for.

It knows what a careful reader knows (the exchange and the candidates it is
shown, read against the set's answers) and nothing of the service's
internals. For tests only; production code does not know it exists.

As a subprocess (``make eval-graph`` starts it)::

    python tests/careful_model.py --data bench/eval/graph-dev.json --port 0

prints ``OLLAMA_STUB_READY http://127.0.0.1:PORT`` once listening, like
tests/ollama_stub.py.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexus_grpc.evaluation.graph_score import fold
from nexus_grpc.evaluation.graph_set import Episode, GraphSet, Project, load
from tests.ollama_stub import GENERATION_ENDPOINTS, OllamaStub, Reply

RESOLUTION_MARK = "Names and their candidates"
CONVERSATION_MARK = "Conversation:\n"
# How much of an episode's user text identifies it in a resolution prompt
# (the service clips the conversation it shows, and flattens what it quotes).
NEEDLE_CHARS = 120
SUMMARY = "The user and the assistant talked about the people, places and work they know."
# Types a model may give one thing under either (a technology is a concept).
_LOOSE = {"technology": {"technology", "concept"}, "concept": {"technology", "concept"}}

_NAME_LINE = re.compile(r'^(\d+)\. "(.*)" \(([a-z]+)\)(?::.*)?$')
_CANDIDATE_LINE = re.compile(r"^\s+- id (\d+): (.*)$")


@dataclass(frozen=True)
class Candidate:
    id: int
    name: str
    type: str
    aliases: tuple[str, ...]

    def names(self) -> list[str]:
        return [self.name, *self.aliases]


@dataclass(frozen=True)
class Question:
    number: int
    name: str
    type: str
    candidates: tuple[Candidate, ...]


def answer_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a request asks its answer to follow (Ollama's
    ``format``, or the OpenAI API's ``response_format``), or {}."""
    schema = body.get("format")
    if isinstance(schema, dict):
        return schema
    wrapped = body.get("response_format")
    if isinstance(wrapped, dict):
        inner = (wrapped.get("json_schema") or {}).get("schema")
        if isinstance(inner, dict):
            return inner
    return {}


def _types(etype: str) -> set[str]:
    return _LOOSE.get(etype, {etype})


def parse_candidate(text: str) -> Candidate | None:
    """ "id 7: Priya Raman (person); also called Priya, Raman; notes" after the id."""
    m = _CANDIDATE_LINE.match(text)
    if not m:
        return None
    parts = m.group(2).split("; ")
    head = re.match(r"^(.*) \(([a-z]+)\)$", parts[0])
    if not head:
        return None
    aliases: tuple[str, ...] = ()
    for part in parts[1:]:
        if part.startswith("also called "):
            aliases = tuple(a.strip() for a in part[len("also called ") :].split(", "))
            break
    return Candidate(int(m.group(1)), head.group(1), head.group(2), aliases)


def parse_questions(prompt: str) -> list[Question]:
    """The numbered names of a resolution prompt, each with its candidates."""
    block = prompt.split(RESOLUTION_MARK, 1)[1]
    questions: list[Question] = []
    current: tuple[int, str, str] | None = None
    candidates: list[Candidate] = []
    for line in block.splitlines():
        name = _NAME_LINE.match(line)
        if name:
            if current is not None:
                questions.append(Question(*current, tuple(candidates)))
            current = (int(name.group(1)), name.group(2), name.group(3))
            candidates = []
            continue
        candidate = parse_candidate(line)
        if candidate is not None and current is not None:
            candidates.append(candidate)
    if current is not None:
        questions.append(Question(*current, tuple(candidates)))
    return questions


class CarefulModel:
    """The responder: ``OllamaStub(responder=CarefulModel(graph_set))``."""

    def __init__(self, graph_set: GraphSet) -> None:
        self.set = graph_set
        self.episodes = graph_set.episodes()
        # Per project: a folded surface name -> the gold keys it names
        # anywhere in the set (scripted mentions and expected names/aliases).
        self.surfaces: list[dict[str, set[str]]] = []
        for project in graph_set.projects:
            names: dict[str, set[str]] = {}
            for e in project.entities.values():
                for n in (e.name, *e.aliases):
                    names.setdefault(fold(n), set()).add(e.key)
            for ep in project.episodes():
                for m in ep.entities:
                    names.setdefault(fold(m.name), set()).add(m.key)
            self.surfaces.append(names)
        #: What it was asked and answered, for tests to read.
        self.extractions = 0
        self.resolutions = 0
        self.unmatched: list[str] = []

    def __call__(self, endpoint: str, body: dict[str, Any]) -> Reply | None:
        if endpoint not in GENERATION_ENDPOINTS:
            return None  # tags, show, embed: the stub's own answers
        prompt = "\n".join(
            str(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict)
        ) or str(body.get("prompt", ""))
        schema = answer_schema(body)
        if RESOLUTION_MARK in prompt:
            self.resolutions += 1
            return Reply.of({"answers": self.resolve(prompt)})
        episode = self.episode_in(prompt) if "entities" in schema.get("properties", {}) else None
        if episode is not None:
            self.extractions += 1
            return Reply.of(episode.extraction())
        self.unmatched.append(prompt[:200])
        wants_json = body.get("format") is not None or body.get("response_format") is not None
        return Reply.of({} if wants_json else SUMMARY)

    # Extraction ------------------------------------------------------------------

    def episode_in(self, prompt: str) -> Episode | None:
        """The episode whose exact exchange the prompt holds (the longest, if
        one's text were inside another's)."""
        found = [e for e in self.episodes if e.user in prompt and e.assistant in prompt]
        return max(found, key=lambda e: len(e.user) + len(e.assistant), default=None)

    # Resolution ------------------------------------------------------------------

    def resolve(self, prompt: str) -> list[dict[str, int]]:
        conversation = prompt.split(CONVERSATION_MARK, 1)[-1].split(RESOLUTION_MARK, 1)[0]
        flat = " ".join(conversation.split())
        # The exchange the names came from; a later retry shows the recent
        # user messages that named the entity instead.
        context = [e for e in self.episodes if " ".join(e.user.split())[:NEEDLE_CHARS] in flat]
        answers = []
        for q in parse_questions(prompt):
            answers.append({"name": q.number, "entity_id": self._choose(q, context)})
        return answers

    def _choose(self, q: Question, context: Sequence[Episode]) -> int:
        if not context:
            return 0
        project = self.set.projects[context[0].project]
        key = self._mention_key(q, context, project)
        if key is None:
            return 0
        for c in q.candidates:
            if self._candidate_key(c, project) == key:
                return c.id
        return 0

    def _mention_key(self, q: Question, context: Sequence[Episode], project: Project) -> str | None:
        """The gold cluster of the name in the episode(s) it came from."""
        folded = fold(q.name)
        keys = {
            m.key
            for e in context
            if e.project == context[0].project
            for m in e.entities
            if fold(m.name) == folded and m.type in _types(q.type)
        }
        if len(keys) == 1:
            return keys.pop()
        return self._only(self.surfaces[context[0].project].get(folded, set()), q.type, project)

    def _candidate_key(self, c: Candidate, project: Project) -> str | None:
        """The gold cluster every one of the candidate's names can be."""
        index = self.surfaces[self.set.projects.index(project)]
        possible: set[str] | None = None
        for n in c.names():
            keys = {
                k for k in index.get(fold(n), set()) if project.entities[k].type in _types(c.type)
            }
            if not keys:
                continue
            possible = keys if possible is None else possible & keys
        return self._only(possible or set(), c.type, project)

    @staticmethod
    def _only(keys: Iterable[str], etype: str, project: Project) -> str | None:
        fitting = {k for k in keys if project.entities[k].type in _types(etype)}
        return fitting.pop() if len(fitting) == 1 else None


def careful_stub(paths: Sequence[str | Path], **stub_kw: Any) -> OllamaStub:
    """An OllamaStub (not started) answering as the careful model of ``paths``."""
    return OllamaStub(responder=CarefulModel(load(paths)), **stub_kw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the careful model: an LLM stand-in for a set")
    parser.add_argument("--data", nargs="+", required=True, help="graph evaluation set files")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--record", type=Path, help="append each request as a JSON line")
    args = parser.parse_args(argv)
    stub = careful_stub(args.data, host=args.host, port=args.port, record_path=args.record)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with stub:
        print(f"OLLAMA_STUB_READY {stub.url}", flush=True)
        done.wait()
    responder = stub.responder
    if isinstance(responder, CarefulModel):
        print(
            json.dumps(
                {
                    "extractions": responder.extractions,
                    "resolutions": responder.resolutions,
                    "other": len(responder.unmatched),
                }
            ),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
