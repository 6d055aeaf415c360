"""What memory formation keeps, merges or refuses (domain/formation.py's
``MemoryFormationJob``), run as the form:memories worker runs it on the fakes
of tests/fakes.py after the episode's extraction (tests/unit/extraction_world.py's
``World``), with a scripted model in-process answering both the extraction
(with memory candidates) and formation's question.

What the job is handed as an owner's similar memories is the search's
(``MemorySearch.keyword`` and ``semantic``: each store's bm25, the vector index)
and the embedder's: here ``EveryMemory`` hands over every live memory of the
fakes, whoever's it is, and ``Alike`` embeds every text alike, so each one
handed over counts as similar and what is kept of them is the domain's own
doing. The rules tested: an identical memory is NOTHING without a question,
the model's SUPERSEDE archives with history, only the owner's memories reach
the model, who forms what (USER, PROJECT and the agent), a session's episodes
form in time order and an older exchange changes nothing newer, forming again
changes nothing, and the memory cap refuses an episode whole.

Which exchanges form at all and the candidates extraction keeps:
tests/unit/test_formation_rules.py. The whole-server tests
(tests/e2e/service/test_memory_formation.py) keep the wiring: the worker path
from CreateEpisode to a memory SearchMemories finds, the two events an episode
ends with on WatchExtractions, and the project's setting and the session's
user as the RPCs take them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from nexus_grpc.core import jobs
from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.models import JobState, MemoryFormation, MemoryKind, Tier
from nexus_grpc.core.records import EXTRACTION_DONE, EXTRACTION_FAILED, ExtractionEvent, Memory
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.episode_followups import queue_followups
from nexus_grpc.domain.formation import HANDOFF, MemoryFormationJob
from nexus_grpc.domain.retrieval.hits import MemoryHit
from nexus_grpc.llm.formation_prompts import FORM_USER, parse_memories
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.extraction_world import World
from tests.unit.scripted_models import MODEL

DECISION_PROMPT = "Kept memories:"
MARCH, JUNE, JANUARY = 1_709_251_200, 1_717_200_000, 1_704_067_200


def said(content: str, quote: str, about: str = "user", tier: str = "longterm") -> dict:
    return {"about": about, "title": content[:30], "content": content, "tier": tier, "quote": quote}


def extraction(*memories: dict) -> dict[str, Any]:
    return {"entities": [], "relationships": [], "ended": [], "memories": list(memories)}


Choose = Callable[[str, list[tuple[int, str]]], tuple[str, int]]


def deciding(choose: Choose) -> Callable[[str], dict[str, Any]]:
    """Answer formation questions: ``choose(candidate content, kept
    [(id, content)]) -> (action, memory_id)``, like a careful model."""

    def respond(prompt: str) -> dict[str, Any]:
        decisions = []
        for block in re.split(r"(?m)^Candidate ", prompt)[1:]:
            number = int(block.split(" ", 1)[0].rstrip(":"))
            found = re.search(r': "(.*)"', block.splitlines()[0])
            assert found is not None
            kept = [(int(i), c) for i, c in re.findall(r'- id (\d+)[^:]*: "(.*)"', block)]
            action, memory_id = choose(found.group(1), kept)
            decisions.append(
                {"candidate": number, "action": action, "memory_id": memory_id, "reason": "test"}
            )
        return {"decisions": decisions}

    return respond


@dataclass
class EveryMemory:
    """Formation's similar-memory search without an index: every live memory
    of the fakes, of any owner and kind."""

    uow: FakeUnitOfWork

    def _live(self, n: int) -> list[MemoryHit]:
        now = time.time()
        live = [
            m
            for m in self.uow.memories.rows.values()
            if m.tier != Tier.ARCHIVE and (m.expire_at is None or m.expire_at > now)
        ]
        return [MemoryHit(m, 1.0, ()) for m in live][:n]

    async def keyword(self, text: str, scope: Any, n: int) -> list[MemoryHit]:
        return self._live(n)

    async def semantic(self, text: str, scope: Any, n: int) -> list[MemoryHit]:
        return self._live(n)


class Alike:
    """An embedder by which every text is alike."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


