#!/usr/bin/env bash
# GPU topology end to end (docs/topology.md), host processes on an agent with simulated GPUs
# from configs/topology/pcie-8gpu-2socket.txt (two sockets of four; pairs (0,1) (2,3) (4,5)
# (6,7) on PCIe switches): node show has the matrix, marked simulated; GPUs are chosen by
# their links, not by index (after GPU 0 is taken a 2-GPU replica gets the whole pair 2,3, not
# 1,2); CUDA_VISIBLE_DEVICES says so in the replica; job show names each replica's link class;
# on a second agent whose simulated GPUs sit on this host's two CPUs, a replica's cgroup
# cpuset and its process's allowed CPUs are exactly its GPUs' NUMA node's.
bin=$1
source "$(dirname "$0")/cluster.sh"
fixtures="$(cd "$(dirname "$0")/../../configs/topology" && pwd)"

say "a simulated GPU count beyond the matrix, or --gpus without a matrix, is refused"
out=$(YARD_JOIN_TOKEN=x timeout 10 "$bin/yard-agent" --master 127.0.0.1:1 --data-dir "$tmp/bad" \
  --gpu-topology-file "$fixtures/pcie-8gpu-2socket.txt" --gpus 9 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--gpus 9: the matrix has only 8 GPUs' || fail "--gpus 9: rc $rc: $out"
out=$(YARD_JOIN_TOKEN=x timeout 10 "$bin/yard-agent" --master 127.0.0.1:1 --data-dir "$tmp/bad" --gpus 2 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--gpus: 2 needs --gpu-topology-file' || fail "--gpus alone: rc $rc: $out"

start_master --metrics-listen 127.0.0.1:0  # its own port: the default one is e2e.metrics' to test
start_agent 1 --cpu 4 --memory 4Gi --gpu-topology-file "$fixtures/pcie-8gpu-2socket.txt"
wait_nodes 1

say "node show has the matrix, marked simulated"
"$bin/yardctl" node show node-1 >"$tmp/node.txt"
grep -q '^GPU topology (simulated):$' "$tmp/node.txt" || fail "node show: $(cat "$tmp/node.txt")"
grep -Eq '^GPU0 +X +PIX +NODE +NODE +SYS +SYS +SYS +SYS +0-15,32-47 +0$' "$tmp/node.txt" || fail "node show row GPU0: $(cat "$tmp/node.txt")"
[ "$("$bin/yardctl" node show node-1 -o json | python3 -c 'import json,sys; n=json.load(sys.stdin); t=n["topology"]; print(t["simulated"], n["capacity"]["gpu"], t["links"][2][3], t["links"][3][4], t["numa"][5], t["cpus"][5])')" = \
  "True 8 PIX SYS 1 16-31,48-63" ] || fail "node show -o json: $("$bin/yardctl" node show node-1 -o json)"

# job FILE NAME GPUS: a one-replica host job that notes its CUDA_VISIBLE_DEVICES and runs until told to stop.
job() {
  cat >"$1" <<YAML
name: $2
tasks:
  - name: main
    kind: container-job
    container:
      image: host
      command: [sh, -c, 'echo "\$CUDA_VISIBLE_DEVICES" > $tmp/gpus-$2; while [ ! -e $tmp/stop-$2 ]; do sleep 0.1; done']
      resources: { cpu: 100m, memory: 64Mi, gpu: $3 }
YAML
}
visible() { for _ in $(seq 100); do [ -s "$tmp/gpus-$1" ] && break; sleep 0.1; done; cat "$tmp/gpus-$1" 2>/dev/null; }
links() { jshow "$1" 'j["tasks"][0]["replicas"][0]["gpuLinks"]'; }

say "GPUs by their links: a pair stays whole, a socket stays together"
job "$tmp/one.yaml" topo-one 1
submit "$tmp/one.yaml"
wait_job topo-one Running 30
[ "$(visible topo-one)" = 0 ] || fail "topo-one sees GPUs $(visible topo-one), want 0"
job "$tmp/pair.yaml" topo-pair 2
submit "$tmp/pair.yaml"
wait_job topo-pair Running 30
[ "$(visible topo-pair)" = 2,3 ] || fail "topo-pair sees GPUs $(visible topo-pair), want 2,3 (the free PCIe-switch pair, not 1,2)"
[ "$(links topo-pair)" = PIX ] || fail "topo-pair gpuLinks: $(links topo-pair)"
"$bin/yardctl" job show topo-pair | grep -q ' 2,3 (PIX pairs) ' || fail "job show topo-pair: $("$bin/yardctl" job show topo-pair)"
job "$tmp/four.yaml" topo-four 4
submit "$tmp/four.yaml"
wait_job topo-four Running 30
[ "$(visible topo-four)" = 4,5,6,7 ] || fail "topo-four sees GPUs $(visible topo-four), want 4,5,6,7 (one socket)"
[ "$(links topo-four)" = NODE ] || fail "topo-four gpuLinks: $(links topo-four)"
job "$tmp/last.yaml" topo-last 1
submit "$tmp/last.yaml"
wait_job topo-last Running 30
[ "$(visible topo-last)" = 1 ] || fail "topo-last sees GPUs $(visible topo-last), want 1"
[ "$(links topo-last)" = "" ] || fail "topo-last (one GPU) gpuLinks: $(links topo-last)"

say "a replica's cpuset is its GPUs' NUMA node: exactly that node's CPUs, in its cgroup and for its process"
# tests/e2e/topology-2cpu.txt: GPUs 0,1 on CPU 0, GPUs 2,3 on CPU 1 (this host's two CPUs).
start_agent 2 --cpu 2 --memory 2Gi --label box=small --gpu-topology-file "$(dirname "$0")/topology-2cpu.txt"
wait_nodes 2
bound() {
  cat >"$1" <<YAML
name: $2
tasks:
  - name: main
    kind: container-job
    container:
      image: host
      nodeSelector: { box: small }
      command: [sh, -c, 'grep Cpus_allowed_list /proc/self/status > $tmp/cpus-$2; echo "\$CUDA_VISIBLE_DEVICES" > $tmp/gpus-$2; while [ ! -e $tmp/stop-$2 ]; do sleep 0.1; done']
      resources: { cpu: 100m, memory: 64Mi, gpu: 2 }
YAML
}
cpuset_root=""
for m in $(cgroup_mounts); do [ -e "$m/cpuset.cpus" ] && [ "$m" != /sys/fs/cgroup ] && cpuset_root=$m; done
for m in $(cgroup_mounts); do grep -qw cpuset "$m/cgroup.controllers" 2>/dev/null && cpuset_root=$m; done
for pair in "topo-near0 0,1 0" "topo-near1 2,3 1"; do
  set -- $pair
  bound "$tmp/$1.yaml" "$1"
  submit "$tmp/$1.yaml"
  wait_job "$1" Running 30
  [ "$(visible "$1")" = "$2" ] || fail "$1 sees GPUs $(visible "$1"), want $2"
  for _ in $(seq 50); do [ -s "$tmp/cpus-$1" ] && break; sleep 0.1; done
  grep -Eq "^Cpus_allowed_list:[[:space:]]+$3$" "$tmp/cpus-$1" || fail "$1 may run on $(cat "$tmp/cpus-$1" 2>&1), want CPU $3"
  # Its replica's group in the cpuset hierarchy (v1) or the unified one (v2) says the same.
  node=$(jshow "$1" 'j["tasks"][0]["replicas"][0]["node"]')
  [ "$node" = node-2 ] || fail "$1 ran on $node"
  found=""
  for f in "$cpuset_root"/yard/"$tag"-2/*/cpuset.cpus; do
    [ -e "$f" ] || continue
    [ -n "$(cat "$(dirname "$f")/cgroup.procs")" ] || continue
    grep -qx "$3" "$f" && found=$f
  done
  [ -n "$found" ] || fail "no replica cgroup of node-2 with cpuset.cpus $3: $(for f in "$cpuset_root"/yard/"$tag"-2/*/cpuset.cpus; do echo "$f: $(cat "$f")"; done)"
done
for j in topo-near0 topo-near1; do touch "$tmp/stop-$j"; done
for j in topo-near0 topo-near1; do wait_job "$j" Succeeded 30; done

say "after a master restart the agent registers its topology again"
kill "$master"; wait "$master" 2>/dev/null
start_master --metrics-listen 127.0.0.1:0
for _ in $(seq 100); do "$bin/yardctl" node show node-1 2>/dev/null | grep -q '^GPU topology (simulated):$' && break; sleep 0.1; done
"$bin/yardctl" node show node-1 | grep -q '^GPU topology (simulated):$' || fail "node show after restart: $("$bin/yardctl" node show node-1)"

for j in topo-one topo-pair topo-four topo-last; do touch "$tmp/stop-$j"; done
for j in topo-one topo-pair topo-four topo-last; do wait_job "$j" Succeeded 30; done
for j in topo-one topo-pair topo-four topo-last topo-near0 topo-near1; do "$bin/yardctl" job delete $j >/dev/null; done
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent[12]/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.topology
