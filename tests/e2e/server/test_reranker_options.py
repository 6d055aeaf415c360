"""--reranker-* settings: a value the reranker cannot run with stops the start
with a line naming its flag, and writes nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nexus_grpc.runtime.config import settings_from


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--reranker-url", "gpu-box:8080/x", "--reranker-url: 'gpu-box:8080/x' is not an"),
        ("--reranker-url", "ftp://box/rerank", "is not an http:// or https:// URL"),
        ("--reranker-candidates", "0", "--reranker-candidates: must be between 1 and 1000"),
        ("--reranker-timeout", "0", "--reranker-timeout: must be more than 0"),
        ("--reranker-timeout", "soon", "--reranker-timeout: cannot read 'soon' as float"),
    ],
)
def test_a_bad_reranker_setting_stops_the_start_naming_its_flag(tmp_path, flag, value, expected):
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "nexus_grpc.cli", "serve", "--data-dir", str(data),
         "--listen", "127.0.0.1:0", flag, value],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert expected in proc.stderr, proc.stderr[-2000:]
    assert not data.exists()


def test_the_reranker_settings_come_from_the_environment_too(monkeypatch):
    from nexus_grpc.runtime.config import env_default

    monkeypatch.setenv("NEXUS_RERANKER_URL", "http://gpu-box.lan:8080/v1/rerank")
    monkeypatch.setenv("NEXUS_RERANKER_MODEL", "bge-reranker-v2-m3")
    monkeypatch.setenv("NEXUS_RERANKER_API_KEY", "k")
    monkeypatch.setenv("NEXUS_RERANKER_CANDIDATES", "20")
    names = ("reranker_url", "reranker_model", "reranker_api_key", "reranker_candidates")
    settings = settings_from({name: env_default(name) for name in names})
    assert settings.reranker_url == "http://gpu-box.lan:8080/v1/rerank"
    assert (settings.reranker_model, settings.reranker_api_key) == ("bge-reranker-v2-m3", "k")
    assert settings.reranker_candidates == 20
    assert settings_from({}).reranker_url == ""  # off unless asked for