@dataclass
class Forming:
    """A project, the extraction world and the formation job over it."""

    w: World = field(default_factory=World)
    cap: int = 100

    @property
    def uow(self) -> FakeUnitOfWork:
        return self.w.uow

    def project(self, formation: MemoryFormation | None = None) -> int:
        values: dict[str, Any] = {"name": f"p{len(self.uow.projects.rows) + 1}"}
        if formation is not None:
            values["memory_formation"] = int(formation)
        return self.uow.projects.insert(values).id

    def alices_session(self) -> int:
        """A session of a new project, whose user is alice."""
        return self.uow.sessions.insert("s", "", self.project(), {}, user_id="alice").id

    async def vegetarian(self, session_id: int) -> int:
        """Alice says, in March, that she is vegetarian: the memory it forms."""
        _, first = await self.tell(
            session_id,
            "I'm vegetarian these days.",
            said("The user is vegetarian.", "I'm vegetarian these days"),
            at=MARCH,
        )
        return operations(first)[0]["memory_id"]

    def decide(self, choose: Choose) -> None:
        self.w.model.rules = [r for r in self.w.model.rules if r[0] != DECISION_PROMPT]
        self.w.model.rules.insert(0, (DECISION_PROMPT, deciding(choose)))

    def store(self, session_id: int, user: str, *memories: dict, at: float = 0) -> int:
        """An episode as CreateEpisode stores it (its writer acted for the
        session's user), with its extraction's answer scripted."""
        self.w.model.on(f"User message:\n{user}\n", extraction(*memories))
        acts_for = self.uow.sessions.rows[session_id].user_id
        episode = self.uow.episodes.insert(
            session_id, user, "Noted, thanks for telling me.", {}, None, at or None,
            acts_for=acts_for,
        )  # fmt: skip
        queue_followups(self.uow, [episode], jobs.LIVE)
        return episode.id

    def job(self) -> MemoryFormationJob:
        memories = SimpleNamespace(cap=self.cap, embedder=Alike())
        return MemoryFormationJob(
            FakeDatabase(self.uow),  # type: ignore[arg-type]
            JobSignals(),
            EventBroadcaster(),
            self.w.model,  # type: ignore[arg-type]
            memories,  # type: ignore[arg-type]
            EveryMemory(self.uow),  # type: ignore[arg-type]
            model=MODEL,
            timeout=5.0,
        )

    async def form(self, episode_id: int) -> ExtractionEvent | None:
        """Run the episode's formation and commit it; its event, if it ended."""
        before = set(self.uow.events.rows)
        write = await self.job().run(episode_id)
        assert write is not None
        write(self.uow)
        ended = [
            event
            for i, (event, _) in sorted(self.uow.events.rows.items())
            if i not in before and "formation" in event.payload
        ]
        return ended[-1] if ended else None

    async def tell(self, session_id: int, user: str, *memories: dict, at: float = 0):
        episode_id = self.store(session_id, user, *memories, at=at)
        await self.w.extract(episode_id)
        event = await self.form(episode_id)
        assert event is not None
        return episode_id, event

    def live(self, kind: MemoryKind = MemoryKind.USER, user_id: str = "") -> list[Memory]:
        return [
            m
            for m in self.uow.memories.rows.values()
            if m.kind == kind and m.user_id == user_id and m.tier != Tier.ARCHIVE
        ]


def operations(event: ExtractionEvent) -> list[dict[str, Any]]:
    return event.payload["formation"]["operations"]


def actions(event: ExtractionEvent) -> list[str]:
    return [op["action"] for op in operations(event)]


# What forms ------------------------------------------------------------------------------


async def test_what_the_user_says_about_themselves_becomes_their_memory():
    f = Forming()
    s = f.alices_session()  # USER: the default
    ep, event = await f.tell(
        s, "I'm vegetarian now, so no meat suggestions please.",
        said("The user is vegetarian.", "I'm vegetarian now"),
    )  # fmt: skip
    [op] = operations(event)
    assert (op["action"], op["user_id"]) == ("ADD", "alice")
    [memory] = f.live(user_id="alice")
    assert memory.id == op["memory_id"] and memory.content == "The user is vegetarian."
    assert memory.source == "formation" and memory.source_episode_id == ep
    assert memory.tier == Tier.LONGTERM
    assert f.uow.episodes.get(ep).memory_state == JobState.DONE
    # One call made it: the extraction's, which the candidates rode on.
    [call] = f.w.model.calls
    assert "memories" in call.schema["properties"]
    assert "lasting facts and preferences the USER states" in call.prompt


async def test_a_repeat_in_other_words_is_already_known_and_asks_nothing():
    f = Forming()
    s = f.alices_session()
    old_id = await f.vegetarian(s)
    before = len(f.w.model.calls)
    _, again = await f.tell(
        s,
        "As I said, I am vegetarian.",
        said("The user is vegetarian.", "I am vegetarian"),
        at=MARCH + 60,
    )
    assert actions(again) == ["NOTHING"]
    assert operations(again)[0]["related_memory_id"] == old_id
    assert len(f.w.model.calls) == before + 1  # the extraction only
    assert [m.id for m in f.live(user_id="alice")] == [old_id]


