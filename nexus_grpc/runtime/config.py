"""Server settings: one frozen dataclass, every field a flag and an env var.

Each setting is declared once, in ``Settings``; ``OPTIONS`` (what the CLI,
the README's table and the Dockerfile follow) is derived from it, so a
setting has the same name, default and allowed values everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nexus_grpc.core.redact import url_secrets


@dataclass(frozen=True)
class Option:
    """How one setting is given: derived from its declaration in ``Settings``."""

    name: str
    flag: str
    env: tuple[str, ...]  # first one wins
    default: str  # as a user would type it
    type: type
    choices: tuple[str, ...]  # empty: any value of ``type``
    help: str

    def parse(self, raw: str) -> Any:
        """``raw`` (from a flag or an env var) as this option's value.

        A bad value stops the start with a line naming the flag. Choices are
        matched regardless of case and stored as declared.
        """
        if self.choices:
            for choice in self.choices:
                if raw.strip().lower() == choice.lower():
                    return choice
            raise SystemExit(f"{self.flag}: {raw!r} is not one of {', '.join(self.choices)}")
        try:
            return self.type(raw)
        except ValueError as exc:
            raise SystemExit(f"{self.flag}: cannot read {raw!r} as {self.type.__name__}") from exc


@dataclass(frozen=True)
class _Declared:
    default: str
    env: tuple[str, ...]
    choices: tuple[str, ...]
    help: str


def option(default: str, *, env: tuple[str, ...], help: str, choices: tuple[str, ...] = ()) -> Any:
    """Declares a setting inside ``Settings`` (see its docstring)."""
    return _Declared(default, env, choices, help)


_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "Path": Path}


def _declare(cls: type) -> type:
    """Turns each ``option(...)`` of ``cls`` into a dataclass field whose
    default is the declared text read as the field's type, and records the
    option in its metadata (``dataclass`` runs after this)."""
    for name, annotation in cls.__annotations__.items():
        declared = cls.__dict__.get(name)
        if not isinstance(declared, _Declared):
            continue
        kind = _TYPES[annotation]
        opt = Option(
            name=name,
            flag="--" + name.replace("_", "-"),
            env=declared.env,
            default=declared.default,
            type=kind,
            choices=declared.choices,
            help=declared.help,
        )
        setattr(cls, name, field(default=opt.parse(declared.default), metadata={"option": opt}))
    return cls


@dataclass(frozen=True)
@_declare
class Settings:
    """Every server setting, declared once: its type (the annotation), its
    default as a user would type it, its environment variables (the first set
    one wins), its allowed values and its help. The flag is the field's name
    with dashes (``data_dir``: ``--data-dir``). ``OPTIONS``, ``serve --help``
    and the README's table (``python -m nexus_grpc.runtime.config README.md``) are
    derived from these declarations."""

    listen: str = option(
        "127.0.0.1:50051",
        env=("NEXUS_LISTEN",),
        help="gRPC address to serve on",
    )

    data_dir: Path = option(
        "./data",
        env=("NEXUS_DATA_DIR",),
        help="directory for the SQLite file and the embedded vector index",
    )

    sqlite_synchronous: str = option(
        "FULL",
        env=("NEXUS_SQLITE_SYNCHRONOUS",),
        choices=("OFF", "NORMAL", "FULL", "EXTRA"),
        help=(
            "SQLite synchronous mode; FULL makes every OK survive power loss (SQLite's"
            " documented guarantee for WAL; kill -9 is what the tests prove)"
        ),
    )

    database_url: str = option(
        "",
        env=("NEXUS_DATABASE_URL",),
        help="PostgreSQL URL (postgresql://...) for the system of record, shared by any number"
        " of instances; vectors then live beside it with pgvector unless --qdrant-url is set;"
        " empty uses SQLite in --data-dir",
    )

    embedder: str = option(
        "minilm",
        env=("NEXUS_EMBEDDER",),
        choices=("minilm", "e5", "ollama"),
        help=(
            "minilm (offline all-MiniLM-L6-v2), e5 (offline multilingual-e5-small: better "
            "recall@1/@5 for 4-5x the embedding CPU) or ollama (nomic-embed-text on "
            "--ollama-url); a change needs `nexus-grpc reindex`"
        ),
    )

    embedding_model: str = option(
        "nomic-embed-text",
        env=("NEXUS_EMBEDDING_MODEL",),
        help="Ollama embedding model when --embedder ollama",
    )

    embedder_threads: int = option(
        "0",
        env=("NEXUS_EMBEDDER_THREADS",),
        help=(
            "indexing batches the offline embedder runs at once, one core each, below "
            "normal priority; 0 uses one per core, at most 2"
        ),
    )

    query_vector_cache: int = option(
        "2048",
        env=("NEXUS_QUERY_VECTOR_CACHE",),
        help=(
            "search-query vectors kept in memory (3 KB each), least recently used out first, so"
            " a question asked again (a retry, another mode or page, the same words in another"
            " search) is not embedded again; 0 turns the cache off"
        ),
    )

    reranker_url: str = option(
        "",
        env=("NEXUS_RERANKER_URL",),
        help=(
            "rerank service that orders the default search mode's top candidates: llama.cpp's"
            " llama-server --reranking, Hugging Face TEI, Infinity or a Jina/Cohere-compatible"
            " endpoint (e.g. http://gpu-box.lan:8080/v1/rerank; a URL without a path gets"
            " /rerank); empty leaves searches in the fused order"
        ),
    )

    reranker_model: str = option(
        "",
        env=("NEXUS_RERANKER_MODEL",),
        help=(
            "model name sent with each rerank request, for a service that hosts several"
            " (llama-server and TEI answer with the one they loaded)"
        ),
    )

    reranker_api_key: str = option(
        "",
        env=("NEXUS_RERANKER_API_KEY",),
        help="bearer token for a rerank service that asks for one",
    )

    reranker_candidates: int = option(
        "30",
        env=("NEXUS_RERANKER_CANDIDATES",),
        help=(
            "fused candidates of each search the reranker orders (hits past them follow in fused"
            " order); the"
            " keyword and vector paths' top 30 hold the evidence for 0.967 of the LoCoMo dev"
            " questions (docs/recall.md); TEI takes 32 texts a request unless"
            " --max-client-batch-size says more"
        ),
    )

    reranker_timeout: float = option(
        "2",
        env=("NEXUS_RERANKER_TIMEOUT",),
        help=(
            "seconds a rerank call may take, cut to what the caller's deadline leaves; slower,"
            " failing or unreachable, the search answers in the fused order and says why in"
            " each hit's degraded_reason"
        ),
    )

    qdrant_url: str = option(
        "",
        env=("QDRANT_URL",),
        help="Qdrant server or cluster URL; empty uses the embedded engine in --data-dir",
    )

    qdrant_api_key: str = option(
        "",
        env=("QDRANT_API_KEY",),
        help="Qdrant API key",
    )

    vector_prewarm_mb: int = option(
        "2048",
        env=("NEXUS_VECTOR_PREWARM_MB",),
        help=(
            "MB of the embedded index's files read into the OS page cache at start, so the "
            "first searches after a restart do not wait on disk; 0 turns it off"
        ),
    )

    ollama_url: str = option(
        "",
        env=("OLLAMA_URL", "OLLAMA_HOST"),
        help=(
            "Ollama base URL (the LLM server too, with --llm-api ollama); empty leaves "
            "extraction and summaries queued and ranks memory selection by semantic "
            "similarity"
        ),
    )

    llm_api: str = option(
        "ollama",
        env=("NEXUS_LLM_API",),
        choices=("ollama", "openai"),
        help=(
            "how the LLM is reached: ollama (Ollama's API) or openai (an OpenAI-compatible "
            "server: llama.cpp's llama-server, vLLM, LM Studio)"
        ),
    )

    llm_url: str = option(
        "",
        env=("NEXUS_LLM_URL",),
        help=(
            "LLM server base URL; empty uses --ollama-url with --llm-api ollama (with "
            "--llm-api openai, none: extraction and summaries stay queued)"
        ),
    )

    llm_api_key: str = option(
        "",
        env=("NEXUS_LLM_API_KEY",),
        help="bearer token for an OpenAI-compatible server that asks for one",
    )

    llm_context_length: int = option(
        "0",
        env=("NEXUS_LLM_CONTEXT_LENGTH",),
        help=(
            "context window in tokens of every LLM model; 0 asks the server (Ollama "
            "/api/show, llama.cpp /props, vLLM /v1/models) and assumes 4096 where it does "
            "not say"
        ),
    )

    extraction_model: str = option(
        "qwen2.5:3b",
        env=("NEXUS_EXTRACTION_MODEL",),
        help="Ollama model for entity extraction",
    )

    summary_model: str = option(
        "qwen2.5:3b",
        env=("NEXUS_SUMMARY_MODEL",),
        help="Ollama model for summaries and overviews",
    )

    selection_model: str = option(
        "qwen2.5:3b",
        env=("NEXUS_SELECTION_MODEL",),
        help="fast Ollama model for two-pass memory selection",
    )

    llm_concurrency: int = option(
        "2",
        env=("NEXUS_LLM_CONCURRENCY",),
        help="concurrent LLM calls per background worker",
    )

    llm_timeout: float = option(
        "120",
        env=("NEXUS_LLM_TIMEOUT",),
        help="seconds before an LLM call is abandoned and retried",
    )

    llm_tokens_per_day: int = option(
        "0",
        env=("NEXUS_LLM_TOKENS_PER_DAY",),
        help="each tenant's LLM token budget per UTC day (prompt and completion, every stage),"
        " unless the keys file's \"tenants\" names its own; past it the tenant's LLM jobs wait"
        " for the next day and SelectMemories ranks by similarity (0: no budget)",
    )

    job_max_attempts: int = option(
        "6",
        env=("NEXUS_JOB_MAX_ATTEMPTS",),
        help="attempts before a background job is dead-lettered",
    )

    job_lease_seconds: float = option(
        "60",
        env=("NEXUS_JOB_LEASE_SECONDS",),
        help="with --database-url: how long a claimed job stays with its instance unless renewed"
        " (renewed while it runs); a dead instance's jobs go to another after this",
    )

    memory_history_retention_days: float = option(
        "30",
        env=("NEXUS_MEMORY_HISTORY_RETENTION_DAYS",),
        help="days a deleted memory's history stays readable by its owner before it is purged",
    )

    extraction_event_retention_days: float = option(
        "30",
        env=("NEXUS_EXTRACTION_EVENT_RETENTION_DAYS",),
        help="days extraction events stay for WatchExtractions to replay before they are purged",
    )

    scrub_delay_seconds: float = option(
        "60",
        env=("NEXUS_SCRUB_DELAY_SECONDS",),
        help="seconds after a delete before its bytes are scrubbed off the disk (deletes"
        " within it share one scrub; docs/privacy.md)",
    )

    max_concurrent_rpcs: int = option(
        "512",
        env=("NEXUS_MAX_CONCURRENT_RPCS",),
        help="RPCs served at once; more are refused with RESOURCE_EXHAUSTED",
    )

    max_concurrent_rpcs_per_key: int = option(
        "128",
        env=("NEXUS_MAX_CONCURRENT_RPCS_PER_KEY",),
        help=(
            "RPCs one API key may have running at once, streams included (an open"
            " ImportEpisodes, SearchEpisodes or WatchExtractions counts until it ends), so one"
            " client cannot take every --max-concurrent-rpcs slot; more are refused with"
            " RESOURCE_EXHAUSTED; must be below --max-concurrent-rpcs; 0 turns this limit off;"
            " it applies only with API keys on"
        ),
    )

    max_concurrent_rpcs_per_tenant: int = option(
        "-1",
        env=("NEXUS_MAX_CONCURRENT_RPCS_PER_TENANT",),
        help=(
            "RPCs the keys of one tenant may have running at once, together, streams"
            " included, so no tenant, whatever its number of keys, can take every"
            " --max-concurrent-rpcs slot; more are refused with RESOURCE_EXHAUSTED;"
            " -1 (the default): half of --max-concurrent-rpcs; must be below it;"
            " 0 turns this limit off; it applies only with API keys on"
        ),
    )

    max_watch_streams: int = option(
        "256",
        env=("NEXUS_MAX_WATCH_STREAMS",),
        help=(
            "WatchExtractions streams open at once (each also takes one of "
            "--max-concurrent-rpcs); more are refused with RESOURCE_EXHAUSTED; 0 turns the "
            "limit off"
        ),
    )

    max_watch_streams_per_key: int = option(
        "16",
        env=("NEXUS_MAX_WATCH_STREAMS_PER_KEY",),
        help=(
            "WatchExtractions streams one API key may hold open at once, so one client "
            "cannot take every --max-watch-streams slot; more are refused with "
            "RESOURCE_EXHAUSTED; 0 turns this limit off; it applies only with API keys on"
        ),
    )

    max_watch_streams_per_tenant: int = option(
        "-1",
        env=("NEXUS_MAX_WATCH_STREAMS_PER_TENANT",),
        help=(
            "WatchExtractions streams the keys of one tenant may hold open at once,"
            " together; more are refused with RESOURCE_EXHAUSTED; -1 (the default): half of"
            " --max-watch-streams; 0 turns this limit off; it applies only with API keys on"
        ),
    )

    max_message_bytes: int = option(
        "4194304",
        env=("NEXUS_MAX_MESSAGE_BYTES",),
        help="largest request or response message",
    )

    grace_seconds: float = option(
        "10",
        env=("NEXUS_GRACE_SECONDS",),
        help="how long in-flight RPCs may finish on SIGTERM",
    )

    tls_cert: str = option(
        "",
        env=("NEXUS_TLS_CERT",),
        help="PEM server certificate chain; with --tls-key serves TLS instead of plaintext",
    )

    tls_key: str = option(
        "",
        env=("NEXUS_TLS_KEY",),
        help="PEM private key for --tls-cert",
    )

    tls_client_ca: str = option(
        "",
        env=("NEXUS_TLS_CLIENT_CA",),
        help="PEM CA bundle; when set, clients must present a certificate it signed (mTLS)",
    )

    auth_keys_file: str = option(
        "",
        env=("NEXUS_AUTH_KEYS_FILE",),
        help="JSON file of API keys and the users each may act for; empty turns auth off",
    )

    default_tenant: str = option(
        "default",
        env=("NEXUS_DEFAULT_TENANT",),
        help=(
            "tenant that owns data written before tenants existed (set on the first start "
            "of this version) and everything created with auth off"
        ),
    )

    metrics_listen: str = option(
        "",
        env=("NEXUS_METRICS_LISTEN",),
        help=(
            "host:port for Prometheus metrics over HTTP (e.g. 127.0.0.1:9464); empty turns them off"
        ),
    )

    otel_endpoint: str = option(
        "",
        env=("OTEL_EXPORTER_OTLP_ENDPOINT",),
        help=(
            "OTLP/gRPC endpoint for OpenTelemetry traces (e.g. http://127.0.0.1:4317); "
            "empty turns tracing off; needs pip install 'nexus-grpc[otel]'"
        ),
    )

    log_level: str = option(
        "INFO",
        env=("NEXUS_LOG_LEVEL",),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="DEBUG, INFO, WARNING, ERROR",
    )

    log_format: str = option(
        "text",
        env=("NEXUS_LOG_FORMAT",),
        choices=("text", "json"),
        help="text or json",
    )

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "nexus.sqlite3"

    @property
    def vectors_dir(self) -> Path:
        return self.data_dir / "vectors"

    @property
    def rpcs_per_tenant(self) -> int:
        """``--max-concurrent-rpcs-per-tenant`` as it applies (-1: half the server's)."""
        return _half_unless_set(self.max_concurrent_rpcs_per_tenant, self.max_concurrent_rpcs)

    @property
    def watch_streams_per_tenant(self) -> int:
        """``--max-watch-streams-per-tenant`` as it applies (-1: half the server's)."""
        return _half_unless_set(self.max_watch_streams_per_tenant, self.max_watch_streams)

    def credentials(self) -> list[str]:
        """Every credential these settings hold: the passwords and secret query
        values of each URL, and the keys (see ``core.redact``)."""
        found = [getattr(self, name) for name in KEY_SETTINGS]
        for name in URL_SETTINGS:
            found += url_secrets(getattr(self, name))
        return [value for value in found if value]

    @property
    def llm_base_url(self) -> str:
        """Where the LLM is served; empty when none is configured."""
        if self.llm_url:
            return self.llm_url
        return self.ollama_url if self.llm_api == "ollama" else ""


#: Settings that hold a URL, which may carry credentials: each is shown masked.
def _half_unless_set(value: int, overall: int) -> int:
    """A per-tenant limit: ``value``, or for -1 half of ``overall`` (at least
    one; 0 where ``overall`` is off)."""
    if value >= 0:
        return value
    return max(1, overall // 2) if overall > 0 else 0


URL_SETTINGS = (
    "database_url",
    "qdrant_url",
    "ollama_url",
    "llm_url",
    "otel_endpoint",
    "reranker_url",
)
#: Settings that are credentials themselves: never shown.
KEY_SETTINGS = ("qdrant_api_key", "llm_api_key", "reranker_api_key")

#: Every option by field name, in declaration order.
OPTIONS: dict[str, Option] = {f.name: f.metadata["option"] for f in fields(Settings)}


def env_default(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The setting ``name`` as ``serve`` reads it from ``environ`` (default: this
    process's environment): its first set variable, else its default."""
    option = OPTIONS[name]
    environ = os.environ if environ is None else environ
    for var in option.env:
        value = environ.get(var)
        if value:
            return value
    return option.default


def settings_from(values: dict[str, str]) -> Settings:
    """Build Settings from string values (flags or env), converting types and
    checking choices; a bad value exits naming its flag."""
    kwargs = {name: OPTIONS[name].parse(raw) for name, raw in values.items() if name in OPTIONS}
    retention = kwargs.get("memory_history_retention_days", 30.0)
    if not 0 <= retention < 1e6:
        raise SystemExit(
            f"{OPTIONS['memory_history_retention_days'].flag}: must be between 0 and 1000000"
            f" days, got {retention!r}"
        )
    for name in ("extraction_event_retention_days",):
        days = kwargs.get(name, 30.0)
        if not 0 <= days < 1e6:
            raise SystemExit(
                f"{OPTIONS[name].flag}: must be between 0 and 1000000 days, got {days!r}"
            )
    delay = kwargs.get("scrub_delay_seconds", 60.0)
    if not 0 <= delay <= 86_400:
        raise SystemExit(
            f"{OPTIONS['scrub_delay_seconds'].flag}: must be between 0 and 86400 seconds,"
            f" got {delay!r}"
        )
    cache = kwargs.get("query_vector_cache", 0)
    if not 0 <= cache <= 1_000_000:
        raise SystemExit(
            f"{OPTIONS['query_vector_cache'].flag}: must be between 0 and 1000000 vectors,"
            f" got {cache!r}"
        )
    candidates = kwargs.get("reranker_candidates", 30)
    if not 1 <= candidates <= 1000:
        raise SystemExit(
            f"{OPTIONS['reranker_candidates'].flag}: must be between 1 and 1000, got {candidates!r}"
        )
    timeout = kwargs.get("reranker_timeout", 2.0)
    if not 0 < timeout <= 600:
        raise SystemExit(
            f"{OPTIONS['reranker_timeout'].flag}: must be more than 0 and at most 600 seconds,"
            f" got {timeout!r}"
        )
    budget = kwargs.get("llm_tokens_per_day", 0)
    if budget < 0:
        raise SystemExit(
            f"{OPTIONS['llm_tokens_per_day'].flag}: must be 0 (no budget) or a number of tokens,"
            f" got {budget!r}"
        )
    url = kwargs.get("reranker_url", "")
    if url and not _is_http_url(url):
        raise SystemExit(
            f"{OPTIONS['reranker_url'].flag}: {url!r} is not an http:// or https:// URL"
        )
    return Settings(**kwargs)


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url.strip())
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def help_text(option: Option) -> str:
    """The option's line in ``serve --help``."""
    choices = f"one of {', '.join(option.choices)}; " if option.choices else ""
    return f"{option.help} ({choices}env {' or '.join(option.env)}; default {option.default!r})"


def markdown_table() -> str:
    """The README's settings table, one row per option."""
    lines = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for o in OPTIONS.values():
        envs = " / ".join(f"`{e}`" for e in o.env)
        default = f"`{o.default}`" if o.default else "(empty)"
        lines.append(f"| `{o.flag}` | {envs} | {default} | {o.help} |")
    return "\n".join(lines) + "\n"


def rewrite_readme(path: Path) -> bool:
    """Replace the settings table in the README at ``path`` with
    ``markdown_table()``; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    head = "| flag | environment | default | meaning |\n"
    start = text.index(head)
    end = start
    for line in text[start:].splitlines(keepends=True):
        if not line.startswith("|"):
            break
        end += len(line)
    new = text[:start] + markdown_table() + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":  # python -m nexus_grpc.runtime.config README.md
    import sys

    for arg in sys.argv[1:]:
        print(f"{arg}: {'rewritten' if rewrite_readme(Path(arg)) else 'up to date'}")
