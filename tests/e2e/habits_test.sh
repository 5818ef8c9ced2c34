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

# quick FILE NAME SECONDS [EXIT] [COMPLETIONS]: a host container job that sleeps, then exits.
quick() {
  cat >"$1" <<YAML
name: $2
tasks:
  - name: main
    kind: container-job
    completions: ${5:-1}
    parallelism: ${5:-1}
    container:
      image: host
      command: [sh, -c, 'sleep $3; exit ${4:-0}']
      resources: { cpu: 100m, memory: 64Mi }
YAML
}
state_of() { jshow "$1" 'j["job"]["state"]' 2>/dev/null; }

say "hold and release"
quick "$tmp/held.yaml" held-job 0
out=$("$bin/yardctl" job submit --hold "$tmp/held.yaml" 2>&1) || fail "submit --hold: $out"
sleep 1.5
[ "$(state_of held-job)" = Queued ] || fail "a held job left the queue: $(state_of held-job)"
expect_out '^held-job +default +Held ' "$bin/yardctl" job list
[ "$(jshow held-job 'j["job"]["heldBy"]')" = admin ] || fail "heldBy: $(jshow held-job 'j["job"]')"
[ "$(jshow held-job 'j["tasks"][0]["reason"]')" = "held by admin (yardctl job release held-job)" ] ||
  fail "held reason: $(jshow held-job 'j["tasks"][0]["reason"]')"
expect_out 'already held by admin' "$bin/yardctl" job hold held-job
expect_out 'job held-job released' "$bin/yardctl" job release held-job
wait_job held-job Succeeded
out=$("$bin/yardctl" job hold held-job 2>&1) && fail "a finished job was held: $out"
echo "$out" | grep -q 'only a queued job that has not started can be held' || fail "hold of a finished job said: $out"
# job hold through the HTTP API's route on a queued job, then release on the command line.
quick "$tmp/held2.yaml" held-later 0
"$bin/yardctl" queue create slow --cpu 100m --memory 64Mi >/dev/null || fail "queue create slow"
sed -i 's/^name: held-later/name: held-later\nqueue: slow/' "$tmp/held2.yaml"
quick "$tmp/blocker.yaml" slow-blocker 30
sed -i 's/^name: slow-blocker/name: slow-blocker\nqueue: slow/' "$tmp/blocker.yaml"
submit "$tmp/blocker.yaml"
wait_job slow-blocker Running
submit "$tmp/held2.yaml"
expect_out 'job held-later held' "$bin/yardctl" job hold held-later
"$bin/yardctl" job events held-later | grep -q ' Held ' || fail "no Held event: $("$bin/yardctl" job events held-later)"

say "requeue"
quick "$tmp/again.yaml" run-twice 0 0 2
submit "$tmp/again.yaml"
wait_job run-twice Succeeded
expect_out 'job run-twice requeued \(was Succeeded\)' "$bin/yardctl" job requeue run-twice
wait_job run-twice Succeeded
[ "$(jshow run-twice 'j["job"]["requeues"]')" = 1 ] || fail "requeues: $(jshow run-twice 'j["job"]')"
# Both runs ran again (the earlier life's successes do not count), as new attempts.
[ "$(jshow run-twice 'len(j["tasks"][0]["replicas"])')" = 2 ] || fail "replicas after requeue: $(jshow run-twice 'j["tasks"][0]["replicas"]')"
[ "$(jshow run-twice 'sorted(r["attempt"] for r in j["tasks"][0]["replicas"])')" = "[1, 1]" ] ||
  fail "attempts after requeue: $(jshow run-twice 'j["tasks"][0]["replicas"]')"
"$bin/yardctl" job events run-twice | grep -q ' Requeued ' || fail "no Requeued event"
expect_out '^Requeued: +1 time' "$bin/yardctl" job show run-twice
# The earlier life's logs are read by their attempt number, from the master's archive.
sed -i 's/sleep 0; exit 0/echo run \$YARD_ATTEMPT/' "$tmp/again.yaml"
sed -i 's/^name: run-twice/name: say-attempt/' "$tmp/again.yaml"
submit "$tmp/again.yaml"
wait_job say-attempt Succeeded
expect_out 'job say-attempt requeued' "$bin/yardctl" job requeue say-attempt
wait_job say-attempt Succeeded
for a in 0 1; do
  out=""
  for _ in $(seq 50); do  # the first life's logs reach the archive when its replicas are cleaned up
    out=$("$bin/yardctl" logs say-attempt --attempt $a 2>&1) && [ "$(echo "$out" | grep -c "run $a")" = 2 ] && break
    sleep 0.2
  done
  [ "$(echo "$out" | grep -c "run $a")" = 2 ] || fail "logs --attempt $a of a requeued job: $out"
