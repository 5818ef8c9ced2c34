#!/usr/bin/env bash
# Idle-peer lockout (issue 27, item 3; docs/benchmarks.md, "Idle-peer flood"): a master without
# agents, 1,024 idle TLS connections from 18 loopback addresses held for 40 s while an admin
# calls `yardctl queue list` every second; then the same with the master under a hard
# open-file limit of 1024, and with connections that never start TLS.
#   tests/bench/idle_flood.sh [BUILD_BIN]   (default build/bin)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && kill -9 "$master" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
run() {  # run LABEL FDLIMIT MODE
  rm -rf "$tmp/data"
  (ulimit -n "$2"; exec "$bin/yard-master" --data-dir "$tmp/data" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0) \
    >"$tmp/out" 2>"$tmp/err" &
  master=$!
  for _ in $(seq 200); do grep -q '^listening ' "$tmp/out" && break; sleep 0.1; done
  local addr
  addr=$(sed -n 's/^listening //p' "$tmp/out")
  [ -n "$addr" ] || { echo "$1: the master did not start: $(tail -3 "$tmp/err")"; return 1; }
  YARD_TOKEN=$(cat "$tmp/data/admin.token") YARD_CA="$tmp/data/ca.pem" \
    python3 "$(dirname "$0")/idle_flood.py" "$addr" "$tmp/data/ca.pem" "$bin/yardctl" 40 1024 "$3" | sed "s/^/$1: /"
  kill -9 "$master"; wait "$master" 2>/dev/null || true; master=
}
run "fd-limit-20000 handshake" 20000 handshake
run "fd-limit-1024 handshake" 1024 handshake
run "fd-limit-1024 raw-tcp" 1024 raw
