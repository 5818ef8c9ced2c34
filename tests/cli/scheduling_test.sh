#!/usr/bin/env bash
# Nodes and gang scheduling end to end: synthetic nodes register and heartbeat through the
# real agent API; jobs are placed all-or-nothing with GPUs and ports; queued tasks carry
# the scheduler's reasons; drain, heartbeat timeout and cancel behave as documented.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
job() {  # job FILE NAME QUEUE REPLICAS GPU
  cat >"$1" <<YAML
name: $2
queue: $3
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, command: "python3 t.py", resources: { cpu: 1, memory: 1Gi, gpu: $5 }, ports: [ { name: metrics, port: 9100 } ] } }
      worker: { replicas: $(($4 - 1)), container: *c }
YAML
}

printf 'heartbeat_timeout = "2s"\njoin_token = "s3cret"\n' >"$tmp/master.toml"
start_master --config "$tmp/master.toml"

# A wrong token is refused and registers nothing.
YARD_JOIN_TOKEN=wrong "$bin/yard-synthetic-nodes" --master "$agents" --ca "$YARD_CA" --count 1 --once >"$tmp/bad.out" 2>&1 && fail "wrong token accepted"
grep -qE "join as node node-1: join token (refused|unknown)" "$tmp/bad.out" || fail "wrong token message: $(cat "$tmp/bad.out")"
expect 0 '^NAME' -- node list
[ "$("$bin/yardctl" node list | wc -l)" -eq 1 ] || fail "a node registered with a wrong token"

YARD_JOIN_TOKEN=s3cret "$bin/yard-synthetic-nodes" --master "$agents" --ca "$YARD_CA" --count 2 --cpu 16 --memory 64Gi --gpu 8 --heartbeat-ms 300 >"$tmp/nodes.out" 2>&1 &
nodes=$!
pids+=($nodes)
for _ in $(seq 50); do grep -q 'registered 2 nodes' "$tmp/nodes.out" && break; sleep 0.1; done
expect 0 '^node-1 +127\.0\.0\.1 +ready +0/16 +0/64Gi +0/8' -- node list
expect 0 '^node-2 +127\.0\.0\.2 +ready' -- node list

"$bin/yardctl" queue create team-a --cpu 64 --memory 256Gi --gpu 8 >/dev/null
# A replica larger than any node waits, saying so, and does not block the queue.
job "$tmp/huge.yaml" huge-gpus team-a 1 16
"$bin/yardctl" queue update team-a --gpu 32 >/dev/null
expect 0 submitted -- job submit "$tmp/huge.yaml"
eventually 'no node has 16 GPUs \(largest: 8\)' -- job show huge-gpus
# A 2-replica gang of 4 GPUs each: binpacked on one node, GPUs 0-3 and 4-7, distinct ports;
# the declared port 9100 cannot be shared, so the gang spreads over both nodes instead.
job "$tmp/pair.yaml" pair-train team-a 2 4
expect 0 submitted -- job submit "$tmp/pair.yaml"
eventually 'train/master/0 +0 +Placed +node-' -- job show pair-train
"$bin/yardctl" -o json job show pair-train >"$tmp/pair.json"
python3 - "$tmp/pair.json" <<'PY' || fail "pair placement wrong: $(cat "$tmp/pair.json")"
import json, sys
j = json.load(open(sys.argv[1]))
reps = j["tasks"][0]["replicas"]
assert len(reps) == 2 and all(r["state"] == "Placed" for r in reps), reps
assert len({r["node"] for r in reps}) == 2, "declared port 9100 must not collide on one node"
assert all(len(r["gpus"].split(",")) == 4 for r in reps), reps
assert all(20000 <= r["port"] <= 29999 for r in reps), reps
assert j["job"]["state"] == "Running", j["job"]
PY
expect 0 'node-1 .* 0/8 +|node-1 .* 4/8 ' -- node list

# Quota: team-a now allows 8 GPUs, all in use; the next gang waits with the quota reason.
"$bin/yardctl" queue update team-a --gpu 8 >/dev/null
job "$tmp/more.yaml" more-train team-a 1 4
job "$tmp/huge2.yaml" huge-again team-a 1 16
expect 1 'queue team-a quota is too small for task train: needs gpu=16, quota gpu=8' -- job submit "$tmp/huge2.yaml"
expect 0 submitted -- job submit "$tmp/more.yaml"
# In a cohort a gang may be larger than the queue's own quota, up to what the others could lend.
"$bin/yardctl" queue create coh-a --cpu 8 --memory 16Gi --gpu 2 --cohort pool >/dev/null
"$bin/yardctl" queue create coh-b --cpu 8 --memory 16Gi --gpu 2 --cohort pool --lend-limit gpu=1 >/dev/null
job "$tmp/coh3.yaml" coh-three coh-a 1 3
job "$tmp/coh4.yaml" coh-four coh-a 1 4
expect 1 'queue coh-a quota is too small for task train: needs gpu=4, more than it can ever have: quota \+ borrowable in cohort pool gpu=2 \+ 1$' -- job submit "$tmp/coh4.yaml"
expect 0 submitted -- job submit "$tmp/coh3.yaml"
"$bin/yardctl" job cancel coh-three >/dev/null
eventually 'queue team-a quota: gpu 8/8 in use, needs 4' -- job show more-train
# A stopped queue dispatches nothing and says so.
"$bin/yardctl" queue create team-b --cpu 8 --memory 128Gi --gpu 0 >/dev/null
cat >"$tmp/b.yaml" <<'YAML'
name: b-train
queue: team-b
tasks:
  - { name: whole-node, kind: container-job, container: { image: host, command: ls, resources: { cpu: 1, memory: 64Gi } } }
YAML
expect 0 submitted -- job submit "$tmp/b.yaml"
eventually 'waiting for resources' -- job show b-train
expect 0 'team-b +stopped' -- queue state team-b stopped
eventually 'whole-node +container-job +Queued .*queue team-b stopped' -- job show b-train

# Cancel frees the GPUs once the nodes no longer hold its replicas (their next heartbeat);
# --wait returns then. The waiting gang is placed.
expect 0 'job pair-train Cancelled: every replica has stopped' -- job cancel --wait --timeout 20 pair-train
expect 1 'job pair-train already finished \(Cancelled\)' -- job cancel pair-train
eventually 'train/master/0 +0 +Placed' -- job show more-train
expect 0 'Killed +cancelled by user' -- job events pair-train

# Drain: the node keeps its replicas but takes nothing new.
expect 0 'node-1 .* draining' -- node drain node-1
expect 0 'node-1 .* ready' -- node undrain node-1
expect 1 'node nope does not exist' -- node drain nope
# Heartbeats stop: both nodes go down after the 2 s timeout (each from its own last beat:
# the nodes beat at different moments of the interval, so one may go down a beat later).
kill "$nodes"
eventually '^node-1 +127\.0\.0\.1 +down' -- node list
eventually '"state": "down"' -- node show node-2 -o json

finish "scheduling"
