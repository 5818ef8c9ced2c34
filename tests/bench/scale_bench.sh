#!/usr/bin/env bash
# The master's cost against what waits (issue 25; docs/benchmarks.md, "Incremental
# scheduling"), on one master without agents (jobs stay queued, so what is measured is the
# control plane): durable single submissions through the client API (yard-submit-storm, TLS,
# one kept-alive connection per client), with 1 client and with 16, first with nothing
# queued, then with QUEUED jobs queued (job arrays of 10,000); and the master's CPU while
# idle with them queued (over 62 s: one safety-net full pass included). Medians of ROUNDS rounds; ratios against the empty master in the
# same run.
#   tests/bench/scale_bench.sh [BIN] [QUEUED] [ROUNDS]   (defaults build/bin 100000 3)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
queued=${2:-100000}
rounds=${3:-3}
. "$(dirname "$0")/bench_lib.sh"
bench_init
bench_master

storm() {  # storm CLIENTS JOBS_EACH PREFIX: jobs/s
  "$bin/yard-submit-storm" --master "$addr" --ca "$YARD_CA" --clients "$1" --jobs "$2" --prefix "$3" 2>&1 >/dev/null |
    sed -n 's/.*jobs_per_second=//p' | cut -d. -f1
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$master/stat"; }
measure() {  # measure TAG: sets one_TAG, many_TAG
  local one=() many=()
  for r in $(seq "$rounds"); do
    one+=("$(storm 1 500 "$1-one$r-")")
    many+=("$(storm 16 1000 "$1-many$r-")")
  done
  printf -v "one_$1" %s "$(median "${one[@]}")"
  printf -v "many_$1" %s "$(median "${many[@]}")"
  echo "$1: 1 client ${one[*]} jobs/s; 16 clients ${many[*]} jobs/s"
}

measure empty
arrays=$(( (queued + 9999) / 10000 ))
t0=$(date +%s.%N)
for i in $(seq "$arrays"); do
  cat >"$tmp/arr.yaml" <<YAML
name: backlog$i
array: { count: 10000 }
tasks:
  - name: work
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" }
YAML
  "$bin/yardctl" --master "$addr" job submit "$tmp/arr.yaml" >/dev/null
done
t1=$(date +%s.%N)
echo "queued $((arrays * 10000)) jobs in $arrays arrays: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
sleep 3  # let the passes the arrays caused finish
hz=$(getconf CLK_TCK)
c0=$(cpu_ticks); t0=$(date +%s.%N)
sleep 62  # one full pass (every 60 s) falls in the window
c1=$(cpu_ticks); t1=$(date +%s.%N)
idle=$(awk -v c="$((c1 - c0))" -v hz="$hz" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", 100 * c / hz / (b - a) }')
echo "idle master with $((arrays * 10000)) queued: ${idle}% of one core (62 s, one full pass included)"
measure backlog
rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$master/status")
echo "master RSS: ${rss} MiB"
echo "queued=$((arrays * 10000)) one_client_empty=$one_empty one_client_queued=$one_backlog" \
  "one_ratio=$(awk -v a="$one_backlog" -v b="$one_empty" 'BEGIN { printf "%.2f", a / b }')" \
  "sixteen_empty=$many_empty sixteen_queued=$many_backlog idle_cpu_pct=$idle master_rss_mib=$rss"
