"""The server's settings as pure functions of their values: the README's table
is the one generated from the declarations in ``runtime/config.py``, a bad value
is refused naming its flag, choices take any case, the environment goes through
the same checks as a flag (the reranker's settings, ``--max-watch-streams``),
and the listen addresses of ``--metrics-listen`` and of the health check are
read as documented.

What stays whole-process: ``serve --help`` and one refused start per file
(tests/e2e/server/test_readme_options.py, test_reranker_options.py: the exit,
its line on stderr and no data directory), and the health check's TLS settings
read from real certificates (tests/e2e/server/test_health_check_command.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus_grpc.observability.metrics import split_host_port
from nexus_grpc.ops.against_server.doctor import (
    HealthConfigError,
    local_target,
    probe_from_environment,
)
from nexus_grpc.runtime.config import OPTIONS, env_default, markdown_table, settings_from

README = Path(__file__).resolve().parents[2] / "README.md"


def rows() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `--"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            table[cells[0].strip("`")] = cells
    return table


# The README's table -------------------------------------------------------------------


def test_every_option_has_its_row_with_env_and_default() -> None:
    table = rows()
    for option in OPTIONS.values():
        assert option.flag in table, f"README lacks a row for {option.flag}"
        flag, envs, default, _ = table[option.flag]
        assert envs == " / ".join(f"`{e}`" for e in option.env), option.flag
        assert default == (f"`{option.default}`" if option.default else "(empty)"), option.flag
    assert set(table) == {o.flag for o in OPTIONS.values()}, "README lists a flag that is gone"


def test_the_readme_table_is_the_generated_one() -> None:
    """The table is written by ``python -m nexus_grpc.runtime.config README.md`` from
    the declarations in Settings; a hand edit or a new option without a
    rerun shows up here."""
    text = README.read_text(encoding="utf-8")
    assert markdown_table() in text, "run: python -m nexus_grpc.runtime.config README.md"


# A bad value, a choice's case, the environment ----------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--log-format", "xml", "--log-format: 'xml' is not one of text, json"),
        ("--sqlite-synchronous", "sometimes", "--sqlite-synchronous: 'sometimes' is not one of"),
        ("--embedder", "word2vec", "--embedder: 'word2vec' is not one of minilm, e5, ollama"),
        ("--llm-timeout", "soon", "--llm-timeout: cannot read 'soon' as float"),
        ("--reranker-url", "gpu-box:8080/x", "--reranker-url: 'gpu-box:8080/x' is not an"),
        ("--reranker-url", "ftp://box/rerank", "is not an http:// or https:// URL"),
        ("--reranker-candidates", "0", "--reranker-candidates: must be between 1 and 1000"),
        ("--reranker-timeout", "0", "--reranker-timeout: must be more than 0"),
        ("--reranker-timeout", "soon", "--reranker-timeout: cannot read 'soon' as float"),
    ],
)
def test_a_bad_value_is_refused_naming_its_flag(flag, value, expected) -> None:
    """What ``serve`` says on stderr before it exits: the flag's name, the value
    and what is wrong with it (the same inputs as the whole-process tests)."""
    name = flag.removeprefix("--").replace("-", "_")
    assert OPTIONS[name].flag == flag
    with pytest.raises(SystemExit) as refused:
        settings_from({name: value})
    assert expected in str(refused.value)


def test_choices_take_any_case_and_are_stored_as_declared(monkeypatch) -> None:
    settings = settings_from({"log_format": "JSON", "sqlite_synchronous": "normal"})
    assert (settings.log_format, settings.sqlite_synchronous) == ("json", "NORMAL")
    # The environment goes through the same check as the flag.
    monkeypatch.setenv("NEXUS_LOG_LEVEL", "warning")
    assert settings_from({"log_level": env_default("log_level")}).log_level == "WARNING"
    monkeypatch.setenv("NEXUS_LOG_LEVEL", "loud")
    with pytest.raises(SystemExit, match="--log-level: 'loud' is not one of"):
        settings_from({"log_level": env_default("log_level")})


def test_the_reranker_settings_come_from_the_environment_too(monkeypatch):
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


def test_max_watch_streams_is_a_flag_and_an_env_var(monkeypatch):
    option = OPTIONS["max_watch_streams"]
    assert (option.flag, option.env) == ("--max-watch-streams", ("NEXUS_MAX_WATCH_STREAMS",))
    monkeypatch.setenv("NEXUS_MAX_WATCH_STREAMS", "7")
    assert env_default("max_watch_streams") == "7"


# Listen addresses ---------------------------------------------------------------------


def test_metrics_listen_parsing():
    assert split_host_port("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert split_host_port(":9464") == ("0.0.0.0", 9464)
    assert split_host_port("[::1]:9464") == ("::1", 9464)
    with pytest.raises(ValueError):
        split_host_port("9464")


def test_the_listen_address_becomes_one_a_neighbour_can_dial():
    assert local_target("0.0.0.0:50051") == "127.0.0.1:50051"
    assert local_target(":7000") == "127.0.0.1:7000"
    assert local_target("[::]:7000") == "[::1]:7000"
    assert local_target("10.0.0.5:7000") == "10.0.0.5:7000"
    assert local_target("localhost:7000") == "localhost:7000"
    assert local_target("unix:/run/nexus.sock") == "unix:/run/nexus.sock"
    for bad, why in (("0.0.0.0:0", "port 0"), ("nexus", "HOST:PORT"), ("h:port", "HOST:PORT")):
        with pytest.raises(HealthConfigError, match=why):
            local_target(bad)


def test_the_health_probe_reads_serves_variables_and_names_a_certificate_it_cannot_read():
    """The part of the health check's settings that needs no certificate; the
    TLS and mTLS settings read from real ones stay in
    tests/e2e/server/test_health_check_command.py."""
    assert probe_from_environment({}).target == "127.0.0.1:50051"  # serve's default
    assert not probe_from_environment({"NEXUS_LISTEN": "0.0.0.0:6000"}).tls
    with pytest.raises(HealthConfigError, match="cannot read"):
        probe_from_environment({"NEXUS_TLS_CERT": "/nope.pem", "NEXUS_TLS_KEY": "/nope.key"})
