"""GetProjectStats: what a project holds, counted under the rules of the reads.

A dashboard (``nexus-grpc console``'s first page) needs a project's figures
without paging through 100,000 episodes.  The counts follow what the reads
would return, so a number never reveals what a read would hide:

- another tenant's project is NOT_FOUND, as every read of it is;
- sessions and episodes past the project's retention, and expired memories,
  are not counted (no read returns them);
- USER memories count only for the users the key may act for: a key that may
  act for alice learns nothing about bob's memories, not even how many.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.storage import Database
from nexus_grpc.domain import validation as v
from nexus_grpc.domain.validation import quoted
from nexus_grpc.errors import InvalidArgument

#: The most users named, and the most entities a caller may ask for.
MAX_USERS = 100
MAX_TOP_ENTITIES = 100
#: ProjectStats's fields a read_mask may name, by the count that fills them.
_SESSIONS = ("sessions",)
_EPISODES = ("episodes", "jobs_pending", "jobs_failed")
_MEMORIES = ("project_memories", "user_memories", "archived_memories", "users", "user_count")
_GRAPH = ("entities", "relationships")
_TOP = ("top_entity_ids",)
FIELDS = ("project_id", *_SESSIONS, *_EPISODES, *_MEMORIES, *_GRAPH, *_TOP)


#: What the store counts: sessions, (episodes, pending, failed), memories by
#: (kind, user, archived), (entities, facts), the most connected entities.
_Counted: TypeAlias = tuple[
    int, tuple[int, int, int], list[tuple[int, str, bool, int]], tuple[int, int], list[int]
]


@dataclass(frozen=True)
class ProjectStats:
    project_id: int
    sessions: int
    episodes: int
    project_memories: int
    user_memories: int
    archived_memories: int
    entities: int
    relationships: int
    jobs_pending: int
    jobs_failed: int
    #: (user_id, memories), most first, at most MAX_USERS.
    users: tuple[tuple[str, int], ...]
    user_count: int
    top_entity_ids: tuple[int, ...]


def _read_mask(paths: Sequence[str]) -> list[str]:
    unknown = [p for p in paths if p not in FIELDS]
    if unknown:
        shown = ", ".join(quoted(p, 40) for p in unknown[:5])
        raise InvalidArgument(
            f"read_mask names fields ProjectStats does not have: {shown}"
            f" (it has: {', '.join(FIELDS)})",
            field="read_mask",
        )
    return list(paths)


class ProjectStatistics:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(
        self, project_id: int, top_entities: int = 0, read_mask: Sequence[str] = ()
    ) -> ProjectStats:
        v.positive_id("project_id", project_id)
        if not 0 <= top_entities <= MAX_TOP_ENTITIES:
            raise InvalidArgument(
                f"top_entities must be 0 to {MAX_TOP_ENTITIES}, got {top_entities}",
                field="top_entities",
            )
        wanted = set(_read_mask(read_mask))

        def asked(fields: tuple[str, ...]) -> bool:
            return not wanted or bool(wanted.intersection(fields))

        tenant = tenancy.visible()

        def read(uow: UnitOfWork) -> _Counted:
            uow.projects.get(project_id, tenant)
            at = time.time()
            retention = uow.projects.retention_of(project_id)
            cutoff = None if retention is None else at - retention
            return (
                uow.projects.count_sessions(project_id, cutoff) if asked(_SESSIONS) else 0,
                uow.projects.count_episodes(project_id, cutoff) if asked(_EPISODES) else (0, 0, 0),
                uow.projects.count_memories(project_id, at) if asked(_MEMORIES) else [],
                uow.projects.count_graph(project_id) if asked(_GRAPH) else (0, 0),
                uow.projects.most_connected(project_id, top_entities)
                if top_entities and asked(_TOP)
                else [],
            )

        (
            sessions,
            (episodes, pending, failed),
            memories,
            (entities, facts),
            top,
        ) = await self.db.read(read)
        project_memories = user_memories = archived = 0
        by_user: dict[str, int] = {}
        for kind, user_id, is_archived, n in memories:
            if kind == MemoryKind.USER:
                # Judged here, in the call's own context, where its key is bound.
                if not tenancy.may_act_for(user_id):
                    continue
                user_memories += n
                by_user[user_id] = by_user.get(user_id, 0) + n
            else:
                project_memories += n
            archived += n if is_archived else 0
        users = sorted(by_user.items(), key=lambda item: (-item[1], item[0]))
        return ProjectStats(
            project_id=project_id,
            sessions=sessions,
            episodes=episodes,
            project_memories=project_memories,
            user_memories=user_memories,
            archived_memories=archived,
            entities=entities,
            relationships=facts,
            jobs_pending=pending,
            jobs_failed=failed,
            users=tuple(users[:MAX_USERS]),
            user_count=len(users),
            top_entity_ids=tuple(top),
        )
