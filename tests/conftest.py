from __future__ import annotations

import pytest

from tests.support import Harness, start_harness


@pytest.fixture
async def harness(tmp_path) -> Harness:
    h = await start_harness(tmp_path / "data")
    yield h
    await h.close()
