# shellcheck shell=bash
# Sourced by the image scripts (deploy/*.sh): picks the container engine and
# sets what it needs to run here.
#
# After sourcing:
#   ENGINE        docker or podman (ENGINE=... in the environment chooses)
#   BUILD_FORMAT  the build flags that keep the HEALTHCHECK: podman's default
#                 OCI image format has no HEALTHCHECK, the docker format does
#   engine CMD..  runs the engine
#
# docker counts only when its daemon answers: a docker CLI without a daemon
# (common on CI machines) falls through to podman.

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
say() { echo "==> $*" >&2; }

engine() { "$ENGINE" "$@"; }

_pick_engine() {
    if [ -n "${ENGINE:-}" ]; then
        command -v "$ENGINE" >/dev/null || die "ENGINE=$ENGINE is not installed"
        return
    fi
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        ENGINE=docker
    elif command -v podman >/dev/null; then
        ENGINE=podman
    else
        die "no container engine: install Docker, or podman (Debian/Ubuntu: apt-get install podman buildah runc)"
    fi
}

# podman reads its settings from containers.conf. Two defaults fail on some
# hosts (this project's CI machines among them), so a private file overrides
# them there, and only there; a CONTAINERS_CONF you set yourself wins:
#   - crun refuses cgroups in hybrid v1/v2 mode ("cgroups in hybrid mode not
#     supported"): runc handles it;
#   - podman raises a container's open-file and process limits to 1048576 and
#     more, which fails without CAP_SYS_RESOURCE where this shell's hard limits
#     are lower: the container gets this shell's limits instead (its process
#     limit no higher than kernel.pid_max, which some sandboxes enforce).
_podman_conf() {
    [ -z "${CONTAINERS_CONF:-}" ] || return 0
    local runtime="" ulimits=""
    if [ -d /sys/fs/cgroup/unified ] || ! command -v crun >/dev/null; then
        command -v runc >/dev/null || die "podman here needs runc (apt-get install runc)"
        runtime=runc
    fi
    local nofile nproc pid_max
    nofile=$(ulimit -Hn) nproc=$(ulimit -Hu) pid_max=$(cat /proc/sys/kernel/pid_max)
    if [ "$nofile" != unlimited ] && [ "$nofile" -lt 1048576 ]; then
        if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc=$pid_max; fi
        ulimits="\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\""
    fi
    [ -n "$runtime$ulimits" ] || return 0
    local dir="${TMPDIR:-/tmp}/nexus-grpc-image"
    mkdir -p "$dir"
    {
        echo "[containers]"
        [ -z "$ulimits" ] || echo "default_ulimits = [$ulimits]"
        echo "[engine]"
        [ -z "$runtime" ] || echo "runtime = \"$runtime\""
    } >"$dir/containers.conf"
    export CONTAINERS_CONF="$dir/containers.conf"
}

_pick_engine
# shellcheck disable=SC2034  # BUILD_FORMAT is for the scripts that source this
if [ "$ENGINE" = podman ]; then
    _podman_conf
    BUILD_FORMAT=(--format docker)
else
    BUILD_FORMAT=()
fi
