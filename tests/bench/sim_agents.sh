#!/usr/bin/env bash
# N simulated agents against one real master (issue 25; docs/benchmarks.md, "Simulated
# agents"): yard-synthetic-nodes holds N real agent connections in one process (each node
# joins with the join token, gets its certificate, registers, and heartbeats over mutual TLS
# every second, from a loopback address of its own), advertises 4 CPUs and 16Gi, and runs
# what the master places on it in simulation (--run-ms: running from its next heartbeat,
# exited 0 three seconds later). Jobs are submitted throughout (yard-submit-storm: 4 clients,
# one-replica host jobs of 100m, SIM_SUBMIT_RATE a second in all, default N/20 and at least
# 10; 0 submits as fast as the master answers), so replicas are placed, started and finished
# on the simulated nodes. The master's CPU is averaged over the SECONDS after every node registered.
# The last line, exactly:
#   agents=N heartbeats_per_s=X p99_ms=Y master_cpu_pct=Z master_rss_mib=W placements_per_s=P
# (p99: a heartbeat sent to the master's answer received; CPU in percent of one core).
#   tests/bench/sim_agents.sh BIN_DIR N SECONDS   (defaults build/bin 1000 60)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-1000}
secs=${3:-60}
rate=${SIM_SUBMIT_RATE:-$(( n / 20 > 10 ? n / 20 : 10 ))}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. "$(dirname "$0")/bench_lib.sh"
bench_init
printf 'join_token = "sim-agents"\nheartbeat_timeout = "30s"\n' >"$tmp/master.toml"
bench_master --config "$tmp/master.toml"

YARD_JOIN_TOKEN=sim-agents "$bin/yard-synthetic-nodes" --master "$agents" --ca "$YARD_CA" --count "$n" --cpu 4 \
  --memory 16Gi --gpu 0 --heartbeat-ms 1000 --run-ms 3000 >"$tmp/nodes.out" 2>"$tmp/nodes.err" &
nodes=$!
pids+=("$nodes")
t0=$(date +%s)
until grep -q "registered $n nodes" "$tmp/nodes.out" 2>/dev/null; do
  kill -0 "$nodes" 2>/dev/null || { echo "sim_agents: the nodes failed: $(tail -3 "$tmp/nodes.err")" >&2; exit 1; }
  [ $(($(date +%s) - t0)) -lt $((120 + n / 20)) ] || { echo "sim_agents: registration timed out" >&2; exit 1; }
  sleep 0.2
done
echo "registered $n agents in $(($(date +%s) - t0)) s" >&2

# Submissions throughout the measured window.
(
  i=0
  while :; do
    i=$((i + 1))
    "$bin/yard-submit-storm" --master "$addr" --ca "$YARD_CA" --clients 4 --jobs 250 --rate "$rate" --prefix "sim$i-" >/dev/null 2>&1 || true
  done
) &
storm=$!
pids+=("$storm")

hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$master/stat"; }
c0=$(ticks)
s0=$(date +%s.%N)
sleep "$secs"
c1=$(ticks)
s1=$(date +%s.%N)
kill "$storm" 2>/dev/null || true
pkill -P "$storm" 2>/dev/null || true
rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$master/status")
kill -TERM "$nodes"
wait "$nodes" 2>/dev/null || true
stats=$(grep -o 'heartbeats=.*' "$tmp/nodes.err" | tail -1)
[ -n "$stats" ] || { echo "sim_agents: no statistics from the nodes: $(tail -3 "$tmp/nodes.err")" >&2; exit 1; }
echo "nodes: $stats" >&2
get() { printf '%s\n' "$stats" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
cpu=$(awk -v c="$((c1 - c0))" -v hz="$hz" -v a="$s0" -v b="$s1" 'BEGIN { printf "%.1f", 100 * c / hz / (b - a) }')
awk -v n="$n" -v h="$(get heartbeats)" -v s="$(get seconds)" -v p99="$(get p99_ms)" -v cpu="$cpu" -v rss="$rss" \
  -v pl="$(get placements)" 'BEGIN {
    printf "agents=%d heartbeats_per_s=%.0f p99_ms=%.1f master_cpu_pct=%s master_rss_mib=%d placements_per_s=%.1f\n",
      n, h / s, p99, cpu, rss, pl / s }'
