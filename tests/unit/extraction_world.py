"""The extraction World: the fakes of tests/fakes.py, a scripted model
(tests/unit/scripted_models.py) and the extract worker's two steps, with
seeding helpers for a project, a session and an episode. Not a test module:
the extraction, requeue, resolution and formation unit tests all build on it
(tests/unit/test_extraction_rules.py, test_extraction_requeue.py,
test_resolution_use_case.py, test_formation_job.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nexus_grpc.core.events import EventBroadcaster
from nexus_grpc.core.records import ExtractionEvent
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.domain.extraction import Extraction
from tests.fakes import FakeDatabase, FakeUnitOfWork
from tests.unit.scripted_models import MODEL, ScriptedModel


@dataclass
class World:
    """The fakes, the scripted model, and the extract worker's two steps."""

    uow: FakeUnitOfWork = field(default_factory=FakeUnitOfWork)
    model: ScriptedModel = field(default_factory=ScriptedModel)

    def project(self, name: str = "p") -> int:
        return self.uow.projects.insert({"name": name}).id

    def session(self, project_id: int = 0, user_id: str = "") -> int:
        n = len(self.uow.sessions.rows) + 1
        return self.uow.sessions.insert(f"s{n}", "", project_id, {}, user_id=user_id).id

    def episode(
        self, session_id: int, user: str = "hello", ai: str = "hi", at: float | None = None
    ) -> int:
        return self.uow.episodes.insert(session_id, user, ai, {}, None, at).id

    def extraction(self) -> Extraction:
        return Extraction(
            FakeDatabase(self.uow),  # type: ignore[arg-type]
            JobSignals(),
            EventBroadcaster(),
            self.model,  # type: ignore[arg-type]
            model=MODEL,
            timeout=5.0,
        )

    async def extract(self, episode_id: int) -> ExtractionEvent:
        """Extract the episode and commit it; returns its event."""
        write = await self.extraction().run(episode_id)
        assert write is not None
        event_id = write(self.uow)
        return self.uow.events.rows[event_id][0]
