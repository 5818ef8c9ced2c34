#!/usr/bin/env bash
# Gang start on the dev cluster (`yard-master --dev`, one agent, host driver): time from a
# gang's Placed event to the Running event of its last replica, for 2, 8 and 32 replicas
# (a PyTorch master + workers running `sleep`), median of R rounds each; ratio per replica
# against the 2-replica gang, same invocation.
#   tests/bench/gang_bench.sh [BUILD_BIN] [ROUNDS]   (default build/bin, 5)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
rounds=${2:-5}
tmp=$(mktemp -d)
source "$(dirname "$0")/../../scripts/lib/dev_cluster.sh"
trap 'stop_dev_cluster; rm -rf "$tmp"' EXIT
start_dev_cluster "$bin" "$tmp/dev"

results=""
for n in 2 8 32; do
  times=()
  for r in $(seq "$rounds"); do
    name="gang-$n-$r"
    cat >"$tmp/job.yaml" <<YAML
name: $name
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, resources: { cpu: 50m, memory: 16Mi }, command: sleep 60 } }
      worker: { replicas: $((n - 1)), container: *c }
    advanced: { cleanup: all }
YAML
    "$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null
    for _ in $(seq 600); do
      [ "$("$bin/yardctl" job show "$name" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"][0]["state"])')" = Running ] && break
      sleep 0.05
    done
    times+=("$("$bin/yardctl" job events "$name" -o json | python3 -c '
import json, sys
ev = json.load(sys.stdin)
placed = next(e["at"] for e in ev if e["type"] == "Placed")
running = [e["at"] for e in ev if e["type"] == "Running" and e["replica"]]
assert len(running) == '"$n"', len(running)
print(max(running) - placed)')")
    "$bin/yardctl" job delete "$name" >/dev/null
    sleep 1
  done
  results+="$n ${times[*]};"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [r.split() for r in sys.argv[1].split(";") if r]
base = None
for row in rows:
    n, times = int(row[0]), [int(x) for x in row[1:]]
    med = statistics.median(times)
    per = med / n
    base = base or per
    print(f"gang of {n:2d}: placed to all running, median {med:.0f} ms (runs: {' '.join(map(str, times))});"
          f" {per:.1f} ms per replica, {per / base:.2f}x the 2-replica gang's")
PY
