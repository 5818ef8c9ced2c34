#!/usr/bin/env bash
# Container start latency (issue 6): a master and one agent with the containerd driver on a
# private containerd, the image cached (pulled once before measuring).
#  - submit-to-running of a one-replica container job: from the job's Submitted event to its
#    replica's Running event, both stamped by the master (p50, p99 over N jobs, one after
#    another, each deleted before the next);
#  - baseline, same invocation and image: `ctr run -d` of the image (returns once the task
#    has started), timed around the command; ratio = Yard / ctr.
#   tests/bench/container_bench.sh [BUILD_BIN] [N]   (default build/bin, 30)
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-30}
e2e=$(cd "$(dirname "$0")/../e2e" && pwd)
source "$e2e/cluster.sh"
source "$e2e/images.sh"
trap 'stop_containerd; cleanup' EXIT
build_busybox_image "$tmp/oci" bb >"$tmp/image.log" 2>&1 || { echo "image build failed"; exit 1; }
start_registry || exit 1
push_image "$tmp/oci" bb yard/busybox:1 || exit 1
start_containerd || exit 1
image=$registry/yard/busybox:1
start_master
start_agent 1 --containerd-socket "$containerd_sock" --insecure-registry "$registry"
wait_nodes 1

job() {
  cat >"$tmp/job.yaml" <<YAML
name: bench-$1
tasks:
  - name: serve
    kind: container-job
    container: { image: $image, resources: { cpu: 100m, memory: 32Mi }, command: [sleep, "60"] }
YAML
}
latency() {  # latency NAME: ms from Submitted to the replica's Running
  "$bin/yardctl" job events "$1" -o json | python3 -c '
import json, sys
ev = json.load(sys.stdin)
sub = next(e["at"] for e in ev if e["type"] == "Submitted")
run = next(e["at"] for e in ev if e["type"] == "Running" and e["replica"])
print(run - sub)'
}
run_job() {  # run_job NAME: submit, wait for Running, print the latency, delete
  job "$1"
  "$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null
  for _ in $(seq 500); do
    "$bin/yardctl" job show "bench-$1" | grep -q 'serve/run/0 .* Running ' && break
    sleep 0.01
  done
  latency "bench-$1"
  "$bin/yardctl" job delete "bench-$1" >/dev/null
  for _ in $(seq 500); do [ -z "$(ctr --address "$containerd_sock" -n yard containers ls -q)" ] && break; sleep 0.01; done
}
pull_ms=$(run_job warm)  # the first start pulls the image
lat=()
for i in $(seq "$n"); do sleep 0.3; lat+=("$(run_job "$i")"); done

base=()
for i in $(seq "$n"); do
  sleep 0.3
  t0=$(date +%s%N)
  ctr --address "$containerd_sock" -n yard run -d --net-host "$image" "ctr-$i" sleep 60 >/dev/null
  t1=$(date +%s%N)
  base+=("$(( (t1 - t0) / 1000000 ))")
  ctr --address "$containerd_sock" -n yard tasks kill -s SIGKILL "ctr-$i" >/dev/null 2>&1
  for _ in $(seq 100); do ctr --address "$containerd_sock" -n yard tasks delete "ctr-$i" >/dev/null 2>&1 && break; sleep 0.02; done
  ctr --address "$containerd_sock" -n yard containers delete "ctr-$i" >/dev/null 2>&1
done

python3 - "$n" "$pull_ms" "${lat[*]}" "${base[*]}" <<'PY'
import statistics, sys
n, pull = int(sys.argv[1]), int(sys.argv[2])
lat = sorted(int(x) for x in sys.argv[3].split())
base = sorted(int(x) for x in sys.argv[4].split())
def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
b50 = statistics.median(base)
print(f"first start (pull + unpack + start): {pull} ms")
print(f"submit-to-running, one-replica container job, image cached, n={n}: p50 {statistics.median(lat):.0f} ms, p99 {pct(lat, 99)} ms")
print(f"baseline ctr run -d of the same image:                           p50 {b50:.0f} ms, p99 {pct(base, 99)} ms")
print(f"ratio (p50 Yard / ctr run): {statistics.median(lat) / b50:.2f}")
PY
