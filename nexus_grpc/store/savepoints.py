"""A savepoint: part of a transaction that can fail alone.

Both stores speak the same SQL for it. A batch write (ImportEpisodes) runs
each item inside one, so an item refused halfway leaves nothing of itself
while the items before and after it commit together.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from nexus_grpc.core.storage import Connection


@contextmanager
def savepoint(conn: Connection, name: str) -> Iterator[None]:
    """What the block wrote is rolled back when it raises (and the exception
    goes on); the enclosing transaction goes on either way."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        raise
    finally:
        conn.execute(f"RELEASE {name}")
