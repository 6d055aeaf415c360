"""When the server fixes glibc's mmap threshold (observability/heap.py), given
stand-ins for the C library so the test process's allocator is left as it is:
only on Linux, only where the C library has ``mallopt``, with glibc's parameter
number and the threshold asked for, and True only when ``mallopt`` says it took.

What stays in tests/e2e/server/test_heap.py: the effect, in a fresh interpreter
(long embedding batches on two threads leave no memory behind)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Any

import pytest

from nexus_grpc.observability import heap


class Mallopt:
    """glibc's mallopt as ctypes hands it over: records its calls, answers ``result``."""

    def __init__(self, result: int) -> None:
        self.result = result
        self.calls: list[tuple[int, int]] = []
        self.argtypes: Any = None
        self.restype: Any = None

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.result


class Libc:
    def __init__(self, mallopt: Mallopt | None) -> None:
        if mallopt is not None:
            self.mallopt = mallopt


@pytest.fixture
def loaded(monkeypatch) -> list[str]:
    """The names the C library was loaded by; the library is made by each test."""
    names: list[str] = []
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.so.6")
    return names


def use_libc(monkeypatch, names: list[str], libc: Any) -> None:
    def cdll(name: str) -> Any:
        names.append(name)
        if isinstance(libc, Exception):
            raise libc
        return libc

    monkeypatch.setattr(ctypes, "CDLL", cdll)


def test_glibc_gets_its_threshold_parameter_and_the_size_asked_for(monkeypatch, loaded):
    mallopt = Mallopt(1)
    use_libc(monkeypatch, loaded, Libc(mallopt))
    assert heap.release_large_blocks() is True
    assert mallopt.calls == [(-3, 1 << 20)]  # M_MMAP_THRESHOLD, 1 MB
    assert mallopt.argtypes == [ctypes.c_int, ctypes.c_int]
    assert mallopt.restype is ctypes.c_int
    heap.release_large_blocks(4 << 20)
    assert mallopt.calls[-1] == (-3, 4 << 20)


def test_a_mallopt_that_refuses_is_reported(monkeypatch, loaded):
    use_libc(monkeypatch, loaded, Libc(Mallopt(0)))
    assert heap.release_large_blocks() is False


def test_a_c_library_without_mallopt_is_left_alone(monkeypatch, loaded):
    use_libc(monkeypatch, loaded, Libc(None))  # musl and others
    assert heap.release_large_blocks() is False


def test_a_c_library_that_cannot_be_loaded_is_left_alone(monkeypatch, loaded):
    use_libc(monkeypatch, loaded, OSError("libc.so.6: cannot open shared object file"))
    assert heap.release_large_blocks() is False


def test_when_the_library_is_not_found_by_name_libc_so_6_is_tried(monkeypatch, loaded):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    use_libc(monkeypatch, loaded, Libc(Mallopt(1)))
    assert heap.release_large_blocks() is True
    assert loaded == ["libc.so.6"]


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_off_linux_nothing_is_loaded(monkeypatch, loaded, platform):
    monkeypatch.setattr(sys, "platform", platform)
    use_libc(monkeypatch, loaded, Libc(Mallopt(1)))
    assert heap.release_large_blocks() is False
    assert loaded == []
