#!/usr/bin/env bash
# The HTTP API's costs (docs/benchmarks.md, "HTTP API: a page of 10,000 jobs, and 50 open event streams"), on masters with no agents
# (jobs stay queued, so the numbers are the API's, not the workload's):
#  - GET /api/v1/jobs?limit=50 with 10,000 jobs in the master: median latency, against
#    GET /api/v1/whoami (a request that does nothing) in the same run;
#  - on a second, fresh master: its CPU and memory while 50 event streams are open and 10
#    jobs/s are submitted for 20 s, against the same submissions with no stream open. Queued
#    jobs accumulate (no agents), so rounds run in ABBA order (0, 50, 50, 0, ...) to cancel
#    the drift.
#   tests/bench/http_bench.sh [BIN] [CYCLES]    (BIN default build/bin, CYCLES 2: 4 rounds each)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
cycles=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && { kill -9 "$master"; wait "$master" || true; } 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

start() {  # start DIR: a master without agents; sets master, addr, http, YARD_TOKEN
  "$bin/yard-master" --data-dir "$1" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --metrics-listen "" >"$1.out" 2>"$1.err" &
  master=$!
  for _ in $(seq 100); do grep -q '^http ' "$1.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^listening //p' "$1.out")
  http=$(sed -n 's/^http //p' "$1.out")
  export YARD_TOKEN
  YARD_TOKEN=$(cat "$1/admin.token")
}

start "$tmp/list"
echo "submitting 10000 jobs"
"$bin/yard-submit-storm" --master "$addr" --ca "$tmp/list/ca.pem" --clients 8 --jobs 1250 --prefix list >/dev/null 2>"$tmp/storm.err"
tail -1 "$tmp/storm.err"
PHASE=list MASTER_PID=$master HTTP=$http CA="$tmp/list/ca.pem" /usr/bin/python3 "$here/http_bench.py"
kill "$master"; wait "$master" 2>/dev/null || true; master=

start "$tmp/streams"
PHASE=streams MASTER_PID=$master HTTP=$http CA="$tmp/streams/ca.pem" CYCLES=$cycles STORM="$bin/yard-submit-storm" \
  ADDR=$addr /usr/bin/python3 "$here/http_bench.py"
