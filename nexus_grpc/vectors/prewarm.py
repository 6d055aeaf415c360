"""Read an embedded shard's files into the OS page cache after it is opened.

qdrant-edge memory-maps vectors and payloads and reads them on demand. On the
hosts we measured, a shard's pages are no longer cached once the process that
used them has exited, so after every restart the first search in each scope
paid one disk read per vector it scored: a user's 100 memories took 5 ms
instead of 0.12 ms, and 100 scopes cost a second of disk waits before search
was fast again. One sequential read of the files at start (0.1 s for 100,000
384-d points here) puts them back in the page cache, after which those
first searches cost what later ones do.

This is the page cache, not the process's memory: it does not count as RSS
until a search maps a page, and the kernel drops it under memory pressure.
A budget bounds the reading for data sets far larger than RAM.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

CHUNK = 1 << 20
#: Vectors are read first: every search scores them. Payload indexes and
#: storage follow (filters and returned payloads); the WAL is never read.
_ORDER = ("vector_storage", "payload_index", "payload_storage")


def shard_files(shard_dir: Path) -> list[Path]:
    """The segment files of one shard, vectors first, then indexes and payloads."""
    segments = shard_dir / "segments"
    if not segments.is_dir():
        return []
    files = [p for p in segments.rglob("*") if p.is_file()]

    def rank(p: Path) -> tuple[int, str]:
        parts = p.relative_to(segments).parts
        for i, name in enumerate(_ORDER):
            if name in parts:
                return i, str(p)
        return len(_ORDER), str(p)

    return sorted(files, key=rank)


def _data_extents(fd: int) -> list[tuple[int, int]]:
    """(start, end) of the parts of a file that hold data. qdrant preallocates its
    vector chunks as 32 MB sparse files; reading their holes would only fill the
    page cache with zeros."""
    size = os.fstat(fd).st_size
    extents: list[tuple[int, int]] = []
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after pos
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        extents.append((start, end))
        pos = end
    return extents


class PageCacheWarmer:
    """Reads files into the page cache within a byte budget, on one thread at a time."""

    def __init__(self, budget_bytes: int) -> None:
        self._budget = max(0, budget_bytes)
        self.read_bytes = 0
        self._stop = threading.Event()
        self._buffer = bytearray(CHUNK)

    @property
    def enabled(self) -> bool:
        return self._budget > 0

    def warm(self, files: Iterable[Path]) -> int:
        """Read ``files`` (blocking) until the budget is spent; returns bytes read."""
        before = self.read_bytes
        for path in files:
            if self._stop.is_set() or self.read_bytes >= self._budget:
                break
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # a segment qdrant just replaced: nothing to warm
                continue
            try:
                self._read(fd)
            except OSError as e:
                log.debug("page cache warm-up skipped %s: %s", path, e)
            finally:
                os.close(fd)
        return self.read_bytes - before

    def _read(self, fd: int) -> None:
        chunk = memoryview(self._buffer)
        for offset, end in _data_extents(fd):
            while offset < end and not self._stop.is_set():
                allowed = min(CHUNK, end - offset, self._budget - self.read_bytes)
                if allowed <= 0:
                    return
                n = os.preadv(fd, [chunk[:allowed]], offset)
                if n <= 0:
                    break
                self.read_bytes += n
                offset += n

    def stop(self) -> None:
        self._stop.set()
