#!/usr/bin/env bash
# Builds a stand-in for the python:3.11-slim base from Debian's own packages,
# for machines that reach Debian's archive but no container registry (this
# project's CI): Debian 12 (bookworm) with its python3, which is 3.11.
#
#   deploy/base-image.sh [TAG]     (default localhost/nexus-grpc-base:python3.11-bookworm)
#
# Reuses TAG when the engine already has it. Needs root and debootstrap
# (apt-get install debootstrap). The image holds Debian's CA certificates only:
# a proxy's CA reaches the build as a secret (deploy/image.sh), never a layer.
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/engine.sh

TAG=${1:-localhost/nexus-grpc-base:python3.11-bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What python:3.11-slim offers the Dockerfile: python (3.11), venv with its
# bundled pip, CA certificates; useradd comes with the base system.
PACKAGES=python3,python3-venv,python-is-python3,ca-certificates

if engine image inspect "$TAG" >/dev/null 2>&1; then
    say "base image $TAG is already built"
    exit 0
fi
[ "$(id -u)" = 0 ] || die "debootstrap needs root"
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"

rootfs=$(mktemp -d "${TMPDIR:-/tmp}/nexus-grpc-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
say "building base image $TAG: debootstrap --variant=minbase $SUITE + $PACKAGES"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >/dev/null
# What Debian's slim images leave out: package lists, downloaded .debs, docs,
# manuals and message translations.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
tar -C "$rootfs" -c . | engine import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$TAG" >/dev/null
say "base image $TAG: $(engine image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
