#!/usr/bin/env bash
# N agents joining at once (issue 25; docs/benchmarks.md, "Simulated agents"): how long other
# requests wait meanwhile. A master with its HTTP API; a probe sends GET /api/v1/jobs?limit=1
# (answered by the client API on the master's io thread) on one kept-alive TLS connection
# every 5 ms, first for 3 s alone (the baseline), then while yard-synthetic-nodes joins N
# nodes all at once (--join-window N: N CSRs signed, N certificates recorded, N registrations)
# and for 1 s after. The last line, exactly:
#   agents=N join_s=S probe_p50_ms=A probe_p99_ms=B probe_max_ms=C baseline_max_ms=D
# (probe_*: the probe's latencies from the first join to the last registration).
#   tests/bench/join_storm.sh [BIN_DIR] [N]   (defaults build/bin 1000)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-1000}
here=$(cd "$(dirname "$0")" && pwd)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. "$here/bench_lib.sh"
bench_init
printf 'join_token = "join-storm"\n' >"$tmp/master.toml"
bench_master --config "$tmp/master.toml" --http-listen 127.0.0.1:0

HTTP=$http CA="$tmp/data/ca.pem" YARD_TOKEN=$(cat "$tmp/data/admin.token") MARKS="$tmp/marks" \
  /usr/bin/python3 - >"$tmp/probe.out" <<'PY' &
import http.client, os, ssl, time
host, port = os.environ["HTTP"].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["CA"])
h = {"Authorization": "Bearer " + os.environ["YARD_TOKEN"]}
c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=60)
marks = os.environ["MARKS"]
while not os.path.exists(marks + ".stop"):
    t = time.time()
    c.request("GET", "/api/v1/jobs?limit=1", headers=h)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        raise SystemExit(f"probe: HTTP {r.status}")
    print(f"{t:.6f} {(time.time() - t) * 1000:.3f}", flush=True)
    time.sleep(0.005)
PY
probe=$!
pids+=("$probe")
sleep 3
t0=$(date +%s.%N)
YARD_JOIN_TOKEN=join-storm "$bin/yard-synthetic-nodes" --master "$agents" --ca "$tmp/data/ca.pem" --count "$n" \
  --join-window "$n" --once --cpu 4 --memory 16Gi --gpu 0 >"$tmp/nodes.out" 2>"$tmp/nodes.err" ||
  { echo "join_storm: the nodes failed: $(tail -3 "$tmp/nodes.err")" >&2; exit 1; }
t1=$(date +%s.%N)
sleep 1
touch "$tmp/marks.stop"
wait "$probe" || { echo "join_storm: the probe failed" >&2; exit 1; }
grep -q "registered $n nodes" "$tmp/nodes.out" || { echo "join_storm: not every node registered" >&2; exit 1; }
base=$(awk -v a="$t0" '$1 < a && $2 > m { m = $2 } END { printf "%.1f", m }' "$tmp/probe.out")
awk -v a="$t0" -v b="$t1" '$1 >= a && $1 <= b { print $2 }' "$tmp/probe.out" | sort -g >"$tmp/during"
k=$(wc -l <"$tmp/during")
[ "$k" -gt 0 ] || { echo "join_storm: no probe during the joins" >&2; exit 1; }
at() { sed -n "$(awk -v k="$k" -v q="$1" 'BEGIN { print int((k - 1) * q) + 1 }')p" "$tmp/during"; }
awk -v n="$n" -v a="$t0" -v b="$t1" -v p50="$(at 0.5)" -v p99="$(at 0.99)" -v mx="$(at 1)" -v base="$base" 'BEGIN {
  printf "agents=%d join_s=%.1f probe_p50_ms=%.1f probe_p99_ms=%.1f probe_max_ms=%.1f baseline_max_ms=%s\n",
    n, b - a, p50, p99, mx, base }'
