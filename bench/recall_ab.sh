#!/bin/bash
# Recall on the dev split, before and after: each tree serves its own code on
# a fresh data directory, one after the other, and `nexus-grpc eval recall`
# asks it every question. Reports go to $OUT/recall-{before,after}.json.
#
#   git worktree add /tmp/before 70ca385
#   bash bench/recall_ab.sh /tmp/before          # after: this checkout
set -euo pipefail
before=$(cd "${1:?usage: recall_ab.sh BEFORE_TREE [AFTER_TREE]}" && pwd)
after=$(cd "${2:-$(dirname "$0")/..}" && pwd)
data=$(cd "${EVAL_DATA:-$after/../shared/eval/locomo-dev}" && pwd)
out=${OUT:-/tmp}
py=${PYTHON:-$after/.venv/bin/python}
port=50961
for side in before after; do
  tree=${!side}
  dir=$(mktemp -d)
  (cd "$tree" && PYTHONPATH="$tree" exec "$py" -m nexus_grpc.cli serve \
      --listen 127.0.0.1:$port --data-dir "$dir" > "$dir.log" 2>&1) &
  pid=$!
  "$py" -c "import grpc; grpc.channel_ready_future(grpc.insecure_channel('127.0.0.1:$port')).result(timeout=60)"
  "$py" -m nexus_grpc.cli eval recall --target 127.0.0.1:$port --data "$data" --json \
      > "$out/recall-$side.json"
  kill "$pid"; wait "$pid" || true
  rm -rf "$dir" "$dir.log"
  echo "$side ($tree): $out/recall-$side.json"
done
