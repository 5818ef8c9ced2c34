#!/usr/bin/env bash
# Restarts lose nothing: `kill -9` of an agent leaves its replica running under yard-shim and
# the restarted agent re-adopts it (same attempt, same process, not restarted); `kill -9` of
# the master mid-job and its restart let the job finish Succeeded.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1
wait_nodes 1

say "kill -9 of the agent: the replica keeps running and is re-adopted"
cat >"$tmp/long.yaml" <<YAML
name: e2e-adopt
tasks:
  - name: long
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh -c
          args: "'echo \$\$ > $tmp/long.pid; echo started attempt \$YARD_ATTEMPT; while [ ! -f $tmp/long.go ]; do sleep 0.1; done; echo finishing'"
YAML
submit "$tmp/long.yaml"
for _ in $(seq 100); do [ -s "$tmp/long.pid" ] && break; sleep 0.1; done
pid=$(cat "$tmp/long.pid")
for _ in $(seq 100); do [ "$(jshow e2e-adopt 'j["tasks"][0]["replicas"][0]["state"]')" = Running ] && break; sleep 0.1; done
kill -9 "${agent_pid[1]}"
wait "${agent_pid[1]}" 2>/dev/null
sleep 0.5
kill -0 "$pid" 2>/dev/null || fail "the replica died with its agent"
start_agent 1
for _ in $(seq 100); do grep -q 're-adopted train\|re-adopted long' "$tmp/agent1.err" && break; sleep 0.1; done
grep -q 're-adopted long/master/0 attempt 0: Running' "$tmp/agent1.err" || fail "agent did not re-adopt: $(tail -5 "$tmp/agent1.err")"
touch "$tmp/long.go"
wait_job e2e-adopt Succeeded 30
[ "$(jshow e2e-adopt 'j["tasks"][0]["attempt"]')" = 0 ] || fail "the task was restarted"
out=$("$bin/yardctl" logs e2e-adopt)
[ "$(echo "$out" | grep -c 'started attempt')" -eq 1 ] || fail "the replica ran more than once: $out"
echo "$out" | grep -q finishing || fail "no output after re-adoption: $out"

say "kill -9 of the master mid-job: the restarted master sees the job through"
rm -f "$tmp/long.go" "$tmp/long.pid"
sed 's/e2e-adopt/e2e-master/' "$tmp/long.yaml" >"$tmp/master-job.yaml"
submit "$tmp/master-job.yaml"
for _ in $(seq 100); do [ -s "$tmp/long.pid" ] && break; sleep 0.1; done
for _ in $(seq 100); do [ "$(jshow e2e-master 'j["tasks"][0]["replicas"][0]["state"]')" = Running ] && break; sleep 0.1; done
kill -9 "$master"
wait "$master" 2>/dev/null
touch "$tmp/long.go"  # it finishes while the master is down
sleep 1
start_master
wait_job e2e-master Succeeded 30
[ "$(jshow e2e-master 'j["tasks"][0]["attempt"]')" = 0 ] || fail "the task was restarted after the master restart"
"$bin/yardctl" logs e2e-master | grep -q finishing || fail "logs after the master restart"

for j in e2e-adopt e2e-master; do "$bin/yardctl" job delete $j >/dev/null; done
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.restart
