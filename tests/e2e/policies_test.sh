#!/usr/bin/env bash
# Task policies end to end on real processes and cgroups: a memory hog is OOMKilled and
# fails its task; maxLifetime stops a sleeper (DeadlineExceeded); retries: 1 restarts a
# failing gang once as attempt 1; cancel runs preStop before the stop; a container-job run
# past its timeout is stopped and run again; restartPolicy OnFailure restarts a run in
# place; an agent with a wrong join token is refused.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 4Gi
start_agent 2 --cpu 2 --memory 4Gi
wait_nodes 2

say "a replica allocating past its memory limit is OOMKilled and its task fails"
cat >"$tmp/oom.yaml" <<'YAML'
name: e2e-oom
tasks:
  - name: memory-hog
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 500m, memory: 64Mi }
          command: python3 -c
          args: ["import time; b = bytearray(256 * 1024 * 1024); print('allocated'); time.sleep(5)"]
  - name: after
    kind: container-job
    dependsOn: [memory-hog]
    container: { image: host, resources: { cpu: 100m, memory: 16Mi }, command: "true" }
YAML
submit "$tmp/oom.yaml"
wait_job e2e-oom Failed 30
[ "$(jshow e2e-oom 'j["tasks"][0]["replicas"][0]["state"]')" = OOMKilled ] || fail "hog not OOMKilled: $("$bin/yardctl" job show e2e-oom)"
[ "$(jshow e2e-oom 'j["tasks"][1]["state"]')" = Skipped ] || fail "dependant not Skipped"
"$bin/yardctl" logs e2e-oom | grep -q allocated && fail "the hog got its 256 MiB past a 64 MiB limit"

say "maxLifetime stops a sleeper: DeadlineExceeded, and the job is Failed only once it is gone"
# The sleeper records its own pid: other tests running at the same time have sleepers too
# (a `pgrep -f 'sleep 300'` here once matched e2e.fence's, issue 32).
cat >"$tmp/life.yaml" <<YAML
name: e2e-lifetime
tasks:
  - name: sleeper
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh -c
          args: "'echo \$\$ > $tmp/lifetime.pid; exec sleep 300'"
    advanced: { maxLifetime: 2 }
YAML
submit "$tmp/life.yaml"
for _ in $(seq 100); do [ -s "$tmp/lifetime.pid" ] && break; sleep 0.1; done
sleeper=$(cat "$tmp/lifetime.pid" 2>/dev/null)
[ -n "$sleeper" ] || fail "the sleeper did not start"
# Sampled the moment Failed is first visible: by then its process must be gone (a replica
# Yard stops is Stopping, and its job not yet Failed, until its agent reports it gone).
wait_job e2e-lifetime Failed 30
if [ -n "$sleeper" ] && [ -d "/proc/$sleeper" ] && ! grep -q ') Z ' "/proc/$sleeper/stat" 2>/dev/null; then
  fail "the job is Failed while its sleeper (pid $sleeper) still runs: $(cat "/proc/$sleeper/cmdline" 2>/dev/null | tr '\0' ' ')"
fi
jshow e2e-lifetime 'j["tasks"][0]["reason"]' | grep -q '^DeadlineExceeded' || fail "reason: $(jshow e2e-lifetime 'j["tasks"][0]["reason"]')"
"$bin/yardctl" job events e2e-lifetime | grep -q DeadlineExceeded || fail "no DeadlineExceeded event"

say "retries: 1 restarts a failing gang once, as attempt 1, then the task fails"
cat >"$tmp/retry.yaml" <<'YAML'
name: e2e-retry
tasks:
  - name: flaky
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo attempt $YARD_ATTEMPT; sleep 0.3; exit 1'" } }
      worker: { replicas: 1, container: *c }
    advanced: { retries: 1 }
YAML
submit "$tmp/retry.yaml"
wait_job e2e-retry Failed 40
[ "$(jshow e2e-retry 'j["tasks"][0]["attempt"]')" = 1 ] || fail "attempt is not 1"
"$bin/yardctl" job events e2e-retry | grep -q Restarting || fail "no Restarting event"
"$bin/yardctl" logs e2e-retry --task flaky --role master --index 0 --attempt 0 | grep -qx 'attempt 0' || fail "attempt 0 log"
"$bin/yardctl" logs e2e-retry --task flaky --role master --index 0 | grep -qx 'attempt 1' || fail "attempt 1 log"

