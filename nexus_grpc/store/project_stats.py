"""A project's figures, counted in the database (GetProjectStats).

Each count is one aggregate over an index the reads already use (sessions by
project, episodes by session, memories by project, entities by scope), so a
project of 100,000 episodes is counted without reading a row into Python.
Which users' counts a caller may see is the domain's rule; here every user
is counted.
"""

from __future__ import annotations

from nexus_grpc.core.models import JobState, MemoryKind, Tier
from nexus_grpc.store.sql import OnConnection

_PENDING, _FAILED = int(JobState.PENDING), int(JobState.FAILED)


class ProjectCounts(OnConnection):
    """The part of ``ProjectRepository`` whose rows this module holds, on one
    connection (``SqlProjects`` in store/unit_of_work.py is the whole)."""

    __slots__ = ()

    def count_sessions(self, project_id: int, cutoff: float | None) -> int:
        """The project's sessions; with a retention ``cutoff``, those created
        since it or holding an episode that happened since it (as the reads
        keep them)."""
        if cutoff is None:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM sessions WHERE project_id = ?", (project_id,)
            )
        else:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM sessions s WHERE s.project_id = ? AND (s.created_at >= ?"
                " OR EXISTS (SELECT 1 FROM episodes e WHERE e.session_id = s.id AND e.occur_at >="
                " ?))",
                (project_id, cutoff, cutoff),
            )
        return int(row.fetchone()[0])

    def count_episodes(self, project_id: int, cutoff: float | None) -> tuple[int, int, int]:
        """(episodes, pieces of their work pending, pieces failed): an episode's
        embedding, extraction and memory formation each count once."""
        states = ("embed_state", "extract_state", "memory_state")
        pending = " + ".join(f"CASE WHEN e.{s} = {_PENDING} THEN 1 ELSE 0 END" for s in states)
        failed = " + ".join(f"CASE WHEN e.{s} = {_FAILED} THEN 1 ELSE 0 END" for s in states)
        row = self.conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM({pending}), 0), COALESCE(SUM({failed}), 0)"
            " FROM sessions s JOIN episodes e ON e.session_id = s.id"
            " WHERE s.project_id = ? AND e.occur_at >= ?",
            (project_id, float("-inf") if cutoff is None else cutoff),
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def count_memories(self, project_id: int, at: float) -> list[tuple[int, str, bool, int]]:
        """(kind, user_id, archived, count) of the memories stored in the
        project that have not expired at ``at``."""
        rows = self.conn.execute(
            "SELECT kind, user_id, tier, COUNT(*) FROM memories"
            " WHERE project_id = ? AND kind IN (?, ?) AND (expire_at IS NULL OR expire_at > ?)"
            " GROUP BY kind, user_id, tier",
            (project_id, int(MemoryKind.PROJECT), int(MemoryKind.USER), at),
        )
        return [(int(r[0]), str(r[1]), int(r[2]) == Tier.ARCHIVE, int(r[3])) for r in rows]

    def count_graph(self, project_id: int) -> tuple[int, int]:
        """(entities, facts that hold now) of the project's graph."""
        entities = self.conn.execute(
            "SELECT COUNT(*) FROM entities WHERE project_id = ? AND session_id = 0", (project_id,)
        ).fetchone()[0]
        facts = self.conn.execute(
            "SELECT COUNT(*) FROM entities e JOIN relationships r ON r.from_id = e.id"
            " WHERE e.project_id = ? AND e.session_id = 0 AND r.invalid_at IS NULL",
            (project_id,),
        ).fetchone()[0]
        return int(entities), int(facts)

    def most_connected(self, project_id: int, limit: int) -> list[int]:
        """The ids of the project's entities with the most relationships (every
        interval, at either end), most first, ties by id."""
        rows = self.conn.execute(
            "SELECT e.id, (SELECT COUNT(*) FROM relationships r WHERE r.from_id = e.id)"
            " + (SELECT COUNT(*) FROM relationships r WHERE r.to_id = e.id) AS degree"
            " FROM entities e WHERE e.project_id = ? AND e.session_id = 0"
            " ORDER BY degree DESC, e.id LIMIT ?",
            (project_id, limit),
        )
        return [int(r[0]) for r in rows]
