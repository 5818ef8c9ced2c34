#!/usr/bin/env bash
# Agent benchmarks on the dev cluster (`yard-master --dev`, one agent, host driver):
#  - submit-to-running latency of a one-replica host job: from the job's Submitted event to
#    its replica's Running event, both stamped by the master (p50, p99 over N jobs, run
#    one after another); baseline: starting the same process with `yard-shim run` directly
#    on the same machine, in the same invocation (ratio = Yard / direct);
#  - the agent's resident memory idle, and again after the N jobs (growth = leak check).
#   tests/bench/agent_bench.sh [BUILD_BIN] [N]   (default build/bin, 50)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-50}
tmp=$(mktemp -d)
source "$(dirname "$0")/../../scripts/lib/dev_cluster.sh"
trap 'stop_dev_cluster; rm -rf "$tmp"' EXIT
start_dev_cluster "$bin" "$tmp/dev"
agent=$dev_agent
rss() { awk '/VmRSS/ {print $2}' "/proc/$agent/status"; }
sleep 2
rss_idle=$(rss)

job() {
  cat >"$tmp/job.yaml" <<YAML
name: bench-$1
tasks:
  - name: serve
    kind: pytorch
    roles:
      master: { replicas: 1, container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep 60 } }
    advanced: { cleanup: all }
YAML
}
measure() {  # measure PREFIX PAUSE: N jobs, PAUSE seconds between one's delete and the next submit
  lat=()
  for i in $(seq "$n"); do
  sleep "$2"
  job "$1$i"
  i="$1$i"
  t0=$(date +%s%3N)  # before yardctl starts: its process, handshake and request count too
  "$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null
  for _ in $(seq 200); do
    "$bin/yardctl" job show "bench-$i" | grep -q 'serve/master/0 .* Running ' && break
    sleep 0.01
  done
  lat+=("$("$bin/yardctl" job events "bench-$i" -o json | python3 -c '
import json, sys
ev = json.load(sys.stdin)
sub = next(e["at"] for e in ev if e["type"] == "Submitted")
placed = next(e["at"] for e in ev if e["type"] == "Placed")
starting = next((e["at"] for e in ev if e["type"] == "Starting" and e["replica"]), placed)
run = next(e["at"] for e in ev if e["type"] == "Running" and e["replica"])
print("%d:%d:%d:%d:%d" % (run - sub, placed - sub, starting - placed, run - starting, run - int(sys.argv[1])))' "$t0")")
  "$bin/yardctl" job delete "bench-$i" >/dev/null
  done
  echo "${lat[*]}"
}
# Spaced: each job meets an idle master (the common case). Back to back: the next submit
# lands within the scheduler's 100 ms pass throttle (kMinPassInterval) of the last delete.
spaced=$(measure s 0.3)
packed=$(measure p 0)
sleep 3
rss_after=$(rss)

# Baseline: the same process started by yard-shim directly (spawn to pid file written).
base=()
for i in $(seq "$n"); do
  d="$tmp/direct$i"
  mkdir -p "$d"
  t0=$(date +%s%N)
  "$bin/yard-shim" run --dir "$d" -- /bin/sleep 60
  t1=$(date +%s%N)
  base+=("$(( (t1 - t0) / 1000000 ))")
  kill -9 -- "-$(cat "$d/pid")" 2>/dev/null || true
done

python3 - "$n" "$rss_idle" "$rss_after" "$spaced" "$packed" "${base[*]}" <<'PY'
import statistics, sys
n, idle, after = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def stages(arg):  # "total:placed:starting:running:from_yardctl" per job
    return [tuple(int(v) for v in x.split(":")) for x in arg.split()]
spaced_stages, packed_stages = stages(sys.argv[4]), stages(sys.argv[5])
spaced = sorted(s[0] for s in spaced_stages)
packed = sorted(s[0] for s in packed_stages)
base = sorted(int(x) for x in sys.argv[6].split())
def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
b50 = statistics.median(base)
for name, lat, st in (("spaced", spaced, spaced_stages), ("back to back", packed, packed_stages)):
    p50 = statistics.median(lat)
    print(f"submit-to-running, one-replica host job, {n} jobs {name}: p50 {p50:.0f} ms, p99 {pct(lat, 99)} ms,"
          f" max {lat[-1]} ms; ratio p50 to direct {p50 / max(b50, 1):.1f}")
    # Where the time goes, from the master's event stamps: Submitted -> Placed (the pass and
    # its commit), Placed -> the replica's Starting (the wake, the agent's heartbeat and
    # the commit of its report), Starting -> Running (yard-shim starting the process).
    med = [statistics.median(s[k] for s in st) for k in (1, 2, 3)]
    print(f"  medians: submit->Placed {med[0]:.0f} ms, Placed->Starting {med[1]:.0f} ms, Starting->Running {med[2]:.0f} ms")
    # From the moment `yardctl job submit` was started (its process, TLS and request included).
    ctl = sorted(s[4] for s in st)
    print(f"  through yardctl (from its start to Running): p50 {statistics.median(ctl):.0f} ms, p99 {pct(ctl, 99)} ms")
print(f"baseline yard-shim run directly, {n} starts: p50 {b50:.0f} ms, p99 {pct(base, 99)} ms")
print(f"agent RSS idle: {idle} KiB; after {n} jobs: {after} KiB (growth {after - idle} KiB)")
PY