say "cancel runs preStop, then SIGTERM"
cat >"$tmp/cancel.yaml" <<YAML
name: e2e-cancel
tasks:
  - name: serve
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh -c
          args: "'trap \"echo got SIGTERM; exit 0\" TERM; echo serving; while true; do sleep 0.1; done'"
          preStop: { exec: "sh -c 'echo prestop ran > $tmp/prestop; echo prestop says bye'" }
YAML
submit "$tmp/cancel.yaml"
for _ in $(seq 100); do [ "$(jshow e2e-cancel 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
"$bin/yardctl" job cancel e2e-cancel >/dev/null || fail "cancel"
for _ in $(seq 100); do [ -f "$tmp/prestop" ] && break; sleep 0.1; done
[ -f "$tmp/prestop" ] || fail "preStop did not run on cancel"
for _ in $(seq 100); do "$bin/yardctl" logs e2e-cancel 2>/dev/null | grep -q 'got SIGTERM' && break; sleep 0.1; done
out=$("$bin/yardctl" logs e2e-cancel)
echo "$out" | grep -q 'prestop says bye' || fail "preStop output not in the log: $out"
echo "$out" | tr '\n' ' ' | grep -q 'prestop says bye.*got SIGTERM' || fail "SIGTERM came before preStop ended: $out"
wait_job e2e-cancel Cancelled 10

say "a container-job run past its timeout is stopped and run again; then the task fails"
cat >"$tmp/timeout.yaml" <<'YAML'
name: e2e-timeout
tasks:
  - name: slow
    kind: container-job
    timeout: 1
    retries: 1
    restartPolicy: Never
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep 60 }
YAML
submit "$tmp/timeout.yaml"
wait_job e2e-timeout Failed 40
n=$("$bin/yardctl" -o json job events e2e-timeout | python3 -c 'import json,sys; print(sum(e["type"] == "DeadlineExceeded" for e in json.load(sys.stdin)))')
[ "$n" -eq 2 ] || fail "$n runs hit their timeout, want 2 (first run + one retry)"

say "restartPolicy OnFailure restarts the failed run in place"
cat >"$tmp/onfailure.yaml" <<'YAML'
name: e2e-onfailure
tasks:
  - name: second-try
    kind: container-job
    retries: 2
    restartPolicy: OnFailure
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo try $YARD_ATTEMPT; [ $YARD_ATTEMPT -ge 1 ]'" }
YAML
submit "$tmp/onfailure.yaml"
wait_job e2e-onfailure Succeeded 30
[ "$(jshow e2e-onfailure 'j["tasks"][0]["replicas"][0]["attempt"]')" = 1 ] || fail "run 0 is not at attempt 1: $("$bin/yardctl" job show e2e-onfailure)"
[ "$(jshow e2e-onfailure 'len(j["tasks"][0]["replicas"])')" = 1 ] || fail "OnFailure made a new run instead of restarting in place"
"$bin/yardctl" logs e2e-onfailure | grep -q 'try 1' || fail "attempt 1 log"

say "an agent with a wrong join token is refused and registers nothing"
YARD_JOIN_TOKEN=wrong "$bin/yard-agent" --master "127.0.0.1:$agent_port" --ca "$tmp/master/ca.pem" --name intruder --address 127.0.0.9 \
  --data-dir "$tmp/agent9" --cgroup-parent "yard/$tag-9" >"$tmp/agent9.out" 2>"$tmp/intruder.log" &
intruder=$!
pids+=("$intruder")
for _ in $(seq 50); do kill -0 "$intruder" 2>/dev/null || break; sleep 0.1; done
kill -0 "$intruder" 2>/dev/null && fail "the refused agent keeps running"
wait "$intruder"; rc=$?
[ "$rc" -eq 1 ] || fail "refused agent exit $rc, want 1"
grep -q 'the master refused the join: join as node intruder: join token' "$tmp/intruder.log" || fail "refusal not explained: $(cat "$tmp/intruder.log")"
"$bin/yardctl" node list | grep -q intruder && fail "the intruder was registered"

for j in e2e-oom e2e-lifetime e2e-retry e2e-cancel e2e-timeout e2e-onfailure; do "$bin/yardctl" job delete $j >/dev/null; done
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent[12]/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.policies
