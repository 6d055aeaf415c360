"""Server settings: one frozen dataclass, every field a flag and an env var.

``OPTIONS`` is the single table the CLI, the README and the Dockerfile follow,
so a setting has the same name everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

LLM_APIS = ("ollama", "openai")


@dataclass(frozen=True)
class Option:
    flag: str
    env: tuple[str, ...]  # first one wins
    default: str
    help: str


OPTIONS: dict[str, Option] = {
    "listen": Option("--listen", ("NEXUS_LISTEN",), "127.0.0.1:50051", "gRPC address to serve on"),
    "data_dir": Option(
        "--data-dir",
        ("NEXUS_DATA_DIR",),
        "./data",
        "directory for the SQLite file and the embedded vector index",
    ),
    "sqlite_synchronous": Option(
        "--sqlite-synchronous",
        ("NEXUS_SQLITE_SYNCHRONOUS",),
        "FULL",
        "SQLite synchronous mode; FULL makes every OK survive power loss",
    ),
    "embedder": Option(
        "--embedder",
        ("NEXUS_EMBEDDER",),
        "minilm",
        "minilm (offline, in-process) or ollama (nomic-embed-text on --ollama-url)",
    ),
    "embedding_model": Option(
        "--embedding-model",
        ("NEXUS_EMBEDDING_MODEL",),
        "nomic-embed-text",
        "Ollama embedding model when --embedder ollama",
    ),
    "embedder_threads": Option(
        "--embedder-threads",
        ("NEXUS_EMBEDDER_THREADS",),
        "0",
        "indexing batches the offline embedder runs at once, one core each, below normal"
        " priority; 0 uses one per core, at most 2",
    ),
    "qdrant_url": Option(
        "--qdrant-url",
        ("QDRANT_URL",),
        "",
        "Qdrant server or cluster URL; empty uses the embedded engine in --data-dir",
    ),
    "qdrant_api_key": Option("--qdrant-api-key", ("QDRANT_API_KEY",), "", "Qdrant API key"),
    "vector_prewarm_mb": Option(
        "--vector-prewarm-mb",
        ("NEXUS_VECTOR_PREWARM_MB",),
        "2048",
        "MB of the embedded index's files read into the OS page cache at start, so the"
        " first searches after a restart do not wait on disk; 0 turns it off",
    ),
    "ollama_url": Option(
        "--ollama-url",
        ("OLLAMA_URL", "OLLAMA_HOST"),
        "",
        "Ollama base URL (the LLM server too, with --llm-api ollama); empty leaves extraction"
        " and summaries queued and ranks memory selection by semantic similarity",
    ),
    "llm_api": Option(
        "--llm-api",
        ("NEXUS_LLM_API",),
        "ollama",
        "how the LLM is reached: ollama (Ollama's API) or openai (an OpenAI-compatible server:"
        " llama.cpp's llama-server, vLLM, LM Studio)",
    ),
    "llm_url": Option(
        "--llm-url",
        ("NEXUS_LLM_URL",),
        "",
        "LLM server base URL; empty uses --ollama-url with --llm-api ollama (with --llm-api"
        " openai, none: extraction and summaries stay queued)",
    ),
    "llm_api_key": Option(
        "--llm-api-key",
        ("NEXUS_LLM_API_KEY",),
        "",
        "bearer token for an OpenAI-compatible server that asks for one",
    ),
    "llm_context_length": Option(
        "--llm-context-length",
        ("NEXUS_LLM_CONTEXT_LENGTH",),
        "0",
        "context window in tokens of every LLM model; 0 asks the server (Ollama /api/show,"
        " llama.cpp /props, vLLM /v1/models) and assumes 4096 where it does not say",
    ),
    "extraction_model": Option(
        "--extraction-model",
        ("NEXUS_EXTRACTION_MODEL",),
        "qwen2.5:3b",
        "Ollama model for entity extraction",
    ),
    "summary_model": Option(
        "--summary-model",
        ("NEXUS_SUMMARY_MODEL",),
        "qwen2.5:3b",
        "Ollama model for summaries and overviews",
    ),
    "selection_model": Option(
        "--selection-model",
        ("NEXUS_SELECTION_MODEL",),
        "qwen2.5:3b",
        "fast Ollama model for two-pass memory selection",
    ),
    "llm_concurrency": Option(
        "--llm-concurrency",
        ("NEXUS_LLM_CONCURRENCY",),
        "2",
        "concurrent LLM calls per background worker",
    ),
    "llm_timeout": Option(
        "--llm-timeout",
        ("NEXUS_LLM_TIMEOUT",),
        "120",
        "seconds before an LLM call is abandoned and retried",
    ),
    "job_max_attempts": Option(
        "--job-max-attempts",
        ("NEXUS_JOB_MAX_ATTEMPTS",),
        "6",
        "attempts before a background job is dead-lettered",
    ),
    "memory_history_retention_days": Option(
        "--memory-history-retention-days",
        ("NEXUS_MEMORY_HISTORY_RETENTION_DAYS",),
        "30",
        "days a deleted memory's history stays readable by its owner before it is purged",
    ),
    "max_concurrent_rpcs": Option(
        "--max-concurrent-rpcs",
        ("NEXUS_MAX_CONCURRENT_RPCS",),
        "512",
        "RPCs served at once; more are refused with RESOURCE_EXHAUSTED",
    ),
    "max_watch_streams": Option(
        "--max-watch-streams",
        ("NEXUS_MAX_WATCH_STREAMS",),
        "256",
        "WatchExtractions streams open at once (each also takes one of --max-concurrent-rpcs);"
        " more are refused with RESOURCE_EXHAUSTED; 0 turns the limit off",
    ),
    "max_watch_streams_per_key": Option(
        "--max-watch-streams-per-key",
        ("NEXUS_MAX_WATCH_STREAMS_PER_KEY",),
        "16",
        "WatchExtractions streams one API key may hold open at once, so one client cannot"
        " take every --max-watch-streams slot; more are refused with RESOURCE_EXHAUSTED;"
        " 0 turns this limit off; it applies only with API keys on",
    ),
    "max_message_bytes": Option(
        "--max-message-bytes",
        ("NEXUS_MAX_MESSAGE_BYTES",),
        "4194304",
        "largest request or response message",
    ),
    "grace_seconds": Option(
        "--grace-seconds",
        ("NEXUS_GRACE_SECONDS",),
        "10",
        "how long in-flight RPCs may finish on SIGTERM",
    ),
    "tls_cert": Option(
        "--tls-cert",
        ("NEXUS_TLS_CERT",),
        "",
        "PEM server certificate chain; with --tls-key serves TLS instead of plaintext",
    ),
    "tls_key": Option("--tls-key", ("NEXUS_TLS_KEY",), "", "PEM private key for --tls-cert"),
    "tls_client_ca": Option(
        "--tls-client-ca",
        ("NEXUS_TLS_CLIENT_CA",),
        "",
        "PEM CA bundle; when set, clients must present a certificate it signed (mTLS)",
    ),
    "auth_keys_file": Option(
        "--auth-keys-file",
        ("NEXUS_AUTH_KEYS_FILE",),
        "",
        "JSON file of API keys and the users each may act for; empty turns auth off",
    ),
    "default_tenant": Option(
        "--default-tenant",
        ("NEXUS_DEFAULT_TENANT",),
        "default",
        "tenant that owns data written before tenants existed (set on the first start of"
        " this version) and everything created with auth off",
    ),
    "metrics_listen": Option(
        "--metrics-listen",
        ("NEXUS_METRICS_LISTEN",),
        "",
        "host:port for Prometheus metrics over HTTP (e.g. 127.0.0.1:9464); empty turns them off",
    ),
    "otel_endpoint": Option(
        "--otel-endpoint",
        ("OTEL_EXPORTER_OTLP_ENDPOINT",),
        "",
        "OTLP/gRPC endpoint for OpenTelemetry traces (e.g. http://127.0.0.1:4317); empty turns"
        " tracing off; needs pip install 'nexus-grpc[otel]'",
    ),
    "log_level": Option("--log-level", ("NEXUS_LOG_LEVEL",), "INFO", "DEBUG, INFO, WARNING, ERROR"),
    "log_format": Option("--log-format", ("NEXUS_LOG_FORMAT",), "text", "text or json"),
}


@dataclass(frozen=True)
class Settings:
    listen: str = "127.0.0.1:50051"
    data_dir: Path = Path("./data")
    sqlite_synchronous: str = "FULL"
    embedder: str = "minilm"
    embedding_model: str = "nomic-embed-text"
    embedder_threads: int = 0
    qdrant_url: str = ""
    qdrant_api_key: str = ""
    vector_prewarm_mb: int = 2048
    ollama_url: str = ""
    llm_api: str = "ollama"
    llm_url: str = ""
    llm_api_key: str = ""
    llm_context_length: int = 0
    extraction_model: str = "qwen2.5:3b"
    summary_model: str = "qwen2.5:3b"
    selection_model: str = "qwen2.5:3b"
    llm_concurrency: int = 2
    llm_timeout: float = 120.0
    job_max_attempts: int = 6
    memory_history_retention_days: float = 30.0
    max_concurrent_rpcs: int = 512
    max_watch_streams: int = 256
    max_watch_streams_per_key: int = 16
    max_message_bytes: int = 4 * 1024 * 1024
    grace_seconds: float = 10.0
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    auth_keys_file: str = ""
    default_tenant: str = "default"
    metrics_listen: str = ""
    otel_endpoint: str = ""
    log_level: str = "INFO"
    log_format: str = "text"

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "nexus.sqlite3"

    @property
    def vectors_dir(self) -> Path:
        return self.data_dir / "vectors"

    @property
    def llm_base_url(self) -> str:
        """Where the LLM is served; empty when none is configured."""
        if self.llm_url:
            return self.llm_url
        return self.ollama_url if self.llm_api == "ollama" else ""


def env_default(name: str) -> str:
    option = OPTIONS[name]
    for var in option.env:
        value = os.environ.get(var)
        if value:
            return value
    return option.default


def settings_from(values: dict[str, str]) -> Settings:
    """Build Settings from string values (flags or env), converting types."""
    defaults = Settings()
    kwargs: dict[str, object] = {}
    for f in fields(Settings):
        if f.name not in values:
            continue
        raw, default = values[f.name], getattr(defaults, f.name)
        convert = Path if isinstance(default, Path) else type(default)
        try:
            kwargs[f.name] = convert(raw)
        except ValueError as exc:
            raise SystemExit(
                f"{OPTIONS[f.name].flag}: cannot read {raw!r} as {convert.__name__}"
            ) from exc
    retention = kwargs.get("memory_history_retention_days", 30.0)
    if not isinstance(retention, float) or not 0 <= retention < 1e6:
        raise SystemExit(
            f"{OPTIONS['memory_history_retention_days'].flag}: must be between 0 and 1000000"
            f" days, got {retention!r}"
        )
    settings = Settings(**kwargs)  # type: ignore[arg-type]
    if settings.llm_api not in LLM_APIS:
        raise SystemExit(f"--llm-api: {settings.llm_api!r} is not one of {', '.join(LLM_APIS)}")
    return settings