async def test_a_changed_preference_supersedes_archiving_the_old_one_with_its_history():
    f = Forming()
    s = f.alices_session()
    old_id = await f.vegetarian(s)
    # A change: the careful model says the old one no longer holds.
    f.decide(lambda content, kept: ("SUPERSEDE", kept[0][0]))
    ep, changed = await f.tell(
        s,
        "I started eating fish again last month.",
        said("The user eats fish.", "I started eating fish again"),
        at=JUNE,
    )
    [op] = operations(changed)
    assert (op["action"], op["related_memory_id"]) == ("SUPERSEDE", old_id)
    assert changed.payload["formation"]["llm_calls"] == 1
    assert [m.content for m in f.live(user_id="alice")] == ["The user eats fish."]
    assert f.uow.memories.get(old_id).tier == Tier.ARCHIVE
    [entry] = f.uow.memories.page(old_id, None, 10)
    assert entry.episode_id == ep and entry.reason == "test"
    assert list(entry.changed) == ["tier"]


async def test_chatter_questions_and_the_assistants_claims_form_nothing():
    f = Forming()
    s = f.alices_session()
    ep, event = await f.tell(
        s, "Hi! Could you recommend a good book?",
        # A question is not a fact, and the AI's words are not the user's.
        said("Does the user like books?", "recommend a good book"),
        said("The user loves science fiction.", "Noted, thanks for telling me"),
        said("The user greeted the assistant.", "Hi"),
    )  # fmt: skip
    assert event.status == EXTRACTION_DONE
    assert operations(event) == [] and event.payload["formation"]["proposed"] == 0
    assert f.live(user_id="alice") == []
    assert f.uow.episodes.get(ep).memory_state == JobState.DONE


def test_candidates_must_rest_on_the_users_own_words():
    raw = [
        said("The user is vegetarian.", "I'm  VEGETARIAN, now"),
        said("The user likes jazz.", "jazz"),  # one word proves nothing
        said("The user owns a boat.", "I own a yacht"),  # not what was said
        said("The project ships weekly.", "we ship weekly", about="project"),  # not asked
        "not an object",
    ]
    kept = parse_memories(raw, "Well, I'm vegetarian now; we ship weekly.", FORM_USER)
    assert [c.content for c in kept] == ["The user is vegetarian."]
    assert [c.tier for c in kept] == ["longterm"]


# Whose memories --------------------------------------------------------------------------


async def test_a_users_facts_never_reach_another_users_prompt():
    f = Forming()
    p = f.project()
    alice = f.uow.sessions.insert("a", "", p, {}, user_id="alice").id
    bob = f.uow.sessions.insert("b", "", p, {}, user_id="bob").id
    lisbon_with_cat = "The user lives in Lisbon with a cat named Miso."
    moving = "The user lives in Lisbon."
    f.decide(lambda content, kept: ("SUPERSEDE", kept[0][0]) if content == moving else ("ADD", 0))
    await f.tell(
        alice,
        "I live in Lisbon with my cat Miso.",
        said(lisbon_with_cat, "I live in Lisbon with my cat Miso"),
    )
    await f.tell(
        alice,
        "I work from the Lisbon office.",
        said("The user works from the Lisbon office.", "I work from the Lisbon office"),
    )
    alices = f.live(user_id="alice")
    await f.tell(bob, "I live in Porto.", said("The user lives in Porto.", "I live in Porto"))
    [bobs] = f.live(user_id="bob")
    _, moved = await f.tell(bob, "I moved to Lisbon last week.", said(moving, "I moved to Lisbon"))
    [op] = operations(moved)
    assert (op["action"], op["user_id"]) == ("SUPERSEDE", "bob")
    # Every decision prompt the model received about bob's candidate holds his
    # memories only, though the search handed over alice's too.
    decisions = [
        c.prompt
        for c in f.w.model.calls
        if DECISION_PROMPT in c.prompt and f'"{moving}"' in c.prompt
    ]
    assert decisions
    for text in decisions:
        assert {int(i) for i in re.findall(r"- id (\d+)", text)} == {bobs.id}
        assert "The user lives in Porto." in text
        for m in alices:
            assert m.content not in text
    assert sorted(m.content for m in f.live(user_id="alice")) == sorted(m.content for m in alices)
    assert [m.content for m in f.live(user_id="bob")] == ["The user lives in Lisbon."]


