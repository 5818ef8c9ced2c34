#!/usr/bin/env bash
# yardctl's view of elastic scaling against a real master with its dev agent (host replicas):
# `job scale` refusals (non-elastic task, out of range, missing flags), a manual scale-out
# and scale-in of a running elastic PyTorch task, the `elastic` object and line of
# `job show`, and utilisation against the request in `job top`.
# The autoscaler is kept from deciding on its own (warmup of an hour): the workers only
# sleep, and an autonomous scale-in mid-test would make the counts checked here race.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"

# Replicas outlive the master by design (their shims keep them); the test stops them: the
# job's deletion first (the agent stops them and removes their groups), then by pid.
cgroup_parent=""
stop_replicas() {
  "$bin/yardctl" job delete el-sleep >/dev/null 2>&1
  for _ in $(seq 50); do
    live=0
    for f in "$tmp"/data/agent/replicas/*/pid; do [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && live=1; done
    [ "$live" -eq 0 ] && break
    sleep 0.2
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for f in "$tmp"/data/agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for f in "$tmp"/data/agent/replicas/*/shim.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  if [ -n "$cgroup_parent" ]; then
    for d in /sys/fs/cgroup/*/"$cgroup_parent" /sys/fs/cgroup/"$cgroup_parent"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  fi
  [ "$fails" -gt 0 ] && tail -20 "$tmp/err"
  cleanup
}
trap stop_replicas EXIT

# json EXPR: evaluates a Python expression over `job show el-sleep -o json` (as `j`).
json() {
  "$bin/yardctl" job show el-sleep -o json 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print($1)" 2>/dev/null
}
# json_eventually EXPR WANT: the expression's value becomes WANT within 20 s.
json_eventually() {
  local got=""
  for _ in $(seq 100); do got=$(json "$1"); [ "$got" = "$2" ] && return 0; sleep 0.2; done
  fail "job show -o json: $1 is '$got', want '$2': $("$bin/yardctl" job show el-sleep 2>&1)"
}

printf '[autoscaler]\ninterval = "2s"\nwarmup = "3600s"\ncooldown = "5s"\n' >"$tmp/master.toml"
start_master --dev --config "$tmp/master.toml"
dev_agent=$(sed -n 's/.*dev cluster: agent pid \([0-9]*\).*/\1/p' "$tmp/err")
cgroup_parent=$(tr '\0' '\n' <"/proc/$dev_agent/cmdline" 2>/dev/null | sed -n '/^--cgroup-parent$/{n;p}')
eventually ' ready ' -- node list

cat >"$tmp/el.yaml" <<'YAML'
name: el-sleep
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { backend: c10d, metric: cpu, target: 80, minReplicas: 1, maxReplicas: 2 }
    roles:
      worker:
        container: { image: host, command: sleep 600, resources: { cpu: 100m, memory: 64Mi } }
  - name: side
    kind: container-job
    container: { image: host, command: sleep 600, resources: { cpu: 100m, memory: 64Mi } }
YAML
expect 0 'submitted' -- job submit "$tmp/el.yaml"
json_eventually 'j["tasks"][0]["state"]' Running

# Refusals: exit 1 with the flag, the rule and the value; a missing flag is a usage error.
expect 1 '^yardctl: --task: task side is not elastic' -- job scale el-sleep --task side --replicas 2
expect 1 '^yardctl: --replicas: 3 is outside .*\[1, 2\]' -- job scale el-sleep --task train --replicas 3
expect 1 '^yardctl: --replicas: 0 is outside .*\[1, 2\]' -- job scale el-sleep --task train --replicas 0
expect 1 'job nope does not exist' -- job scale nope --task train --replicas 2
expect 2 '--replicas is required' -- job scale el-sleep --task train
expect 2 '--task is required' -- job scale el-sleep --replicas 2
expect 2 'replicas' -- job scale el-sleep --task train --replicas two

# Before any change: one worker, nothing decided.
[ "$(json 'j["tasks"][0]["elastic"]["current"], j["tasks"][0]["elastic"]["min"], j["tasks"][0]["elastic"]["max"], j["tasks"][0]["elastic"]["target"]')" = "1 1 2 80" ] ||
  fail "elastic before scaling: $(json 'j["tasks"][0]["elastic"]')"
[ "$(json 'j["tasks"][1]["elastic"]')" = None ] || fail "a non-elastic task has elastic: $(json 'j["tasks"][1]')"
expect 0 '^Elastic train: 1 worker \(desired 1, min 1, max 2\), cpu .*target 80%' -- job show el-sleep

# Scale out by hand: desired at once, current once the new worker is placed and runs.
expect 0 '^task train of job el-sleep scaled 1 -> 2$' -- job scale el-sleep --task train --replicas 2
[ "$(json 'j["tasks"][0]["elastic"]["desired"]')" = 2 ] || fail "desired after scale: $(json 'j["tasks"][0]["elastic"]')"
json_eventually 'j["tasks"][0]["elastic"]["current"]' 2
json_eventually 'sorted(r["state"] for r in j["tasks"][0]["replicas"])' "['Running', 'Running']"
# The scale-out counts as done at the master's next look at it, a moment after the worker runs.
json_eventually 'j["tasks"][0]["elastic"]["pending"]' False
[ "$(json 'j["tasks"][0]["elastic"]["lastDecision"]')" = "1 -> 2: set by yardctl job scale" ] ||
  fail "lastDecision: $(json 'j["tasks"][0]["elastic"]')"
[ "$(json 'type(j["tasks"][0]["elastic"]["lastDecisionAt"]).__name__, j["tasks"][0]["elastic"]["lastDecisionAt"] >= j["job"]["startedAt"] > 0')" = "int True" ] ||
  fail "lastDecisionAt: $(json 'j["tasks"][0]["elastic"]')"
[ "$(json 'sorted(j["tasks"][0]["elastic"])')" = "['current', 'desired', 'lastDecision', 'lastDecisionAt', 'max', 'min', 'nextDecisionAt', 'pending', 'target', 'utilisation']" ] ||
  fail "elastic keys: $(json 'j["tasks"][0]["elastic"]')"
expect 0 '^Elastic train: 2 workers \(desired 2, min 1, max 2\), cpu .*target 80%\)?, last: 1 -> 2: set by yardctl job scale \([0-9]+s ago\)' -- job show el-sleep
expect 0 'task train of job el-sleep already has 2 workers' -- job scale el-sleep --task train --replicas 2

# job top: CPU used against the request, per replica, once the agent sampled it.
got=""
for _ in $(seq 100); do
  got=$("$bin/yardctl" job top el-sleep -o json 2>/dev/null | python3 -c '
import json,sys
u=[r for r in json.load(sys.stdin) if r["task"]=="train" and r["sampledAt"]]
ok=u and all(isinstance(r["cpuPercentOfRequest"],(int,float)) and 0 <= r["cpuPercentOfRequest"] < 50 for r in u)
print("ok" if ok else "")' 2>/dev/null)
  [ "$got" = ok ] && break
  sleep 0.2
done
[ "$got" = ok ] || fail "job top -o json: no cpuPercentOfRequest for train: $("$bin/yardctl" job top el-sleep -o json 2>&1)"
expect 0 '^REPLICA +ATTEMPT +NODE +STATE +CPU USED +CPU REQ +CPU%REQ' -- job top el-sleep
expect 0 '^train/worker/1 +0 +dev +Running +[0-9m.]+ +100m +[0-9]+%' -- job top el-sleep

# Scale in by hand (-o json, as any mutation): worker 1 goes, worker 0 stays.
expect 0 '"result": "task train of job el-sleep scaled 2 -> 1"' -- job scale el-sleep --task train --replicas 1 -o json
json_eventually 'j["tasks"][0]["elastic"]["current"], j["tasks"][0]["elastic"]["desired"]' "1 1"
json_eventually '[r["state"] for r in j["tasks"][0]["replicas"] if r["index"] == 0]' "['Running']"

# The events say what happened: requested, then done once the new worker ran (issue: a
# scale-out that never ran still logged ScaledOut).
events=$("$bin/yardctl" job events el-sleep -o json | python3 -c '
import json,sys
print(" | ".join(e["type"] + " " + e["reason"] for e in json.load(sys.stdin) if e["type"].startswith("Scale")))')
[ "$events" = "ScaleOutRequested 1 -> 2: set by yardctl job scale | ScaledOut 1 -> 2: set by yardctl job scale | ScaledIn 2 -> 1: set by yardctl job scale" ] ||
  fail "scale events: $events"

# A finished elastic task says what it ended with and its last change, not "0 workers ... none yet".
expect 0 'cancel' -- job cancel el-sleep
json_eventually 'j["tasks"][0]["state"]' Cancelled
expect 0 '^Elastic train: ended with 1 worker \(min 1, max 2\), last: 2 -> 1: set by yardctl job scale \([0-9]+s ago\)$' -- job show el-sleep
[ "$(json 'j["tasks"][0]["elastic"]["current"], j["tasks"][0]["elastic"]["pending"]')" = "1 False" ] ||
  fail "elastic of a finished task: $(json 'j["tasks"][0]["elastic"]')"

finish "elastic_cli"
