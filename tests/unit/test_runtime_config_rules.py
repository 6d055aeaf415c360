"""The settings' derived values and range checks (runtime/config.py), as pure
functions of the values given: a per-tenant limit left at -1 is half the
server's (at least one, none where the server's is off), the credentials a
Settings holds (keys, URL passwords and secret query values, nothing empty),
where the LLM is reached, each numeric range ``serve`` refuses naming its flag
and the bounds it accepts, and the README's table rewritten in place.

The choices, the reranker's URL and candidates, a value that cannot be read and
the README's table are tested in tests/unit/test_server_settings.py; what
``serve`` prints and exits with, in tests/e2e/server/test_readme_options.py."""

from __future__ import annotations

import pytest

from nexus_grpc.runtime.config import Settings, markdown_table, rewrite_readme, settings_from

# Per-tenant limits ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_tenant", "server", "applies"),
    [
        (-1, 64, 32),  # unset: half the server's
        (-1, 3, 1),  # rounded down
        (-1, 1, 1),  # at least one
        (-1, 0, 0),  # the server's cap off: the tenant's too
        (0, 64, 0),  # set: as given, even 0
        (5, 64, 5),
    ],
)
def test_a_per_tenant_limit_left_unset_is_half_the_servers(per_tenant, server, applies):
    rpcs = Settings(max_concurrent_rpcs=server, max_concurrent_rpcs_per_tenant=per_tenant)
    assert rpcs.rpcs_per_tenant == applies
    watch = Settings(max_watch_streams=server, max_watch_streams_per_tenant=per_tenant)
    assert watch.watch_streams_per_tenant == applies


# Credentials and the LLM's URL ---------------------------------------------------------


def test_the_credentials_are_the_keys_and_what_the_urls_carry():
    settings = Settings(
        qdrant_api_key="qk-123456",
        llm_api_key="",
        reranker_api_key="rk-abcdef",
        database_url="postgresql://nexus:pg-pass@db.lan/nexus",
        ollama_url="http://ollama.lan:11434",
        reranker_url="https://gpu.lan/rerank?token=tk-999",
    )
    found = settings.credentials()
    assert {"qk-123456", "rk-abcdef", "pg-pass", "tk-999"} <= set(found)
    assert "" not in found  # an empty key is no credential
    assert not any("nexus" == value or "ollama.lan" in value for value in found)


def test_plain_settings_hold_no_credentials():
    assert Settings().credentials() == []


@pytest.mark.parametrize(
    ("api", "llm_url", "ollama_url", "reached"),
    [
        ("ollama", "", "http://ollama.lan:11434", "http://ollama.lan:11434"),
        ("ollama", "http://llm.lan:8080", "http://ollama.lan:11434", "http://llm.lan:8080"),
        ("openai", "http://llm.lan:8080/v1", "http://ollama.lan:11434", "http://llm.lan:8080/v1"),
        ("openai", "", "http://ollama.lan:11434", ""),  # none: the LLM's work stays queued
    ],
)
def test_the_llm_is_reached_at_its_url_or_ollamas_for_the_ollama_api(
    api, llm_url, ollama_url, reached
):
    settings = Settings(llm_api=api, llm_url=llm_url, ollama_url=ollama_url)
    assert settings.llm_base_url == reached


# Ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("memory_history_retention_days", "-1", "--memory-history-retention-days: must be"),
        ("memory_history_retention_days", "1000000", "between 0 and 1000000 days, got 1000000.0"),
        ("extraction_event_retention_days", "-0.5", "--extraction-event-retention-days: must"),
        ("scrub_delay_seconds", "86401", "--scrub-delay-seconds: must be between 0 and 86400"),
        ("scrub_delay_seconds", "-1", "--scrub-delay-seconds: must be between 0 and 86400"),
        ("query_vector_cache", "1000001", "--query-vector-cache: must be between 0 and 1000000"),
        ("reranker_candidates", "1001", "--reranker-candidates: must be between 1 and 1000"),
        ("reranker_timeout", "600.5", "--reranker-timeout: must be more than 0 and at most 600"),
        ("llm_tokens_per_day", "-1", "--llm-tokens-per-day: must be 0 (no budget)"),
    ],
)
def test_a_value_out_of_its_range_is_refused_naming_its_flag(name, value, expected):
    with pytest.raises(SystemExit) as refused:
        settings_from({name: value})
    assert expected in str(refused.value)


def test_the_ranges_bounds_are_accepted():
    settings = settings_from(
        {
            "memory_history_retention_days": "0",
            "extraction_event_retention_days": "999999",
            "scrub_delay_seconds": "86400",
            "query_vector_cache": "1000000",
            "reranker_candidates": "1000",
            "reranker_timeout": "600",
            "llm_tokens_per_day": "0",
            "reranker_url": "https://gpu.lan/rerank",
        }
    )
    assert settings.scrub_delay_seconds == 86400
    assert settings.query_vector_cache == 1_000_000
    assert settings.reranker_candidates == 1000 and settings.reranker_timeout == 600
    assert settings.reranker_url == "https://gpu.lan/rerank"


def test_names_that_are_not_settings_are_left_out():
    assert settings_from({"log_format": "json", "no_such_flag": "x"}) == Settings(log_format="json")


# The README's table ---------------------------------------------------------------------


def test_the_readme_table_is_rewritten_in_place_and_only_when_it_changed(tmp_path):
    readme = tmp_path / "README.md"
    head = "| flag | environment | default | meaning |\n|---|---|---|---|\n"
    readme.write_text(f"# Settings\n\n{head}| `--gone` | `X` | (empty) | old |\n\nAfter.\n")
    assert rewrite_readme(readme) is True
    assert readme.read_text() == f"# Settings\n\n{markdown_table()}\nAfter.\n"
    assert rewrite_readme(readme) is False
