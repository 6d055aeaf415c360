#!/usr/bin/env bash
# Builds the image (`make image`).
#
#   deploy/image.sh [TAG]          (default nexus-grpc:latest)
#
# Environment:
#   ENGINE        docker or podman (default: docker when its daemon answers)
#   PYTHON_IMAGE  the base (default docker.io/library/python:3.11-slim); when it
#                 cannot be pulled, a stand-in is built from Debian's packages
#                 (deploy/base-image.sh) and used instead, and the build says so
#   WITH_E5       true adds the e5 embedder (95 MB); default false
#   CA_BUNDLE     CA certificates pip trusts during the build (default: this
#                 host's bundle, so a TLS-inspecting proxy works); passed as a
#                 build secret, so it is in no image layer
#   BUILD_ARGS    more flags for the engine's build
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/engine.sh

TAG=${1:-nexus-grpc:latest}
PYTHON_IMAGE=${PYTHON_IMAGE:-docker.io/library/python:3.11-slim}
LOCAL_BASE=localhost/nexus-grpc-base:python3.11-bookworm
WITH_E5=${WITH_E5:-false}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

if ! engine image inspect "$PYTHON_IMAGE" >/dev/null 2>&1; then
    if engine pull "$PYTHON_IMAGE" >/dev/null 2>&1; then
        say "pulled $PYTHON_IMAGE"
    else
        say "no registry reachable for $PYTHON_IMAGE: building the base locally from Debian's packages (deploy/base-image.sh)"
        deploy/base-image.sh "$LOCAL_BASE"
        PYTHON_IMAGE=$LOCAL_BASE
    fi
fi

flags=("${BUILD_FORMAT[@]}" --tag "$TAG" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"
       --build-arg "WITH_E5=$WITH_E5")
if [ -s "$CA_BUNDLE" ]; then
    flags+=(--secret "id=ca-bundle,src=$CA_BUNDLE")
fi
# The base is local or was just pulled: never look it up again.
if [ "$ENGINE" = podman ]; then flags+=(--pull=never); fi
say "$ENGINE build $TAG (base $PYTHON_IMAGE, WITH_E5=$WITH_E5)"
started=$(date +%s%N)
# shellcheck disable=SC2086  # BUILD_ARGS is a list of flags
engine build "${flags[@]}" ${BUILD_ARGS:-} .
took_ms=$(( ($(date +%s%N) - started) / 1000000 ))
size=$(engine image inspect --format '{{.Size}}' "$TAG")
say "built $TAG in $(awk -v ms="$took_ms" 'BEGIN {printf "%.1f s", ms/1000}'): $(awk -v b="$size" 'BEGIN {printf "%.0f MB", b/1e6}')"
