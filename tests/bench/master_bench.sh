#!/usr/bin/env bash
# Master benchmarks through the real client API: durable submissions per second with 1
# and 16 concurrent clients (median of 3 rounds each, ratio 16/1), and the master's
# resident memory per 10,000 queued jobs.
#   tests/bench/master_bench.sh [BUILD_BIN]   (default build/bin)
set -euo pipefail
bin=${1:-build/bin}
. "$(dirname "$0")/bench_lib.sh"
bench_init
# TLS and API tokens (docs/security.md): the cluster CA and the admin's token the master's first
# start wrote, in the environment (yardctl reads both there too).
bench_master
rss() { awk '/VmRSS/ {print $2}' "/proc/$master/status"; }
rate() {  # rate CLIENTS JOBS_PER_CLIENT PREFIX -> jobs/s
  "$bin/yard-submit-storm" --master "$addr" --ca "$YARD_CA" --clients "$1" --jobs "$2" --prefix "$3" 2>&1 >/dev/null |
    sed -n 's/.*jobs_per_second=//p'
}
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
rss0=$(rss)
one=(); many=()
for round in 1 2 3; do
  one+=("$(rate 1 400 one$round)")
  many+=("$(rate 16 25 many$round)")
done
m1=$(median "${one[@]}"); m16=$(median "${many[@]}")
echo "submissions/s, 1 client:   ${one[*]}  median $m1"
echo "submissions/s, 16 clients: ${many[*]}  median $m16"
echo "ratio 16/1: $(awk -v a="$m16" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')"
queued=$((3 * 400 + 3 * 16 * 25))
rate 16 $(((10000 - queued + 15) / 16)) fill >/dev/null
total=$("$bin/yardctl" --master "$addr" -o json job list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
rss1=$(rss)
echo "queued jobs: $total; master RSS: ${rss0} KiB empty, ${rss1} KiB with them;" \
  "$(awk -v a="$rss1" -v b="$rss0" -v n="$total" 'BEGIN { printf "%.1f MiB per 10,000 queued jobs", (a - b) / 1024 * 10000 / n }')"
