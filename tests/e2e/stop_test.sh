#!/usr/bin/env bash
# A stop is over only when the process is gone (issue: "a stop is reported before it
# happens"). A replica that ignores SIGTERM and whose preStop takes 2 s is cancelled on a
# one-node cluster: the job is Cancelling and the replica Stopping, its CPU and port stay
# taken (a job needing them waits) until the agent reports the process gone after the
# grace period (3 s, tests/e2e/cluster.sh); `job cancel --wait` returns only then; the
# waiting job starts after. Also: `job delete` of a running job frees its name only then.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 1 --memory 2Gi
wait_nodes 1

stubborn() {  # stubborn NAME: a whole-node replica that ignores SIGTERM, with a slow preStop
  cat >"$tmp/$1.yaml" <<YAML
name: $1
tasks:
  - name: serve
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 1, memory: 64Mi }
          command: sh -c
          args: "'trap \"\" TERM; echo \$\$ > $tmp/$1.pid; for p in $tmp/*.pid; do kill -0 \$(cat \$p) 2>/dev/null && [ \$p != $tmp/$1.pid ] && echo \$p >> $tmp/$1.overlap; done; while true; do sleep 0.1; done'"
          preStop: { exec: "sleep 2" }
YAML
}
running() {  # running NAME: its replica reported Running
  for _ in $(seq 100); do
    [ "$(jshow "$1" 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && return 0
    sleep 0.1
  done
  fail "$1 never ran: $("$bin/yardctl" job show "$1" 2>&1)"
}

say "cancel: Cancelling and Stopping until the process is gone; its CPU and port stay taken"
stubborn stop-a
submit "$tmp/stop-a.yaml"
running stop-a
pid=$(cat "$tmp/stop-a.pid")
port=$(jshow stop-a 'j["tasks"][0]["replicas"][0]["port"]')
t0=$(date +%s.%N)
out=$("$bin/yardctl" job cancel stop-a) || fail "cancel: $out"
echo "$out" | grep -q 'cancelling: 1 replicas stopping' || fail "cancel answer: $out"
[ "$(jshow stop-a 'j["job"]["state"]')" = Cancelling ] || fail "job not Cancelling: $("$bin/yardctl" job show stop-a)"
[ "$(jshow stop-a 'j["tasks"][0]["replicas"][0]["state"]')" = Stopping ] || fail "replica not Stopping"
stubborn stop-b
submit "$tmp/stop-b.yaml"
sleep 1
# Read stop-b and the node first, stop-a after: stop-a still Stopping then means it was at
# the first reads too (a loaded machine may have ended the 3 s grace already: nothing to see).
b=$(jshow stop-b 'j["job"]["state"]')
nodes=$("$bin/yardctl" node list)
if [ "$(jshow stop-a 'j["tasks"][0]["replicas"][0]["state"]')" = Stopping ]; then
  [ "$b" = Queued ] || fail "stop-b was $b while stop-a's replica was Stopping"
  echo "$nodes" | grep -q 'node-1 .* 1/1 ' || fail "node-1's CPU was released early: $nodes"
fi
out=$("$bin/yardctl" job cancel --wait --timeout 30 stop-a 2>&1) || fail "cancel --wait: $out"
t1=$(date +%s.%N)
kill -0 "$pid" 2>/dev/null && fail "cancel --wait returned while pid $pid lives"
echo "$out" | grep -q 'job stop-a Cancelled: every replica has stopped' || fail "cancel --wait said: $out"
took=$(python3 -c "print(round($t1 - $t0, 1))")
python3 -c "import sys; sys.exit(0 if $t1 - $t0 >= 2.5 else 1)" || fail "cancel --wait returned after ${took}s, before the preStop and grace could pass"
say "cancel --wait returned after ${took}s (preStop 2 s, grace 3 s, SIGTERM ignored)"
"$bin/yardctl" job events stop-a | grep -q 'Killed .*cancelled by user' || fail "no Killed event: $("$bin/yardctl" job events stop-a)"
running stop-b
[ -e "$tmp/stop-b.overlap" ] && fail "stop-b started while stop-a's process lived ($(cat "$tmp/stop-b.overlap"))"
[ "$(jshow stop-b 'j["tasks"][0]["replicas"][0]["port"]')" = "$port" ] && say "stop-b got port $port after stop-a released it"

say "delete of a running job: its name is taken until its process is gone"
pid=$(cat "$tmp/stop-b.pid")
out=$("$bin/yardctl" job delete stop-b) || fail "delete: $out"
echo "$out" | grep -q 'deleted once its 1 replicas have stopped' || fail "delete answer: $out"
"$bin/yardctl" job show stop-b >/dev/null 2>&1 || fail "stop-b vanished before its process ended"
out=$("$bin/yardctl" job delete --wait --timeout 30 stop-b 2>&1) || fail "delete --wait: $out"
kill -0 "$pid" 2>/dev/null && fail "delete --wait returned while pid $pid lives"
"$bin/yardctl" job show stop-b >/dev/null 2>&1 && fail "stop-b still exists after delete --wait"
submit "$tmp/stop-b.yaml"  # the name is free again
"$bin/yardctl" job delete --wait --timeout 30 stop-b >/dev/null || fail "delete --wait of the second stop-b"

say "cleanup: none leaves a replica running after success; job show says so; cancel stops it"
cat >"$tmp/leftover.yaml" <<YAML
name: leftover
tasks:
  - name: train
    kind: pytorch
    advanced: { cleanup: none }
    roles:
      master: { replicas: 1, container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'sleep 1'" } }
      worker:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh -c
          args: "'echo \$\$ > $tmp/leftover.pid; exec sleep 600'"
YAML
submit "$tmp/leftover.yaml"
wait_job leftover Succeeded 30
"$bin/yardctl" job show leftover | grep -q 'still running (cleanup: none); `yardctl job cancel leftover` stops it' ||
  fail "job show does not say a replica still runs: $("$bin/yardctl" job show leftover)"
pid=$(cat "$tmp/leftover.pid")
kill -0 "$pid" 2>/dev/null || fail "the leftover worker is not running"
out=$("$bin/yardctl" job cancel --wait --timeout 30 leftover 2>&1) || fail "cancel of the finished job: $out"
echo "$out" | grep -q 'stopping its 1 replicas left running' || fail "cancel said: $out"
kill -0 "$pid" 2>/dev/null && fail "cancel --wait returned while the leftover (pid $pid) lives"
[ "$(jshow leftover 'j["job"]["state"]')" = Succeeded ] || fail "the job's outcome changed: $("$bin/yardctl" job show leftover)"
[ "$(jshow leftover '[r["state"] for r in j["tasks"][0]["replicas"] if r["role"] == "worker"][0]')" = Killed ] ||
  fail "the leftover is not Killed: $("$bin/yardctl" job show leftover)"
out=$("$bin/yardctl" job cancel leftover 2>&1) && fail "a second cancel succeeded: $out"
echo "$out" | grep -q 'already finished (Succeeded)' || fail "second cancel said: $out"

finish "stop"
