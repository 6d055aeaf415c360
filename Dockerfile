# nexus-grpc: a slim, non-root image.  Build: docker build -t nexus-grpc .
# Run:   docker run -p 50051:50051 -v nexus-data:/data nexus-grpc
# The settings are the same environment variables as the CLI's flags
# (nexus-grpc serve --help), e.g. -e OLLAMA_URL=http://ollama:11434
# -e QDRANT_URL=http://qdrant:6333 for a LAN deployment, and
# -e NEXUS_RERANKER_URL=http://gpu-box:8080/v1/rerank for a reranker on the LAN
# (NEXUS_RERANKER_MODEL, NEXUS_RERANKER_API_KEY where the service wants them).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY nexus_grpc ./nexus_grpc
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install ".[server,otel]"

FROM python:3.11-slim
RUN groupadd --system nexus && useradd --system --gid nexus --home /data nexus \
 && mkdir -p /data && chown nexus:nexus /data
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NEXUS_LISTEN=0.0.0.0:50051 \
    NEXUS_DATA_DIR=/data \
    NEXUS_SQLITE_SYNCHRONOUS=FULL \
    NEXUS_DATABASE_URL= \
    NEXUS_EMBEDDER=minilm \
    NEXUS_LOG_FORMAT=json \
    QDRANT_URL= \
    OLLAMA_URL= \
    NEXUS_LLM_API=ollama \
    NEXUS_LLM_URL= \
    NEXUS_RERANKER_URL= \
    NEXUS_AUTH_KEYS_FILE= \
    NEXUS_TLS_CERT= \
    NEXUS_TLS_KEY= \
    NEXUS_TLS_CLIENT_CA= \
    NEXUS_METRICS_LISTEN=
USER nexus
VOLUME ["/data"]
EXPOSE 50051
# grpc.health.v1 through the package's own client: no extra binary needed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; ch = grpc.insecure_channel('127.0.0.1:50051'); r = g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=4); sys.exit(0 if r.status == h.HealthCheckResponse.SERVING else 1)"]
ENTRYPOINT ["nexus-grpc"]
CMD ["serve"]
