"""What an erasure needs of the store, in its own words: the receipts, what
a user or a project holds, and the removal of episodes, sessions, memories,
graph rows and records by id (domain/erasure.py decides what goes and in
what steps; this module only runs the statements, in the caller's
transaction).

One class implements ``core.repositories.ErasureRepository`` directly on a
connection of either database: the statements are the same on both, with
the id lists bound as one JSON parameter (``dialect.json_ints``).

A removal queues no job: the domain queues the index jobs that drop the
rows' vector points in the same transaction, before the rows go (a job reads
its target's tenant from the row; domain/erasure.drop_points).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs as job_kinds
from nexus_grpc.core.erasure import Alias, Counts, EpisodeFallout, Erasure, Target
from nexus_grpc.core.graph import EntityAlias, EntityEpisode, Evidence
from nexus_grpc.core.models import MemoryKind
from nexus_grpc.core.records import MemoryUsage
from nexus_grpc.core.storage import Connection
from nexus_grpc.store import dialect
from nexus_grpc.store.episodes import SqlEpisodes
from nexus_grpc.store.graph import ALIAS_COLUMNS
from nexus_grpc.store.sql import now

_COLUMNS = (
    "id, tenant, kind, state, phase, user_id, project_id, counts, planned, carry, principal,"
    " started_at, finished_at"
)

#: Jobs whose target is an episode and that only make sense while it lives.
_EPISODE_WORK = (job_kinds.EXTRACT_EPISODE, job_kinds.FORM_MEMORIES)
#: Jobs whose target is a memory.
_MEMORY_WORK = (job_kinds.EXPIRE_MEMORY, job_kinds.PURGE_MEMORY_HISTORY)


def _ids(ids: Iterable[int]) -> str:
    return json.dumps(sorted({int(i) for i in ids}))


def _erasure(r: Sequence[Any]) -> Erasure:
    return Erasure(
        id=int(r[0]),
        tenant=r[1],
        kind=int(r[2]),
        state=int(r[3]),
        phase=r[4],
        user_id=r[5],
        project_id=int(r[6]),
        counts=Counts.from_dict(json.loads(r[7] or "{}")),
        planned=Counts.from_dict(json.loads(r[8] or "{}")),
        carry=json.loads(r[9] or "{}"),
        principal=r[10],
        started_at=float(r[11]),
        finished_at=r[12],
    )


class ErasureStore:
    """``ErasureRepository`` on one connection."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @property
    def _ints(self) -> str:
        return dialect.json_ints(self.conn)

    def _count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self.conn.execute(sql, params).fetchone()[0])

    # -- receipts ------------------------------------------------------------------------

    def start(self, target: Target, digest: str, principal: str) -> Erasure:
        row = self.conn.execute(
            f"INSERT INTO erasures (tenant, kind, user_id, user_digest, project_id, state, phase,"
            f" principal, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
            (
                target.tenant,
                target.kind,
                target.user_id,
                digest,
                target.project_id,
                e.RUNNING,
                e.PLANNED,
                principal,
                now(),
            ),
        ).fetchone()
        return _erasure(row)

    def get(self, erasure_id: int) -> Erasure | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM erasures WHERE id = ?", (erasure_id,)
        ).fetchone()
        return None if row is None else _erasure(row)

    def digest_of(self, erasure_id: int) -> str:
        row = self.conn.execute(
            "SELECT user_digest FROM erasures WHERE id = ?", (erasure_id,)
        ).fetchone()
        return "" if row is None else str(row[0])

    def running_for(self, tenant: str, digest: str) -> list[Erasure]:
        """The user's erasures that are running, in the tenant."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM erasures WHERE tenant = ? AND user_digest = ? AND state = ?"
            " ORDER BY id",
            (tenant, digest, e.RUNNING),
        ).fetchall()
        return [_erasure(r) for r in rows]

    def page(
        self, tenant: str | None, digest: str | None, before_id: int | None, limit: int
    ) -> list[Erasure]:
        """Newest first."""
        clauses: list[str] = ["id < ?"]
        params: list[Any] = [before_id if before_id is not None else 2**62]
        if tenant is not None:
            clauses.append("tenant = ?")
            params.append(tenant)
        if digest is not None:
            clauses.append("user_digest = ?")
            params.append(digest)
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM erasures WHERE {' AND '.join(clauses)}"
            " ORDER BY id DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_erasure(r) for r in rows]

    def save(self, erasure: Erasure) -> None:
        self.conn.execute(
            "UPDATE erasures SET state = ?, phase = ?, user_id = ?, counts = ?, planned = ?,"
            " carry = ?, finished_at = ? WHERE id = ?",
            (
                erasure.state,
                erasure.phase,
                erasure.user_id,
                json.dumps(erasure.counts.as_dict()),
                json.dumps(erasure.planned.as_dict()),
                json.dumps(erasure.carry),
                erasure.finished_at,
                erasure.id,
            ),
        )

    def forgotten(self, tenant: str) -> dict[str, float]:
        """Digest of every user of the tenant an erasure has finished with,
        and when the latest of them started."""
        rows = self.conn.execute(
            "SELECT user_digest, MAX(started_at) FROM erasures WHERE tenant = ? AND kind = ?"
            " AND state = ? GROUP BY user_digest",
            (tenant, e.USER, e.DONE),
        ).fetchall()
        return {str(r[0]): float(r[1]) for r in rows}

    def bury_requests(self, digests: Iterable[str], erasure_id: int) -> None:
        self.conn.executemany(
            "INSERT INTO erased_requests (digest, erasure_id, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT (digest) DO NOTHING",
            [(d, erasure_id, now()) for d in digests],
        )

    def buried(self, digest: str) -> int | None:
        """The erasure that took the write this request id made, if one did."""
        row = self.conn.execute(
            "SELECT erasure_id FROM erased_requests WHERE digest = ?", (digest,)
        ).fetchone()
        return None if row is None else int(row[0])

    # -- what a user holds ---------------------------------------------------------------

    def _user_session_clause(self, project_id: int) -> tuple[str, tuple[Any, ...]]:
        if project_id:
            return " AND s.project_id = ?", (project_id,)
        return "", ()

    def user_sessions(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        more, params = self._user_session_clause(project_id)
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT s.id FROM sessions s WHERE s.tenant = ? AND s.user_id = ?{more}"
                " AND s.id > ? ORDER BY s.id LIMIT ?",
                (tenant, user_id, *params, after, limit),
            )
        ]

    def episodes_in_sessions(
        self, session_ids: Sequence[int], limit: int, after: int = 0
    ) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT id FROM episodes WHERE session_id IN (SELECT value FROM {self._ints})"
                " AND id > ? ORDER BY id LIMIT ?",
                (_ids(session_ids), after, limit),
            )
        ]

    def user_episodes_elsewhere(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        """Episodes written acting for the user in sessions that are not theirs."""
        more, params = self._user_session_clause(project_id)
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT e.id FROM episodes e JOIN sessions s ON s.id = e.session_id"
                f" WHERE s.tenant = ? AND e.acts_for = ? AND s.user_id <> ?{more}"
                " AND e.id > ? ORDER BY e.id LIMIT ?",
                (tenant, user_id, user_id, *params, after, limit),
            )
        ]

    def user_memories(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[int]:
        more, params = (" AND project_id = ?", (project_id,)) if project_id else ("", ())
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT id FROM memories WHERE tenant = ? AND kind = ? AND user_id = ?{more}"
                " AND id > ? ORDER BY id LIMIT ?",
                (tenant, int(MemoryKind.USER), user_id, *params, after, limit),
            )
        ]

    def user_usage(
        self, tenant: str, user_id: str, project_id: int, limit: int, after: int = 0
    ) -> list[MemoryUsage]:
        """The uses SelectMemories recorded for the user, oldest first."""
        more = (project_id,) if project_id else ()
        rows = self.conn.execute(
            "SELECT u.id, u.memory_id, u.thread_id, u.context, u.relevance, u.category, u.used_at"
            f" FROM memory_usage u WHERE u.user_id = ?{self._usage_scope(project_id)}"
            " AND u.id > ? ORDER BY u.id LIMIT ?",
            (user_id, tenant, *more, after, limit),
        ).fetchall()
        return [
            MemoryUsage(
                int(r[0]), int(r[1]), str(r[2]), str(r[3]), float(r[4]), int(r[5]), float(r[6])
            )
            for r in rows
        ]

    def graph_of_episodes(
        self, ids: Sequence[int]
    ) -> tuple[list[EntityEpisode], list[EntityAlias], list[Evidence], list[int]]:
        """What the graph holds from these episodes: their mentions of
        entities, the aliases they gave, the evidence they gave, and the
        relationships they asserted or ended."""
        members = _ids(ids)
        ints = self._ints
        mentions = [
            EntityEpisode(int(r[0]), int(r[1]))
            for r in self.conn.execute(
                "SELECT entity_id, episode_id FROM entity_episodes"
                f" WHERE episode_id IN (SELECT value FROM {ints}) ORDER BY entity_id, episode_id",
                (members,),
            )
        ]
        aliases = [
            EntityAlias(*r)
            for r in self.conn.execute(
                f"SELECT {ALIAS_COLUMNS} FROM entity_aliases"
                f" WHERE episode_id IN (SELECT value FROM {ints}) ORDER BY id",
                (members,),
            )
        ]
        evidence = [
            Evidence(*r)
            for r in self.conn.execute(
                "SELECT id, from_id, to_id, label, kind, at, episode_id, mentions, notes,"
                " created_at FROM relationship_evidence"
                f" WHERE episode_id IN (SELECT value FROM {ints}) ORDER BY id",
                (members,),
            )
        ]
        relationships = [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT id FROM relationships WHERE asserted_by IN (SELECT value FROM {ints})"
                f" OR ended_by IN (SELECT value FROM {ints}) ORDER BY id",
                (members, members),
            )
        ]
        return mentions, aliases, evidence, relationships

    def user_holds(self, tenant: str, user_id: str, project_id: int) -> Counts:
        """What the user holds in the tenant (or the project): sessions,
        episodes (theirs, and written acting for them elsewhere), USER
        memories, and uses and selections recorded for them."""
        more, params = self._user_session_clause(project_id)
        sessions = self._count(
            f"SELECT COUNT(*) FROM sessions s WHERE s.tenant = ? AND s.user_id = ?{more}",
            (tenant, user_id, *params),
        )
        episodes = self._count(
            "SELECT COUNT(*) FROM episodes e JOIN sessions s ON s.id = e.session_id"
            f" WHERE s.tenant = ? AND (s.user_id = ? OR e.acts_for = ?){more}",
            (tenant, user_id, user_id, *params),
        )
        mem_more, mem_params = (" AND project_id = ?", (project_id,)) if project_id else ("", ())
        memories = self._count(
            "SELECT COUNT(*) FROM memories WHERE tenant = ? AND kind = ? AND user_id = ?"
            + mem_more,
            (tenant, int(MemoryKind.USER), user_id, *mem_params),
        )
        usage = self._count(
            "SELECT COUNT(*) FROM memory_usage u WHERE u.user_id = ?"
            + self._usage_scope(project_id),
            (user_id, tenant, *mem_params),
        )
        selections = self._count(
            f"SELECT COUNT(*) FROM memory_selections WHERE tenant = ? AND user_id = ?{mem_more}",
            (tenant, user_id, *mem_params),
        )
        return Counts(
            sessions=sessions,
            episodes=episodes,
            memories=memories,
            memory_usage=usage,
            selections=selections,
        )

    @staticmethod
    def _usage_scope(project_id: int) -> str:
        # A use is the tenant's through the memory it used.
        return " AND u.memory_id IN (SELECT id FROM memories WHERE tenant = ?)" + (
            " AND u.project_id = ?" if project_id else ""
        )

    def users_in_project(self, project_id: int) -> list[str]:
        """Every user the project holds something of: a session, a USER
        memory, or an episode written acting for them."""
        return [
            str(r[0])
            for r in self.conn.execute(
                "SELECT user_id FROM sessions WHERE project_id = ? AND user_id <> ''"
                " UNION SELECT user_id FROM memories WHERE project_id = ? AND kind = ?"
                " UNION SELECT e.acts_for FROM episodes e JOIN sessions s ON s.id = e.session_id"
                " WHERE s.project_id = ? AND e.acts_for <> ''",
                (project_id, project_id, int(MemoryKind.USER), project_id),
            )
        ]

    def user_rows_before(
        self, project_id: int, user_id: str, before: float
    ) -> tuple[list[int], list[int], list[int]]:
        """The user's sessions, episodes in others' sessions and USER memories
        in the project that were created before ``before``."""
        sessions = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM sessions WHERE project_id = ? AND user_id = ? AND created_at < ?",
                (project_id, user_id, before),
            )
        ]
        elsewhere = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT e.id FROM episodes e JOIN sessions s ON s.id = e.session_id"
                " WHERE s.project_id = ? AND e.acts_for = ? AND s.user_id <> ?"
                " AND e.created_at < ?",
                (project_id, user_id, user_id, before),
            )
        ]
        memories = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM memories WHERE project_id = ? AND kind = ? AND user_id = ?"
                " AND created_at < ?",
                (project_id, int(MemoryKind.USER), user_id, before),
            )
        ]
        return sessions, elsewhere, memories

    # -- what a project holds ------------------------------------------------------------

    def project_sessions(self, project_id: int, limit: int) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM sessions WHERE project_id = ? ORDER BY id LIMIT ?",
                (project_id, limit),
            )
        ]

    def project_memories(self, project_id: int, limit: int) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM memories WHERE project_id = ? ORDER BY id LIMIT ?",
                (project_id, limit),
            )
        ]

    def project_entities(self, project_id: int, limit: int) -> list[int]:
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM entities WHERE project_id = ? ORDER BY id LIMIT ?",
                (project_id, limit),
            )
        ]

    def project_holds(self, project_id: int) -> Counts:
        return Counts(
            sessions=self._count(
                "SELECT COUNT(*) FROM sessions WHERE project_id = ?", (project_id,)
            ),
            episodes=self._count(
                "SELECT COUNT(*) FROM episodes e JOIN sessions s ON s.id = e.session_id"
                " WHERE s.project_id = ?",
                (project_id,),
            ),
            memories=self._count(
                "SELECT COUNT(*) FROM memories WHERE project_id = ?", (project_id,)
            ),
            entities=self._count(
                "SELECT COUNT(*) FROM entities WHERE project_id = ?", (project_id,)
            ),
        )

    def mark_project_deleting(self, project_id: int, erasure_id: int) -> None:
        """Hide the project from every read, and give its name back to its
        tenant: a name is unique in a tenant, and a new project may take it at
        once. The name it holds meanwhile has a control character, which no
        name a client sends may have."""
        self.conn.execute(
            "UPDATE projects SET deleting = ?, name = ? WHERE id = ?",
            (erasure_id, f"\x1fdeleting {erasure_id}", project_id),
        )

    def delete_project_row(self, project_id: int) -> int:
        return self.conn.execute("DELETE FROM projects WHERE id = ?", (project_id,)).rowcount

    # -- episodes ------------------------------------------------------------------------

    def episode_fallout(self, ids: Sequence[int]) -> EpisodeFallout:
        """What these episodes touched beyond their own rows (read before they go)."""
        found = EpisodeFallout()
        members = _ids(ids)
        ints = self._ints
        for from_id, label in self.conn.execute(
            "SELECT DISTINCT from_id, label FROM relationship_evidence"
            f" WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        ):
            found.groups.add((int(from_id), str(label)))
        for entity_id, n in self.conn.execute(
            "SELECT entity_id, COUNT(*) FROM entity_episodes"
            f" WHERE episode_id IN (SELECT value FROM {ints}) GROUP BY entity_id",
            (members,),
        ):
            found.linked[int(entity_id)] = int(n)
        found.aliases = [
            Alias(int(r[0]), int(r[1]), str(r[2]))
            for r in self.conn.execute(
                "SELECT id, entity_id, name FROM entity_aliases"
                f" WHERE episode_id IN (SELECT value FROM {ints}) ORDER BY id",
                (members,),
            )
        ]
        for session_id, project_id, first in self.conn.execute(
            "SELECT s.id, COALESCE(s.project_id, 0), MIN(e.created_at) FROM episodes e"
            " JOIN sessions s ON s.id = e.session_id"
            f" WHERE e.id IN (SELECT value FROM {ints}) GROUP BY s.id, s.project_id",
            (members,),
        ):
            found.first_seen[int(session_id)] = (int(project_id), float(first))
        return found

    def episode_requests(self, ids: Sequence[int]) -> list[tuple[str, int, str]]:
        """(tenant, session, request id) of each of these episodes written with one."""
        return [
            (str(r[0]), int(r[1]), str(r[2]))
            for r in self.conn.execute(
                "SELECT s.tenant, e.session_id, e.request_id FROM episodes e"
                " JOIN sessions s ON s.id = e.session_id"
                f" WHERE e.id IN (SELECT value FROM {self._ints}) AND e.request_id IS NOT NULL",
                (_ids(ids),),
            )
        ]

    def memories_formed_from(self, episode_ids: Sequence[int]) -> list[int]:
        """Memories one of these episodes formed or changed (their words are in them)."""
        members = _ids(episode_ids)
        return [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id FROM memories"
                f" WHERE source_episode_id IN (SELECT value FROM {self._ints})"
                " UNION SELECT memory_id FROM memory_history"
                f" WHERE episode_id IN (SELECT value FROM {self._ints})"
                " AND memory_id IN (SELECT id FROM memories)",
                (members, members),
            )
        ]

    def aliases_still_given(self, aliases: Sequence[Alias], gone: Sequence[int]) -> dict[int, int]:
        """For each alias, an episode not in ``gone`` that is linked to its
        entity and says the alias's name (so another's words give it too)."""
        find = dialect.of(self.conn).find
        given: dict[int, int] = {}
        for alias in aliases:
            row = self.conn.execute(
                "SELECT e.id FROM entity_episodes l JOIN episodes e ON e.id = l.episode_id"
                f" WHERE l.entity_id = ? AND e.id NOT IN (SELECT value FROM {self._ints})"
                f" AND ({find}(lower(e.user_message), ?) > 0"
                f" OR {find}(lower(e.ai_response), ?) > 0)"
                " ORDER BY e.id LIMIT 1",
                (alias.entity_id, _ids(gone), alias.name.lower(), alias.name.lower()),
            ).fetchone()
            if row is not None:
                given[alias.id] = int(row[0])
        return given

    def last_names(self, aliases: Sequence[Alias], gone: Sequence[int]) -> dict[int, int]:
        """Of these aliases, one per entity that other episodes still mention
        and that would otherwise be left with no alias: the one it is shown
        under (its name), with one of those episodes."""
        kept: dict[int, int] = {}
        by_entity: dict[int, list[Alias]] = {}
        for alias in aliases:
            by_entity.setdefault(alias.entity_id, []).append(alias)
        members = _ids(gone)
        for entity_id, doomed in sorted(by_entity.items()):
            others = self._count(
                "SELECT COUNT(*) FROM entity_aliases WHERE entity_id = ?"
                f" AND id NOT IN (SELECT value FROM {self._ints})",
                (entity_id, _ids(a.id for a in doomed)),
            )
            if others:
                continue
            row = self.conn.execute(
                "SELECT l.episode_id, x.name FROM entity_episodes l JOIN entities x"
                " ON x.id = l.entity_id WHERE l.entity_id = ?"
                f" AND l.episode_id NOT IN (SELECT value FROM {self._ints})"
                " ORDER BY l.episode_id LIMIT 1",
                (entity_id, members),
            ).fetchone()
            if row is None:
                continue
            shown = next((a for a in doomed if a.name == row[1]), doomed[0])
            kept[shown.id] = int(row[0])
        return kept

    def give_alias(self, alias_id: int, episode_id: int) -> None:
        self.conn.execute(
            "UPDATE entity_aliases SET episode_id = ? WHERE id = ?", (episode_id, alias_id)
        )

    def delete_aliases(self, alias_ids: Sequence[int]) -> int:
        if not alias_ids:
            return 0
        return self.conn.execute(
            f"DELETE FROM entity_aliases WHERE id IN (SELECT value FROM {self._ints})",
            (_ids(alias_ids),),
        ).rowcount

    def delete_episodes(self, ids: Sequence[int], *, whole_sessions: bool) -> Counts:
        """Remove the episodes and what hangs on them: their extraction events,
        formation candidates, graph evidence, episode links and distinctions,
        and the jobs that would work on them. ``whole_sessions``: their
        sessions go too, so the neighbouring turns' context is left alone."""
        if not ids:
            return Counts()
        members = _ids(ids)
        ints = self._ints
        indexed = self._count(
            f"SELECT COUNT(*) FROM episodes WHERE id IN (SELECT value FROM {ints})"
            " AND embed_state = 2",
            (members,),
        )
        cancelled = self.conn.execute(
            "DELETE FROM jobs WHERE state = 'pending' AND kind IN (?, ?)"
            f" AND target_id IN (SELECT value FROM {ints})",
            (*_EPISODE_WORK, members),
        ).rowcount
        events = self.conn.execute(
            f"DELETE FROM extraction_events WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        ).rowcount
        candidates = self.conn.execute(
            f"DELETE FROM memory_candidates WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        ).rowcount
        evidence = self.conn.execute(
            f"DELETE FROM relationship_evidence WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        ).rowcount
        mentions = 0
        for entity_id, n in self.conn.execute(
            "SELECT entity_id, COUNT(*) FROM entity_episodes"
            f" WHERE episode_id IN (SELECT value FROM {ints}) GROUP BY entity_id",
            (members,),
        ).fetchall():
            mentions += int(n)
            self.conn.execute(
                f"UPDATE entities SET mention_count = {dialect.of(self.conn).greatest}"
                "(mention_count - ?, 0) WHERE id = ?",
                (int(n), int(entity_id)),
            )
        self.conn.execute(
            f"DELETE FROM entity_episodes WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        )
        self.conn.execute(
            f"DELETE FROM entity_distinctions WHERE episode_id IN (SELECT value FROM {ints})",
            (members,),
        )
        neighbours: set[int] = set()
        if not whole_sessions:
            neighbours = self._neighbours_of(ids)
        self.conn.execute(
            f"DELETE FROM episodes WHERE id IN (SELECT value FROM {ints})", (members,)
        )
        if neighbours:
            SqlEpisodes(self.conn).refresh_neighbours(sorted(neighbours - {int(i) for i in ids}))
        return Counts(
            episodes=len(ids),
            extraction_events=events,
            formation_candidates=candidates,
            evidence=evidence,
            mentions=mentions,
            vectors=indexed,
            jobs_cancelled=cancelled,
        )

    def _neighbours_of(self, ids: Sequence[int]) -> set[int]:
        """The turns just before and after each episode, in its session."""
        found: set[int] = set()
        for (episode_id,) in self.conn.execute(
            f"SELECT id FROM episodes WHERE id IN (SELECT value FROM {self._ints})", (_ids(ids),)
        ).fetchall():
            row = self.conn.execute(
                "SELECT (SELECT MAX(id) FROM episodes"
                " WHERE session_id = x.session_id AND id < x.id),"
                " (SELECT MIN(id) FROM episodes WHERE session_id = x.session_id AND id > x.id)"
                " FROM episodes x WHERE x.id = ?",
                (int(episode_id),),
            ).fetchone()
            found.update(int(i) for i in row if i is not None)
        return found

    # -- sessions ------------------------------------------------------------------------

    def delete_sessions(self, ids: Sequence[int]) -> Counts:
        """Remove sessions whose episodes are gone already: their summaries,
        TASK-tier memories (with history), their own graph when outside a
        project, and the jobs for them (their index jobs: the caller's,
        from ``sessions.removal_targets``)."""
        if not ids:
            return Counts()
        members = _ids(ids)
        ints = self._ints
        summaries = f"SELECT id FROM summaries WHERE session_id IN (SELECT value FROM {ints})"
        removed = self._count(f"SELECT COUNT(*) FROM ({summaries}) AS s", (members,))
        own_graph = (
            "SELECT id FROM entities WHERE project_id = 0"
            f" AND session_id IN (SELECT value FROM {ints})"
        )
        entities = self._count(f"SELECT COUNT(*) FROM ({own_graph}) AS g", (members,))
        self.conn.execute(f"DELETE FROM entities WHERE id IN ({own_graph})", (members,))
        task = (
            f"SELECT id FROM memories WHERE tier = 1 AND session_id IN (SELECT value FROM {ints})"
        )
        memory_ids = [int(r[0]) for r in self.conn.execute(task, (members,))]
        gone = self.delete_memories(memory_ids)
        cancelled = self.conn.execute(
            "DELETE FROM jobs WHERE state = 'pending' AND kind = ?"
            f" AND target_id IN (SELECT value FROM {ints})",
            (job_kinds.SUMMARIZE_SESSION, members),
        ).rowcount
        events = self.conn.execute(
            f"DELETE FROM extraction_events WHERE session_id IN (SELECT value FROM {ints})",
            (members,),
        ).rowcount
        sessions = self.conn.execute(
            f"DELETE FROM sessions WHERE id IN (SELECT value FROM {ints})", (members,)
        ).rowcount
        return gone + Counts(
            sessions=sessions,
            summaries_removed=removed,
            entities=entities,
            jobs_cancelled=cancelled,
            extraction_events=events,
        )

    # -- memories ------------------------------------------------------------------------

    def delete_memories(self, ids: Sequence[int]) -> Counts:
        """Remove memories with their whole history, their recorded uses and
        the jobs for them (their index jobs are the caller's)."""
        if not ids:
            return Counts()
        members = _ids(ids)
        ints = self._ints
        history = self.conn.execute(
            f"DELETE FROM memory_history WHERE memory_id IN (SELECT value FROM {ints})", (members,)
        ).rowcount
        usage = self.conn.execute(
            f"DELETE FROM memory_usage WHERE memory_id IN (SELECT value FROM {ints})", (members,)
        ).rowcount
        cancelled = self.conn.execute(
            "DELETE FROM jobs WHERE state = 'pending' AND kind IN (?, ?)"
            f" AND target_id IN (SELECT value FROM {ints})",
            (*_MEMORY_WORK, members),
        ).rowcount
        removed = self.conn.execute(
            f"DELETE FROM memories WHERE id IN (SELECT value FROM {ints})", (members,)
        ).rowcount
        return Counts(
            memories=removed,
            memory_history=history,
            memory_usage=usage,
            vectors=removed,
            jobs_cancelled=cancelled,
        )

    def memory_request_ids(self, ids: Sequence[int]) -> list[tuple[str, str, str]]:
        """(tenant, user id, request id) of each of these memories created with one."""
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self.conn.execute(
                "SELECT tenant, user_id, request_id FROM memories"
                f" WHERE id IN (SELECT value FROM {self._ints}) AND request_id IS NOT NULL",
                (_ids(ids),),
            )
        ]

    def events_naming_memories(self, memory_ids: Sequence[int]) -> list[tuple[int, dict[str, Any]]]:
        """(event id, payload) of each extraction event whose formation names
        one of these memories: the events of the episodes that formed or
        changed them."""
        members = _ids(memory_ids)
        ints = self._ints
        rows = self.conn.execute(
            "SELECT id, payload FROM extraction_events WHERE episode_id IN ("
            f" SELECT source_episode_id FROM memories WHERE id IN (SELECT value FROM {ints})"
            " AND source_episode_id IS NOT NULL"
            " UNION SELECT episode_id FROM memory_history"
            f" WHERE memory_id IN (SELECT value FROM {ints}) AND episode_id IS NOT NULL)",
            (members, members),
        ).fetchall()
        return [(int(r[0]), json.loads(r[1] or "{}")) for r in rows]

    def rewrite_event(self, event_id: int, payload: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE extraction_events SET payload = ? WHERE id = ?", (json.dumps(payload), event_id)
        )

    # -- the graph -----------------------------------------------------------------------

    def count_facts(self, groups: Iterable[tuple[int, str]]) -> int:
        total = 0
        for from_id, label in groups:
            total += self._count(
                "SELECT COUNT(*) FROM relationships WHERE from_id = ? AND label = ?",
                (from_id, label),
            )
        return total

    def unsupported_entities(self, ids: Sequence[int]) -> list[int]:
        """Of these entities, those extraction made that nothing holds up any
        more: no episode links, no evidence at either end."""
        if not ids:
            return []
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT id FROM entities x WHERE id IN (SELECT value FROM {self._ints})"
                " AND source = 'extraction'"
                " AND NOT EXISTS (SELECT 1 FROM entity_episodes l WHERE l.entity_id = x.id)"
                " AND NOT EXISTS (SELECT 1 FROM relationship_evidence v WHERE v.from_id = x.id)"
                " AND NOT EXISTS (SELECT 1 FROM relationship_evidence v WHERE v.to_id = x.id)",
                (_ids(ids),),
            )
        ]

    def delete_entities(self, ids: Sequence[int]) -> Counts:
        """Remove entities with their aliases, tokens, links and edges (their
        index jobs are the caller's)."""
        if not ids:
            return Counts()
        members = _ids(ids)
        ints = self._ints
        aliases = self._count(
            f"SELECT COUNT(*) FROM entity_aliases WHERE entity_id IN (SELECT value FROM {ints})",
            (members,),
        )
        facts = self._count(
            f"SELECT COUNT(*) FROM relationships WHERE from_id IN (SELECT value FROM {ints})"
            f" OR to_id IN (SELECT value FROM {ints})",
            (members, members),
        )
        evidence = self._count(
            "SELECT COUNT(*) FROM relationship_evidence"
            f" WHERE from_id IN (SELECT value FROM {ints}) OR to_id IN (SELECT value FROM {ints})",
            (members, members),
        )
        cancelled = self.conn.execute(
            "DELETE FROM jobs WHERE state = 'pending' AND kind = ?"
            f" AND target_id IN (SELECT value FROM {ints})",
            (job_kinds.RESOLVE_ENTITY, members),
        ).rowcount
        self.conn.execute(
            f"DELETE FROM relationship_evidence WHERE from_id IN (SELECT value FROM {ints})"
            f" OR to_id IN (SELECT value FROM {ints})",
            (members, members),
        )
        removed = self.conn.execute(
            f"DELETE FROM entities WHERE id IN (SELECT value FROM {ints})", (members,)
        ).rowcount
        return Counts(
            entities=removed,
            aliases=aliases,
            facts=facts,
            evidence=evidence,
            vectors=removed,
            jobs_cancelled=cancelled,
        )

    def clear_entity_notes(self, ids: Sequence[int]) -> None:
        if ids:
            self.conn.execute(
                f"UPDATE entities SET notes = NULL WHERE id IN (SELECT value FROM {self._ints})",
                (_ids(ids),),
            )

    def drop_merges_touching(self, entity_ids: Sequence[int]) -> int:
        """Forget the merges whose target or sources are these entities: their
        snapshots keep the names and notes the merge moved."""
        if not entity_ids:
            return 0
        touched = set(int(i) for i in entity_ids)
        doomed = [
            int(r[0])
            for r in self.conn.execute(
                "SELECT id, target_id, source_ids FROM entity_merges"
                f" WHERE target_id IN (SELECT value FROM {self._ints})",
                (_ids(touched),),
            )
        ]
        for merge_id, sources in self.conn.execute(
            "SELECT id, source_ids FROM entity_merges"
        ).fetchall():
            if touched.intersection(int(i) for i in json.loads(sources)):
                doomed.append(int(merge_id))
        if not doomed:
            return 0
        return self.conn.execute(
            f"DELETE FROM entity_merges WHERE id IN (SELECT value FROM {self._ints})",
            (_ids(doomed),),
        ).rowcount

    # -- summaries -----------------------------------------------------------------------

    def sessions_summarised_since(self, first_seen: dict[int, tuple[int, float]]) -> list[int]:
        """Of these sessions, those with a summary written since the time given
        for each."""
        return [
            session_id
            for session_id, (_, at) in sorted(first_seen.items())
            if self.conn.execute(
                "SELECT 1 FROM summaries WHERE session_id = ? AND updated_at >= ? LIMIT 1",
                (session_id, at),
            ).fetchone()
            is not None
        ]

    def overviews_since(self, since: dict[int, float]) -> list[int]:
        """Each project's overviews written since the time given for it."""
        found: list[int] = []
        for project_id, at in sorted(since.items()):
            found += [
                int(r[0])
                for r in self.conn.execute(
                    "SELECT id FROM summaries WHERE session_id IS NULL AND project_id = ?"
                    " AND updated_at >= ? ORDER BY id",
                    (project_id, at),
                )
            ]
        return found

    def sessions_with_episodes(self, session_ids: Sequence[int]) -> list[int]:
        """Of these sessions, those that still hold an episode."""
        return [
            int(r[0])
            for r in self.conn.execute(
                f"SELECT id FROM sessions WHERE id IN (SELECT value FROM {self._ints})"
                " AND EXISTS (SELECT 1 FROM episodes e WHERE e.session_id = sessions.id)"
                " ORDER BY id",
                (_ids(session_ids),),
            )
        ]

    # -- records -------------------------------------------------------------------------

    def delete_user_usage(self, tenant: str, user_id: str, project_id: int) -> int:
        more = (project_id,) if project_id else ()
        return self.conn.execute(
            f"DELETE FROM memory_usage WHERE id IN (SELECT u.id FROM memory_usage u"
            f" WHERE u.user_id = ?{self._usage_scope(project_id)})",
            (user_id, tenant, *more),
        ).rowcount

    def delete_user_selections(self, tenant: str, user_id: str, project_id: int) -> int:
        more, params = (" AND project_id = ?", (project_id,)) if project_id else ("", ())
        return self.conn.execute(
            f"DELETE FROM memory_selections WHERE tenant = ? AND user_id = ?{more}",
            (tenant, user_id, *params),
        ).rowcount

    def unlink_llm_calls(self, tenant: str, user_id: str, project_id: int) -> int:
        """Keep the calls' counts, with no link to the user."""
        more, params = (" AND project_id = ?", (project_id,)) if project_id else ("", ())
        return self.conn.execute(
            f"UPDATE llm_calls SET user_id = '' WHERE tenant = ? AND user_id = ?{more}",
            (tenant, user_id, *params),
        ).rowcount

    def delete_project_records(self, project_id: int) -> Counts:
        """What a deleted project leaves outside its rows: the events and
        selections recorded in it, and the jobs for it (its overviews are
        removed as summaries are, by the domain)."""
        events = self.conn.execute(
            "DELETE FROM extraction_events WHERE project_id = ?", (project_id,)
        ).rowcount
        selections = self.conn.execute(
            "DELETE FROM memory_selections WHERE project_id = ?", (project_id,)
        ).rowcount
        usage = self.conn.execute(
            "DELETE FROM memory_usage WHERE project_id = ?", (project_id,)
        ).rowcount
        cancelled = self.conn.execute(
            "DELETE FROM jobs WHERE state = 'pending' AND kind = ? AND target_id = ?",
            (job_kinds.RETAIN_PROJECT, project_id),
        ).rowcount
        return Counts(
            extraction_events=events,
            selections=selections,
            memory_usage=usage,
            jobs_cancelled=cancelled,
        )

    # -- the last step ---------------------------------------------------------------------

    def index_work_before(self, at: float) -> int:
        """Index jobs queued before ``at`` that are still to run: the points
        an erasure removed are gone from a vector server only once these are
        done."""
        return self._count(
            "SELECT COUNT(*) FROM jobs WHERE kind IN (?, ?, ?, ?) AND created_at <= ?"
            " AND state IN ('pending', 'running')",
            (
                job_kinds.INDEX_EPISODE,
                job_kinds.INDEX_MEMORY,
                job_kinds.INDEX_ENTITY,
                job_kinds.INDEX_SUMMARY,
                at,
            ),
        )
