"""Episodes table, its FTS5 index, and the jobs every new episode queues."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_grpc.core.models import (
    Backlog,
    Episode,
    JobState,
    NewEpisode,
    SummaryProgress,
    TimeWindow,
)
from nexus_grpc.errors import NotFound
from nexus_grpc.store import dialect, jobs
from nexus_grpc.store.dialect import json_ints
from nexus_grpc.store.sql import OnConnection, now, placeholders

# The summary trigger (domain/episode_followups.py): about 200 tokens of text (4 characters a
# token) and at least 5 episodes since the last summary.


def _row(row: sqlite3.Row) -> Episode:
    return Episode(
        id=row["id"],
        session_id=row["session_id"],
        user_message=row["user_message"],
        ai_response=row["ai_response"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        occur_at=row["occur_at"],
        embed_state=JobState(row["embed_state"]),
        embed_error=row["embed_error"],
        extract_state=JobState(row["extract_state"]),
        extract_error=row["extract_error"],
        memory_state=None if row["memory_state"] is None else JobState(row["memory_state"]),
        memory_error=row["memory_error"],
        acts_for=row["acts_for"],
    )


#: The session (aliased ``{s}``) is not in a project being deleted: from
#: DeleteProject's commit on, no read sees its sessions (domain/erasure.py).
LIVE_SESSION = (
    "NOT EXISTS (SELECT 1 FROM projects dp WHERE dp.id = {s}.project_id"
    " AND dp.deleting IS NOT NULL)"
)


# Each side of an episode's context keeps the part of the neighbouring turn nearest to it.
CONTEXT_CHARS = 1000


class SqlEpisodes(OnConnection):
    """``EpisodeRepository`` on one connection."""

    __slots__ = ()

    def find_by_request_id(self, session_id: int, request_id: str) -> Episode | None:
        row = self.conn.execute(
            "SELECT * FROM episodes WHERE session_id = ? AND request_id = ?",
            (session_id, request_id),
        ).fetchone()
        return _row(row) if row else None

    def insert(
        self,
        session_id: int,
        user_message: str,
        ai_response: str,
        metadata: Mapping[str, Any],
        request_id: str | None,
        occur_at: float | None = None,
        *,
        embedded: bool = False,
        acts_for: str = "",
    ) -> Episode:
        """Insert an episode; what follows it (its jobs, its formation, a summary)
        is the domain's to decide and queue in the same transaction
        (domain/episode_followups.py).

        ``occur_at`` is when the exchange happened (an import's original time);
        None means now. ``embedded``: the caller writes the episode's vector in
        this same transaction (store/postgres/vectors.py), so the row is born embedded.
        ``acts_for``: the user its writer acted for (the session's user, checked
        by the domain), what formation forms for."""
        # The new episode is the session's last: its context is the turn before it,
        # known now, so its FTS row is written once. Its predecessor gains this
        # episode's first turn as the turn after it.
        previous = self.conn.execute(
            f"SELECT id, {dialect.of(self.conn).tail('ai_response', '?')} FROM episodes WHERE"
            " session_id = ?"
            " ORDER BY id DESC LIMIT 1",
            (CONTEXT_CHARS, session_id),
        ).fetchone()
        ts = now()
        row = self.conn.execute(
            "INSERT INTO episodes (session_id, user_message, ai_response, metadata, request_id,"
            " created_at, context, occur_at, embed_state, acts_for)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                session_id,
                user_message,
                ai_response,
                json.dumps(metadata),
                request_id or None,
                ts,
                (previous[1] if previous else "") + "\n",
                ts if occur_at is None else occur_at,
                int(JobState.DONE if embedded else JobState.PENDING),
                acts_for,
            ),
        ).fetchone()
        episode_id = int(row[0])
        if previous:
            self._refresh_context([previous[0]])
        return self.get(episode_id)

    def insert_many(
        self,
        rows: Sequence[NewEpisode],
        *,
        extracted: bool = False,
    ) -> list[int]:
        """Insert episodes in order, as ``insert`` one by one would (same ids,
        same neighbouring-turn contexts), and return their ids; what follows
        them is the domain's (domain/episode_followups.py).

        ``extracted``: a restore's episodes, whose entities and relationships
        arrive with them: they are born with extraction DONE.

        One by one, each insert re-indexes its predecessor's FTS row to add the
        new turn to its context: three FTS writes per episode. Here the batch's
        own turns are known, so each row is written once with its final context
        and only each session's last episode from before the batch is re-indexed.
        """
        ts = now()
        positions: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            positions.setdefault(row.session_id, []).append(i)
        contexts = [""] * len(rows)
        predecessors: list[int] = []
        for session_id, mine in positions.items():
            previous = self.conn.execute(
                "SELECT id, substr(ai_response, -?) FROM episodes WHERE session_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (CONTEXT_CHARS, session_id),
            ).fetchone()
            if previous:
                predecessors.append(previous[0])
            before = previous[1] if previous else ""
            for k, i in enumerate(mine):
                after = rows[mine[k + 1]].user_message[:CONTEXT_CHARS] if k + 1 < len(mine) else ""
                contexts[i] = before + "\n" + after
                before = rows[i].ai_response[-CONTEXT_CHARS:] if rows[i].ai_response else ""
        ids = []
        for row, context in zip(rows, contexts, strict=True):
            inserted = self.conn.execute(
                "INSERT INTO episodes (session_id, user_message, ai_response, metadata, request_id,"
                " created_at, context, occur_at, extract_state, acts_for)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    row.session_id,
                    row.user_message,
                    row.ai_response,
                    json.dumps(row.metadata),
                    row.request_id or None,
                    ts if row.created_at is None else row.created_at,
                    context,
                    ts if row.occur_at is None else row.occur_at,
                    int(JobState.DONE if extracted else JobState.PENDING),
                    row.acts_for,
                ),
            ).fetchone()
            ids.append(int(inserted[0]))
        self._refresh_context(predecessors)
        return ids

    def summary_progress(
        self, session_id: int, enough_episodes: int, enough_chars: int
    ) -> SummaryProgress:
        """What the rule for a session's summary reads (domain/episode_followups.py):
        whether a summary job is already queued, how many episodes came since
        the last summary, and how many characters its first turns hold.

        This runs inside every CreateEpisode transaction, so each query is
        bounded: by an index lookup, or by a LIMIT (the rule's own thresholds,
        ``enough_*``) that cannot change the answer."""
        queued = self.conn.execute(
            "SELECT 1 FROM jobs WHERE kind = ? AND target_id = ? AND state = 'pending'",
            (jobs.SUMMARIZE_SESSION, session_id),
        ).fetchone()
        if queued:
            return SummaryProgress(True, 0, 0)
        covered = self.conn.execute(
            "SELECT COALESCE(MAX(last_episode_id), 0) FROM summaries WHERE session_id = ?",
            (session_id,),
        ).fetchone()[0]
        new = self.conn.execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM episodes WHERE session_id = ? AND id > ? LIMIT ?)"
            " AS recent",
            (session_id, covered, enough_episodes),
        ).fetchone()[0]
        if new < enough_episodes:
            return SummaryProgress(False, int(new), 0)
        # user_message is never blank, so every episode has at least one character:
        # summing more than ``enough_chars`` episodes cannot change the answer.
        chars = self.conn.execute(
            "SELECT COALESCE(SUM(LENGTH(user_message) + LENGTH(ai_response)), 0) FROM"
            " (SELECT user_message, ai_response FROM episodes WHERE session_id = ?"
            " ORDER BY id LIMIT ?) AS first_turns",
            (session_id, enough_chars + 1),
        ).fetchone()[0]
        return SummaryProgress(False, int(new), int(chars))

    def find(self, episode_id: int) -> Episode | None:
        """The episode, or None when it does not exist."""
        row = self.conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        return None if row is None else _row(row)

    def get(self, episode_id: int, tenant: str | None = None) -> Episode:
        """The episode; NOT_FOUND, with one message, when it does not exist or its
        session belongs to another tenant (``tenant`` None: any tenant)."""
        if tenant is None:
            row = self.conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        else:
            row = self.conn.execute(
                "SELECT e.* FROM episodes e JOIN sessions s ON s.id = e.session_id"
                f" WHERE e.id = ? AND s.tenant = ? AND {LIVE_SESSION.format(s='s')}",
                (episode_id, tenant),
            ).fetchone()
        if row is None:
            raise NotFound(
                f"episode {episode_id} does not exist",
                resource_type="episode",
                resource_name=str(episode_id),
            )
        return _row(row)

    def get_many(self, ids: Sequence[int]) -> dict[int, Episode]:
        if not ids:
            return {}
        marks = placeholders(len(ids))
        rows = self.conn.execute(
            f"SELECT * FROM episodes WHERE id IN ({marks})", tuple(ids)
        ).fetchall()
        return {r["id"]: _row(r) for r in rows}

    def sessions_of(self, ids: Sequence[int]) -> dict[int, int]:
        """Each existing episode's session id: what ranking needs of a candidate
        (the primary-key index alone answers it; no row text is read)."""
        if not ids:
            return {}
        marks = placeholders(len(ids))
        rows = self.conn.execute(
            f"SELECT id, session_id FROM episodes WHERE id IN ({marks})", tuple(ids)
        ).fetchall()
        return {r[0]: r[1] for r in rows}

    def list_page(
        self,
        session_id: int,
        before_id: int | None,
        limit: int,
        since: float | None = None,
    ) -> list[Episode]:
        """Newest first; the page token holds the smallest id already returned.
        ``since``: only episodes whose occur_at is not before it (a retention)."""
        kept = "" if since is None else " AND occur_at >= ?"
        rows = self.conn.execute(
            f"SELECT * FROM episodes WHERE session_id = ? AND id < ?{kept} ORDER BY id DESC LIMIT"
            " ?",
            (
                session_id,
                before_id if before_id is not None else 2**62,
                *(() if since is None else (since,)),
                limit,
            ),
        ).fetchall()
        return [_row(r) for r in rows]

    def retention_cutoff(self, session_id: int, at: float) -> float | None:
        """The oldest occur_at the session's project keeps at ``at``; None: all.
        A project being deleted keeps nothing (infinity)."""
        row = self.conn.execute(
            "SELECT p.retention, p.deleting FROM sessions s JOIN projects p ON p.id = s.project_id"
            " WHERE s.id = ?",
            (session_id,),
        ).fetchone()
        if row is not None and row[1] is not None:
            return math.inf
        return None if row is None or row[0] is None else at - float(row[0])

    def past_retention(self, project_id: int, cutoff: float, limit: int) -> list[int]:
        """The project's episodes that happened before ``cutoff``."""
        rows = self.conn.execute(
            "SELECT e.id FROM sessions s JOIN episodes e ON e.session_id = s.id"
            " WHERE s.project_id = ? AND e.occur_at < ? ORDER BY e.id LIMIT ?",
            (project_id, cutoff, limit),
        )
        return [r[0] for r in rows]

    def oldest_in_project(self, project_id: int) -> float | None:
        """When the project's oldest exchange happened; None without episodes."""
        row = self.conn.execute(
            "SELECT MIN(e.occur_at) FROM sessions s JOIN episodes e ON e.session_id = s.id"
            " WHERE s.project_id = ?",
            (project_id,),
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def list_for_session(
        self,
        session_id: int,
        after_id: int = 0,
        limit: int = 10_000,
        *,
        since: float | None = None,
    ) -> list[Episode]:
        """Oldest first. ``since``: only episodes whose occur_at is not before it
        (a retention)."""
        kept = "" if since is None else " AND occur_at >= ?"
        rows = self.conn.execute(
            f"SELECT * FROM episodes WHERE session_id = ? AND id > ?{kept} ORDER BY id LIMIT ?",
            (session_id, after_id, *(() if since is None else (since,)), limit),
        ).fetchall()
        return [_row(r) for r in rows]

    def delete(self, episode_id: int, tenant: str | None = None) -> None:
        """The row alone (the store's own tests; the service removes episodes by
        erasure's rule): whoever deletes it queues its index job first."""
        episode = self.get(episode_id, tenant)
        neighbours = self._neighbours(episode.session_id, episode_id)
        self.conn.execute("DELETE FROM episodes WHERE id = ?", (episode_id,))
        self._refresh_context(neighbours)

    def set_embed_state(self, ids: Sequence[int], state: JobState, error: str = "") -> None:
        self.conn.executemany(
            "UPDATE episodes SET embed_state = ?, embed_error = ? WHERE id = ?",
            [(int(state), error[:2000], i) for i in ids],
        )

    def mark_indexed_before(self, before: float) -> None:
        """After a full rebuild: every episode that existed when it began is indexed."""
        self.conn.execute(
            "UPDATE episodes SET embed_state = ?, embed_error = '' WHERE created_at <= ?",
            (int(JobState.DONE), before),
        )

    def scope_of(self, episode_id: int) -> tuple[int, int] | None:
        """(session id, project id or 0) of an episode, or None if it is gone."""
        row = self.conn.execute(
            "SELECT e.session_id, COALESCE(s.project_id, 0) FROM episodes e"
            " JOIN sessions s ON s.id = e.session_id WHERE e.id = ?",
            (episode_id,),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def reset_failed_extractions(self) -> list[int]:
        """Mark every episode whose extraction failed pending again; returns their
        ids (their extract jobs are the domain's, domain/extraction.py)."""
        rows = self.conn.execute(
            "UPDATE episodes SET extract_state = ?, extract_error = '' WHERE extract_state = ?"
            " RETURNING id",
            (int(JobState.PENDING), int(JobState.FAILED)),
        ).fetchall()
        return sorted(int(r[0]) for r in rows)

    def failed_extractions(self, tenant: str) -> list[tuple[int, str]]:
        """The tenant's episodes whose extraction failed, each with its session's
        user_id ('' for none)."""
        rows = self.conn.execute(
            "SELECT e.id, s.user_id FROM episodes e JOIN sessions s ON s.id = e.session_id"
            " WHERE e.extract_state = ? AND s.tenant = ? ORDER BY e.id",
            (int(JobState.FAILED), tenant),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def backlog(self, session_ids: Sequence[int]) -> Backlog:
        """What of these sessions' episodes is stored, and what still waits."""
        if not session_ids:
            return Backlog(0, 0, 0, 0)
        pending = int(JobState.PENDING)
        row = self.conn.execute(
            "SELECT COUNT(*),"
            " COALESCE(SUM(CASE WHEN embed_state = ? THEN 1 ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN extract_state = ? THEN 1 ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN memory_state = ? THEN 1 ELSE 0 END), 0)"
            f" FROM episodes WHERE session_id IN (SELECT value FROM {json_ints(self.conn)})",
            (pending, pending, pending, json.dumps([int(i) for i in session_ids])),
        ).fetchone()
        return Backlog(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def set_memory_pending(self, ids: Sequence[int]) -> None:
        """Memory formation is due for these episodes."""
        if not ids:
            return
        self.conn.execute(
            "UPDATE episodes SET memory_state = ? WHERE id IN (SELECT value FROM"
            f" {json_ints(self.conn)})",
            (int(JobState.PENDING), json.dumps([int(i) for i in ids])),
        )

    def set_memory_state(self, episode_id: int, state: JobState | None, error: str = "") -> None:
        self.conn.execute(
            "UPDATE episodes SET memory_state = ?, memory_error = ? WHERE id = ?",
            (None if state is None else int(state), error, episode_id),
        )

    def formation_ahead(self, episode: Episode) -> int | None:
        """An episode of the same session that happened earlier (or at the same
        time and was stored first) and still waits for its memory formation."""
        row = self.conn.execute(
            "SELECT id FROM episodes WHERE session_id = ? AND memory_state = ?"
            " AND (occur_at < ? OR (occur_at = ? AND id < ?)) LIMIT 1",
            (
                episode.session_id,
                int(JobState.PENDING),
                episode.occur_at,
                episode.occur_at,
                episode.id,
            ),
        ).fetchone()
        return None if row is None else int(row[0])

    def occur_at_of(self, episode_id: int) -> float | None:
        row = self.conn.execute(
            "SELECT occur_at FROM episodes WHERE id = ?", (episode_id,)
        ).fetchone()
        return None if row is None else float(row[0])

    def set_extract_state(self, episode_id: int, state: JobState, error: str = "") -> None:
        self.conn.execute(
            "UPDATE episodes SET extract_state = ?, extract_error = ? WHERE id = ?",
            (int(state), error[:2000], episode_id),
        )

    def _context(self) -> str:
        sql = dialect.of(self.conn)
        return f"""
    COALESCE((SELECT {sql.tail("p.ai_response", str(CONTEXT_CHARS))} FROM episodes p
              WHERE p.session_id = episodes.session_id AND p.id < episodes.id
              ORDER BY p.id DESC LIMIT 1), '')
    || {sql.newline} ||
    COALESCE((SELECT substr(n.user_message, 1, {CONTEXT_CHARS}) FROM episodes n
              WHERE n.session_id = episodes.session_id AND n.id > episodes.id
              ORDER BY n.id LIMIT 1), '')"""

    def _neighbours(self, session_id: int, episode_id: int) -> list[int]:
        """The episodes just before and just after ``episode_id`` in its session."""
        row = self.conn.execute(
            "SELECT (SELECT MAX(id) FROM episodes WHERE session_id = ? AND id < ?),"
            " (SELECT MIN(id) FROM episodes WHERE session_id = ? AND id > ?)",
            (session_id, episode_id, session_id, episode_id),
        ).fetchone()
        return [i for i in row if i is not None]

    def refresh_neighbours(self, ids: Sequence[int]) -> None:
        """Recompute these episodes' context after a neighbouring turn went."""
        self._refresh_context(ids)

    def _refresh_context(self, ids: Sequence[int]) -> None:
        """Recompute the neighbouring-turn text keyword search reads with each episode
        (the FTS triggers re-index the rows whose context changed)."""
        if ids:
            self.conn.execute(
                f"UPDATE episodes SET context = {self._context()}"
                f" WHERE id IN ({placeholders(len(ids))})",
                tuple(ids),
            )

    def keyword_search(
        self,
        match: str,
        session_ids: Sequence[int] | None,
        limit: int,
        window: TimeWindow | None = None,
    ) -> list[tuple[int, float]]:
        """(episode id, bm25 score with higher better), best first.

        ``match`` is an FTS5 expression over the words (see domain/retrieval/keyword_query.py);
        session_ids None means every session (used only by admin paths).
        ``window`` keeps only episodes that occurred inside it. Each database has
        its own index (store/sqlite/keyword_search.py, store/postgres/keyword_search.py).
        """
        return dialect.of(self.conn).episode_keyword_search(
            self.conn, match, session_ids, limit, window
        )

    def keyword_matching(self, match: str, ids: Sequence[int]) -> set[int]:
        """The ids among ``ids`` that ``match`` matches (in the episode or its
        neighbouring turns), however they would rank."""
        return dialect.of(self.conn).keyword_matching(self.conn, "episodes", match, ids)

    def snippets(self, match: str, ids: Sequence[int]) -> dict[int, str]:
        """The matching text of each id, keyword hits wrapped in [ and ]: from the user
        message or the answer, whichever matched (never the neighbours' context)."""
        return dialect.of(self.conn).episode_snippets(self.conn, match, ids)

    def scope_sample(self, session_ids: Sequence[int], limit: int) -> list[str]:
        """The texts of up to ``limit`` of the scope's most recent episodes."""
        return dialect.of(self.conn).episode_scope_sample(self.conn, session_ids, limit)
