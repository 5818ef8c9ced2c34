#!/usr/bin/env bash
# The web console's rendering in Debian's chromium (docs/benchmarks.md, "Web console:
# rendering"): a master without agents (jobs stay queued: what is measured is the console
# and the API, not the work) serving build/console, 10,000 jobs submitted by
# yard-submit-storm, then console/tests/browser/bench.js: RUNS (default 5) jobs of 1,000 tasks,
# the Jobs page and the 1,000-task Job page loaded RUNS times each, medians printed.
#   tests/bench/console_bench.sh [BIN] [CONSOLE_DIR] [RUNS] [JOBS]
# (build/bin, build/console, 5, 1250 jobs per storm client: 10,000 jobs)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
console_dir=$(cd "${2:-build/console}" && pwd)
runs=${3:-5}
per_client=${4:-1250}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -x /usr/bin/chromium ] || { echo "console_bench: /usr/bin/chromium is missing (scripts/setup.sh)" >&2; exit 1; }
[ -f "$console_dir/index.html" ] || { echo "console_bench: no console in $console_dir (scripts/build_console.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && { kill "$master"; wait "$master" || true; } 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$bin/yard-master" --data-dir "$tmp/m" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --metrics-listen "" --console-dir "$console_dir" >"$tmp/m.out" 2>"$tmp/m.err" &
master=$!
for _ in $(seq 100); do grep -q '^http ' "$tmp/m.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^listening //p' "$tmp/m.out")
http=$(sed -n 's/^http //p' "$tmp/m.out")
[ -n "$http" ] || { echo "console_bench: the master did not start: $(cat "$tmp/m.err")" >&2; exit 1; }
export YARD_TOKEN
YARD_TOKEN=$(cat "$tmp/m/admin.token")

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(/usr/bin/chromium --version 2>/dev/null)"
echo "submitting $((8 * per_client)) jobs"
"$bin/yard-submit-storm" --master "$addr" --ca "$tmp/m/ca.pem" --clients 8 --jobs "$per_client" --prefix list >/dev/null 2>"$tmp/storm.err"
tail -1 "$tmp/storm.err"
YARD_URL="https://$http" RUNS=$runs node "$root/console/tests/browser/bench.js"
echo "the worst case for the layout: a lattice of 1,000 tasks with 1,950 crossing edges, once"
YARD_URL="https://$http" RUNS=1 LIST_RUNS=0 SHAPE=lattice node "$root/console/tests/browser/bench.js"
if kill -0 "$master" 2>/dev/null; then
  echo "master RSS at the end: $(awk '/VmRSS/ {print $2, $3}' "/proc/$master/status")"
else
  echo "console_bench: the master died; its log:" >&2; tail -30 "$tmp/m.err" >&2; exit 1
fi
