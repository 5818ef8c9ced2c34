#!/usr/bin/env bash
# The agent's container metrics for real (docs/operations.md, "Metrics"): an agent with the
# containerd driver on a private containerd pulls a busybox-static image built here from a
# registry on 127.0.0.1; its /metrics counts the pull (ok) and times it, counts a pull of a
# missing image as failed, counts the container's start under driver containerd, and a
# container past its memory limit as an OOM kill, all passing `promtool check metrics`.
bin=$1
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/images.sh"
trap 'stop_containerd; cleanup' EXIT
command -v promtool >/dev/null || { echo "promtool not found: run scripts/setup.sh (Debian's prometheus package)"; exit 1; }

value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }
check() {  # check FILE SERIES OP NUMBER
  local v
  v=$(value "$1" "$2")
  [ -n "$v" ] || { fail "no sample $2"; return; }
  /usr/bin/python3 -c "import sys; sys.exit(0 if float('$v') $3 $4 else 1)" || fail "$2 is $v, want $3 $4"
}

say "a local image in a registry on 127.0.0.1, a private containerd, an agent using both"
build_busybox_image "$tmp/oci" bb >"$tmp/image.log" 2>&1 || { fail "image build: $(cat "$tmp/image.log")"; exit 1; }
start_registry || exit 1
push_image "$tmp/oci" bb yard/busybox:1 || { fail "push"; exit 1; }
start_containerd || exit 1
image=$registry/yard/busybox:1
start_master
start_agent 1 --cpu 2 --memory 4Gi --containerd-socket "$containerd_sock" --insecure-registry "$registry" \
  --metrics-listen 127.0.0.1:0
wait_nodes 1
for _ in $(seq 50); do grep -q '^metrics ' "$tmp/agent1.out" && break; sleep 0.1; done
agent_metrics=$(sed -n 's/^metrics //p' "$tmp/agent1.out")

say "a container that runs, one past its memory limit, one whose image does not exist"
cat >"$tmp/jobs.yaml" <<YAML
name: m-run
tasks:
  - name: serve
    kind: container-job
    container:
      image: $image
      resources: { cpu: 250m, memory: 32Mi }
      command: [sleep, "60"]
YAML
cat >"$tmp/oom.yaml" <<YAML
name: m-oom
tasks:
  - name: hogs
    kind: container-job
    container:
      image: $image
      resources: { cpu: 250m, memory: 16Mi }
      command: [dd, if=/dev/zero, of=/dev/null, bs=64M, count=1]
YAML
cat >"$tmp/missing.yaml" <<YAML
name: m-missing
tasks:
  - name: pull
    kind: container-job
    container:
      image: $registry/yard/no-such-image:1
      resources: { cpu: 250m, memory: 32Mi }
      command: [true]
YAML
submit "$tmp/jobs.yaml"
wait_job m-run Running 60
submit "$tmp/oom.yaml"
wait_job m-oom Failed 30
submit "$tmp/missing.yaml"
wait_job m-missing Failed 60
curl -sf "http://$agent_metrics/metrics" -o "$tmp/agent.prom" || fail "GET /metrics failed"
out=$(promtool check metrics <"$tmp/agent.prom" 2>&1) || fail "promtool check metrics: $out"
[ -z "$out" ] || fail "promtool check metrics complains: $out"

say "pulls, starts, OOM kills and replicas by driver"
a=$tmp/agent.prom
# The second job finds the image present and pulls nothing, unless containerd no longer has
# the image's unpacked root (seen on this machine: its committed snapshot gone while the
# image stays registered); the agent then pulls again to unpack it and logs that it did.
again=$(grep -c 'has no unpacked root' "$tmp/agent1.err")
check "$a" 'yard_image_pulls_total{outcome="ok"}' == $((1 + again))
check "$a" 'yard_image_pulls_total{outcome="failed"}' == 1
check "$a" 'yard_image_pull_duration_seconds_count' == $((2 + again))
check "$a" 'yard_image_pull_duration_seconds_sum' '>' 0
check "$a" 'yard_replica_starts_total{driver="containerd"}' == 3
check "$a" 'yard_replica_start_duration_seconds_count{driver="containerd"}' '>=' 1  # m-run; m-oom may end first
check "$a" 'yard_replica_oom_kills_total{driver="containerd"}' == 1
check "$a" 'yard_replica_oom_killed_attempts{job="m-oom",task="hogs",role="run",index="0"}' == 1
check "$a" 'yard_replicas{driver="containerd",state="Running"}' == 1
check "$a" 'yard_replicas{driver="containerd",state="OOMKilled"}' == 1
check "$a" 'yard_replicas{driver="host",state="Running"}' == 0
check "$a" 'yard_replica_memory_limit_bytes{job="m-run",task="serve",role="run",index="0"}' == 33554432

"$bin/yardctl" job delete m-run >/dev/null 2>&1
finish metrics_containers
