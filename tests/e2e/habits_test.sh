#!/usr/bin/env bash
# What Slurm and Kubeflow users reach for (issue 31), end to end on two real agents:
#  - node labels (agent --label), `node list/show` and -o json showing them, a container's
#    nodeSelector placing only there, "why pending" naming a selector nothing matches, and
#    `yardctl node label NODE k=v / k-` changing them at run time, kept across an agent
#    restart;
#  - job hold / release / requeue and `--hold` at submit;
#  - jobs that run after other jobs (`after:` / `--after`), Skipped when they no longer can.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 2Gi --label rack=r1 --label disk=nvme
start_agent 2 --cpu 2 --memory 2Gi --label rack=r2
wait_nodes 2

# selector FILE NAME SELECTOR [SECONDS]: a one-replica host job with that nodeSelector (YAML
# flow mapping), printing its node's name.
selector() {
  cat >"$1" <<YAML
name: $2
tasks:
  - name: main
    kind: container-job
    container:
      image: host
      command: [sh, -c, 'echo on \$YARD_NODE; sleep ${4:-0}']
      resources: { cpu: 100m, memory: 64Mi }
      nodeSelector: $3
YAML
}

say "node labels"
expect_out() {  # expect_out REGEX CMD...: the command succeeds and prints a line matching REGEX
  local re=$1; shift
  local out
  out=$("$@" 2>&1) || { fail "$* failed: $out"; return; }
  echo "$out" | grep -Eq "$re" || fail "$*: no line matches /$re/ in: $out"
}
expect_out '^node-1 .* disk=nvme,rack=r1$' "$bin/yardctl" node list
expect_out '^node-2 .* rack=r2$' "$bin/yardctl" node show node-2
labels=$("$bin/yardctl" node show node-1 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["labels"])')
[ "$labels" = "{'disk': 'nvme', 'rack': 'r1'}" ] || fail "node-1 -o json labels: $labels"

say "nodeSelector"
selector "$tmp/r2.yaml" on-rack-two '{ rack: r2 }'
selector "$tmp/nvme.yaml" on-nvme-disk '{ disk: nvme, rack: r1 }'
submit "$tmp/r2.yaml"
submit "$tmp/nvme.yaml"
wait_job on-rack-two Succeeded
wait_job on-nvme-disk Succeeded
[ "$(jshow on-rack-two 'j["tasks"][0]["replicas"][0]["node"]')" = node-2 ] || fail "on-rack-two ran elsewhere"
[ "$(jshow on-nvme-disk 'j["tasks"][0]["replicas"][0]["node"]')" = node-1 ] || fail "on-nvme-disk ran elsewhere"

selector "$tmp/r3.yaml" on-rack-three '{ rack: r3 }'
submit "$tmp/r3.yaml"
eventually_reason() {  # eventually_reason JOB REGEX: its task's reason comes to match
  for _ in $(seq 50); do
    jshow "$1" 'j["tasks"][0]["reason"]' 2>/dev/null | grep -Eq "$2" && return 0
    sleep 0.1
  done
  fail "job $1: reason $(jshow "$1" 'j["tasks"][0]["reason"]') does not match /$2/"
}
eventually_reason on-rack-three '^no ready node matches nodeSelector rack=r3$'
"$bin/yardctl" job show on-rack-three | grep -q 'no ready node matches nodeSelector rack=r3' ||
  fail "job show does not say why: $("$bin/yardctl" job show on-rack-three)"

say "node label at run time"
out=$("$bin/yardctl" node label node-2 'bad key=x' 2>&1)
[ $? -eq 2 ] || fail "a bad label is not a usage error"
echo "$out" | grep -q 'key "bad key" must be NAME or PREFIX/NAME' || fail "bad label message: $out"
expect_out 'rack=r3$' "$bin/yardctl" node label node-2 rack=r3
wait_job on-rack-three Succeeded
[ "$(jshow on-rack-three 'j["tasks"][0]["replicas"][0]["node"]')" = node-2 ] || fail "on-rack-three ran elsewhere"
expect_out '^node-1 .* gpu=,rack=r1$' "$bin/yardctl" node label node-1 disk- gpu=
expect_out '^node-1 .* gpu=,rack=r1$' "$bin/yardctl" node show node-1

# The admin's changes outlast the agent's restart with its own --label flags.
kill "${agent_pid[2]}"
wait "${agent_pid[2]}" 2>/dev/null
start_agent 2 --cpu 2 --memory 2Gi --label rack=r2
for _ in $(seq 100); do [ "$(grep -c 'node node-2 registered' "$tmp/master.err")" -ge 2 ] && break; sleep 0.1; done
grep -q 'node node-2 registered again' "$tmp/master.err" || fail "node-2 did not register again"
expect_out '^node-2 .* rack=r3$' "$bin/yardctl" node show node-2

finish "habits"