done
out=$("$bin/yardctl" logs say-attempt --attempt 5 2>&1) && fail "logs --attempt 5 of a job with two: $out"
echo "$out" | grep -q 'has no started replicas matching the filters' || fail "logs --attempt 5 said: $out"
# A running job: its replica is stopped, then it runs again as attempt 1.
expect_out 'job slow-blocker requeued \(was Running\)' "$bin/yardctl" job requeue slow-blocker
for _ in $(seq 100); do
  [ "$(jshow slow-blocker '[r["attempt"] for r in j["tasks"][0]["replicas"] if r["state"] == "Running"]')" = "[1]" ] && break
  sleep 0.1
done
[ "$(jshow slow-blocker '[r["attempt"] for r in j["tasks"][0]["replicas"] if r["state"] == "Running"]')" = "[1]" ] ||
  fail "slow-blocker did not run again: $("$bin/yardctl" job show slow-blocker)"
out=$("$bin/yardctl" job requeue held-later 2>&1) && fail "a queued job was requeued: $out"
echo "$out" | grep -q 'is queued: it has not started' || fail "requeue of a queued job said: $out"
"$bin/yardctl" job cancel slow-blocker >/dev/null
"$bin/yardctl" job delete held-later >/dev/null

say "after"
quick "$tmp/prep.yaml" prep-data 2
quick "$tmp/train.yaml" train-model 0
quick "$tmp/cleanup.yaml" on-prep-failure 0
quick "$tmp/report.yaml" report-always 0
printf 'after:\n  - { job: prep-data, condition: succeeded }\n' >>"$tmp/train.yaml"
out=$("$bin/yardctl" job submit "$tmp/train.yaml" 2>&1) && fail "after an unknown job accepted: $out"
echo "$out" | grep -q 'after\[0\].job: job prep-data does not exist' || fail "unknown after job said: $out"
submit "$tmp/prep.yaml"
submit "$tmp/train.yaml"
out=$("$bin/yardctl" job submit --after prep-data:failed "$tmp/cleanup.yaml" 2>&1) || fail "submit --after: $out"
out=$("$bin/yardctl" job submit --after prep-data:sometimes "$tmp/report.yaml" 2>&1)
[ $? -eq 2 ] || fail "a bad --after condition is not a usage error: $out"
echo "$out" | grep -q 'must be succeeded, failed or ended' || fail "bad --after said: $out"
"$bin/yardctl" job submit --after prep-data:ended --after train-model "$tmp/report.yaml" >/dev/null || fail "submit report"
reason=$(jshow train-model 'j["tasks"][0]["reason"]')
echo "$reason" | grep -Eq '^after prep-data \((Queued|Running)\)$' || fail "train-model why pending: $reason"
[ "$(jshow train-model 'j["job"]["afterPending"]')" = True ] || fail "afterPending: $(jshow train-model 'j["job"]')"
wait_job prep-data Succeeded
wait_job train-model Succeeded
wait_job report-always Succeeded
for _ in $(seq 50); do [ "$(state_of on-prep-failure)" = Skipped ] && break; sleep 0.1; done
[ "$(state_of on-prep-failure)" = Skipped ] || fail "on-prep-failure: $(state_of on-prep-failure)"
[ "$(jshow on-prep-failure 'j["job"]["reason"]')" = "after prep-data: it ended Succeeded, not failed" ] ||
  fail "skip reason: $(jshow on-prep-failure 'j["job"]["reason"]')"