async def test_a_project_that_forms_project_memories_forms_them_for_the_sessions_agent():
    f = Forming()
    p = f.project(MemoryFormation.USER_AND_PROJECT)
    s = f.uow.sessions.insert("s", "", p, {}, user_id="alice", agent_id="coder").id
    _, event = await f.tell(
        s, "We deploy on Fridays, and I prefer tabs.",
        said("The project deploys on Fridays.", "We deploy on Fridays", about="project"),
        said("The user prefers tabs.", "I prefer tabs"),
    )  # fmt: skip
    assert {(o["user_id"], o["action"]) for o in operations(event)} == {
        ("", "ADD"),
        ("alice", "ADD"),
    }
    [project] = f.live(MemoryKind.PROJECT)
    assert project.content == "The project deploys on Fridays."
    assert (project.project_id, project.agent_id) == (p, "coder")
    assert [m.content for m in f.live(user_id="alice")] == ["The user prefers tabs."]


async def test_a_session_that_names_no_user_is_not_asked_for_user_memories():
    f = Forming()
    anonymous = f.uow.sessions.insert("s", "", f.project(), {}).id
    ep = f.store(anonymous, "I'm Dana and I love tea.", said("The user loves tea.", "I love tea"))
    assert f.uow.episodes.get(ep).memory_state is None
    await f.w.extract(ep)
    assert "memories" not in f.w.model.calls[0].schema["properties"]
    assert f.uow.jobs.pending_job(jobs.FORM_MEMORIES, ep) is None
    assert f.live(user_id="") == []


# Time, re-runs and the cap ---------------------------------------------------------------


async def test_a_sessions_episodes_form_in_time_order_and_old_news_changes_nothing():
    f = Forming()
    s = f.alices_session()
    f.decide(lambda content, kept: ("SUPERSEDE", kept[0][0]))
    # June's exchange is stored before March's: March's forms first all the same.
    june = f.store(
        s, "I live in Porto now.", said("The user lives in Porto.", "I live in Porto"), at=JUNE
    )
    march = f.store(
        s, "I live in Lisbon.", said("The user lives in Lisbon.", "I live in Lisbon"), at=MARCH
    )
    for ep in (june, march):
        await f.w.extract(ep)
    # June's job, run first, waits for March's: put back a little later,
    # having formed nothing (the worker drops the job that ran with the write).
    ran = f.uow.jobs.pending_job(jobs.FORM_MEMORIES, june)
    assert ran is not None
    f.uow.jobs.finish([ran.id])
    assert await f.form(june) is None
    again = f.uow.jobs.pending_job(jobs.FORM_MEMORIES, june)
    assert again is not None and again.run_after > time.time()
    assert f.uow.episodes.get(june).memory_state == JobState.PENDING
    assert f.live(user_id="alice") == []
    assert actions(await f.form(march)) == ["ADD"]  # type: ignore[arg-type]
    assert actions(await f.form(june)) == ["SUPERSEDE"]  # type: ignore[arg-type]
    assert [m.content for m in f.live(user_id="alice")] == ["The user lives in Porto."]
    # January's, stored last, is older than what is known: it changes nothing.
    _, event = await f.tell(
        s, "I live in Berlin.", said("The user lives in Berlin.", "I live in Berlin"), at=JANUARY
    )
    [op] = operations(event)
    assert op["action"] == "NOTHING" and "older" in op["reason"]
    assert [m.content for m in f.live(user_id="alice")] == ["The user lives in Porto."]


async def test_forming_an_episode_again_changes_nothing():
    f = Forming()
    s = f.alices_session()
    ep, first = await f.tell(
        s,
        "I am allergic to peanuts.",
        said("The user is allergic to peanuts.", "allergic to peanuts"),
    )
    assert actions(first) == ["ADD"]
    # ExtractEpisode: extracted again, its memories due again.
    HANDOFF.extraction_requeued(f.uow, f.uow.sessions.get(s), ep)
    await f.w.extract(ep)
    rerun = await f.form(ep)
    assert rerun is not None and actions(rerun) == ["NOTHING"]
    assert f.uow.episodes.get(ep).memory_state == JobState.DONE
    assert len(f.live(user_id="alice")) == 1


async def test_at_the_memory_cap_an_episodes_formation_is_refused_whole():
    f = Forming(cap=1)
    s = f.alices_session()
    await f.tell(
        s,
        "I am allergic to peanuts.",
        said("The user is allergic to peanuts.", "allergic to peanuts"),
    )
    f.decide(lambda content, kept: ("ADD", 0))
    capped, event = await f.tell(
        s, "I also love hiking.", said("The user loves hiking.", "I also love hiking")
    )
    assert event.status == EXTRACTION_FAILED
    assert "memory cap" in event.error and operations(event) == []
    episode = f.uow.episodes.get(capped)
    assert episode.memory_state == JobState.FAILED and "memory cap" in episode.memory_error
    assert len(f.live(user_id="alice")) == 1
