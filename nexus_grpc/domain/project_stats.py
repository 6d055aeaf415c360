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
from dataclasses import dataclass
from typing import TypeAlias

from nexus_grpc.core import tenancy
from nexus_grpc.core.models import MemoryKind
from nexus_grpc.core.storage import Connection, Database
from nexus_grpc.domain import validation as v
from nexus_grpc.errors import InvalidArgument
from nexus_grpc.store import project_stats as stats_store
from nexus_grpc.store import projects as project_store

#: The most users named, and the most entities a caller may ask for.
MAX_USERS = 100
MAX_TOP_ENTITIES = 100


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


class ProjectStatistics:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, project_id: int, top_entities: int = 0) -> ProjectStats:
        v.positive_id("project_id", project_id)
        if not 0 <= top_entities <= MAX_TOP_ENTITIES:
            raise InvalidArgument(
                f"top_entities must be 0 to {MAX_TOP_ENTITIES}, got {top_entities}",
                field="top_entities",
            )
        tenant = tenancy.visible()

        def read(conn: Connection) -> _Counted:
            project_store.get(conn, project_id, tenant)
            at = time.time()
            retention = project_store.retention_of(conn, project_id)
            cutoff = None if retention is None else at - retention
            return (
                stats_store.sessions(conn, project_id, cutoff),
                stats_store.episodes(conn, project_id, cutoff),
                stats_store.memories(conn, project_id, at),
                stats_store.graph(conn, project_id),
                stats_store.most_connected(conn, project_id, top_entities) if top_entities else [],
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