"$bin/yardctl" job events train-model | grep -q 'Released .*after prep-data (Succeeded)' || fail "no Released event"
# A job after one that has ended already is decided at submit.
quick "$tmp/late.yaml" late-follower 0
out=$("$bin/yardctl" job submit --after prep-data:failed "$tmp/late.yaml" 2>&1) || fail "late submit: $out"
[ "$(state_of late-follower)" = Skipped ] || fail "late-follower: $(state_of late-follower)"
# Held and then skipped: ended, so no longer held (the list says Skipped, not Held).
sed -i 's/^name: late-follower/name: held-skipped/' "$tmp/late.yaml"
out=$("$bin/yardctl" job submit --hold --after prep-data:failed "$tmp/late.yaml" 2>&1) || fail "held late submit: $out"
[ "$(state_of held-skipped)" = Skipped ] || fail "held-skipped: $(state_of held-skipped)"
[ "$(jshow held-skipped 'j["job"]["held"]')" = False ] || fail "a skipped job is still held: $(jshow held-skipped 'j["job"]')"
expect_out '^held-skipped +default +Skipped ' "$bin/yardctl" job list --state Skipped
expect_out 'job held-skipped is not held' "$bin/yardctl" job release held-skipped
sed -i 's/^name: held-skipped/name: late-follower/' "$tmp/late.yaml"
sed -i 's/^name: late-follower/name: self-follower/' "$tmp/late.yaml"
out=$("$bin/yardctl" job submit --after self-follower "$tmp/late.yaml" 2>&1)
[ $? -ne 0 ] || fail "a job after itself was accepted"
echo "$out" | grep -q 'a job cannot run after itself' || fail "self after said: $out"

# A master restart while a job waits on another: the wait is read back from the store and
# decided when the other ends.
quick "$tmp/slowprep.yaml" slow-prep 4
quick "$tmp/waiter.yaml" waits-on-prep 0
submit "$tmp/slowprep.yaml"
"$bin/yardctl" job submit --after slow-prep "$tmp/waiter.yaml" >/dev/null || fail "submit waits-on-prep"
wait_job slow-prep Running
kill "$master"; wait "$master" 2>/dev/null
start_master
[ "$(jshow waits-on-prep 'j["job"]["afterPending"], j["job"]["state"]')" = "True Queued" ] ||
  fail "after the restart waits-on-prep: $(jshow waits-on-prep 'j["job"]')"
wait_job slow-prep Succeeded 30
wait_job waits-on-prep Succeeded 30

say "logs --since"
cat >"$tmp/since.yaml" <<'YAML'
name: since-logs
tasks:
  - name: main
    kind: pytorch
    advanced: { retention: 0 }
    roles:
      master:
        replicas: 1
        container:
          image: host
          command: [sh, -c, 'echo early-line; sleep 4; echo late-line; sleep 2']
          resources: { cpu: 100m, memory: 64Mi }
YAML
submit "$tmp/since.yaml"
for _ in $(seq 100); do "$bin/yardctl" logs since-logs 2>/dev/null | grep -q early-line && break; sleep 0.1; done
sleep 1.2
between=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)  # after the early line's mark, before the late line
for _ in $(seq 100); do "$bin/yardctl" logs since-logs 2>/dev/null | grep -q late-line && break; sleep 0.1; done
for since in 2s "$between"; do
  out=$("$bin/yardctl" logs since-logs --since "$since" 2>&1)
  echo "$out" | grep -q late-line || fail "logs --since $since lacks the late line: $out"
  echo "$out" | grep -q early-line && fail "logs --since $since shows the early line: $out"
done
"$bin/yardctl" logs since-logs | grep -q early-line || fail "logs without --since lacks the early line"
out=$("$bin/yardctl" logs since-logs --since 1h 2>&1)
echo "$out" | grep -q early-line || fail "logs --since 1h lacks the early line: $out"
out=$("$bin/yardctl" logs since-logs --since yesterday 2>&1)
[ $? -eq 2 ] || fail "a bad --since is not a usage error: $out"
# Ended with retention 0: its node drops it once archived; the archived copy keeps its marks.
wait_job since-logs Succeeded
for _ in $(seq 100); do cat "$tmp"/agent*.err | grep -q 'removed main/master/0 ' && break; sleep 0.1; done
grep -q 'since-logs .*archived' "$tmp/master.err" || fail "since-logs' log was not archived"
cat "$tmp"/agent*.err | grep -q 'removed main/master/0 ' || fail "since-logs' replica was not removed from its node"
out=$("$bin/yardctl" logs since-logs --since "$between" 2>&1)
echo "$out" | grep -q late-line || fail "archived logs --since $between lack the late line: $out"
echo "$out" | grep -q early-line && fail "archived logs --since $between show the early line: $out"
"$bin/yardctl" logs since-logs | grep -q early-line || fail "archived logs without --since lack the early line"

finish "habits"
