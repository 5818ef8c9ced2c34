#!/usr/bin/env bash
# At most one copy of a replica attempt, and stops that outlive their agent (docs/reliability.md,
# "Fencing"): `kill -9` of the agent running a rank makes its yard-shim stop it when the lease
# runs out, before the master re-places the gang on another node (no overlap; the time from
# kill -9 to running elsewhere is printed); the restarted agent resurrects nothing. A stop under
# way (cancel, a SIGTERM-ignoring replica, 5 s grace) still ends in SIGKILL on time when the
# agent is killed mid-stop. `yard-master --dev` stops its replicas when it exits.
bin=$1
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/../../scripts/lib/dev_cluster.sh"
# 6 s heartbeat timeout: agents fence after 4 s without an answer, SIGKILL within 1 s.
printf 'join_token = "e2e-token"\nheartbeat_timeout = "6s"\nstop_grace = "5s"\n' >"$tmp/master.toml"
dev_dir="$tmp/dev"
cleanup_dev() {  # the dev cluster's processes, whatever happened
  [ -n "${dev_master:-}" ] && kill -9 "$dev_master" 2>/dev/null
  [ -n "${dev_agent:-}" ] && kill -9 "$dev_agent" 2>/dev/null
  for f in "$dev_dir"/agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for f in "$dev_dir"/agent/replicas/*/shim.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  cleanup
}
trap cleanup_dev EXIT

ms() { date +%s%3N; }
alive() { kill -0 "$1" 2>/dev/null && ! grep -qs '^[^ ]* ([^)]*) Z' "/proc/$1/stat"; }

start_master
start_agent 1
start_agent 2
wait_nodes 2

say "kill -9 of the agent running a rank: the rank is stopped before it runs elsewhere"
# Each copy logs its start, a tick every 100 ms and its end, with the attempt and the time.
cat >"$tmp/rank.sh" <<SH
log=$tmp/rank.log
trap 'echo "end \$YARD_ATTEMPT \$(date +%s%3N)" >>\$log; exit 143' TERM
echo "start \$YARD_ATTEMPT \$(date +%s%3N) \$\$ \$YARD_NODE" >>\$log
while :; do echo "tick \$YARD_ATTEMPT \$(date +%s%3N)" >>\$log; sleep 0.1; done
SH
cat >"$tmp/rank.yaml" <<YAML
name: e2e-fence
tasks:
  - name: train
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: /bin/sh
          args: $tmp/rank.sh
    advanced: { retries: 2 }
YAML
submit "$tmp/rank.yaml"
for _ in $(seq 100); do grep -q '^start 0 ' "$tmp/rank.log" 2>/dev/null && break; sleep 0.1; done
for _ in $(seq 100); do [ "$(jshow e2e-fence 'j["tasks"][0]["replicas"][0]["state"]')" = Running ] && break; sleep 0.1; done
node=$(jshow e2e-fence 'j["tasks"][0]["replicas"][0]["node"]')
n=${node#node-}
pid0=$(awk '$1 == "start" && $2 == 0 { print $4 }' "$tmp/rank.log")
[ -n "$pid0" ] && alive "$pid0" || fail "attempt 0 is not running: $(cat "$tmp/rank.log" 2>&1 | head -3)"
sleep 1  # some beats, so the lease is a fresh one
killed=$(ms)
kill -9 "${agent_pid[$n]}"
wait "${agent_pid[$n]}" 2>/dev/null
gone=""
for _ in $(seq 300); do
  [ -z "$gone" ] && ! alive "$pid0" && gone=$(ms)
  grep -q '^start 1 ' "$tmp/rank.log" && break
  sleep 0.05
done
[ -z "$gone" ] && ! alive "$pid0" && gone=$(ms)
start1=$(awk '$1 == "start" && $2 == 1 { print $3 }' "$tmp/rank.log")
last0=$(awk '$2 == 0 { t = $3 } END { print t }' "$tmp/rank.log")
if [ -z "$start1" ]; then
  fail "attempt 1 never started: $("$bin/yardctl" job events e2e-fence)"
else
  [ -n "$gone" ] || fail "attempt 0 (pid $pid0) still runs"
  node1=$(awk '$1 == "start" && $2 == 1 { print $5 }' "$tmp/rank.log")
  [ "$node1" != "$node" ] || fail "attempt 1 ran on the dead agent's node $node"
  echo "    kill -9 -> attempt 0 gone: $((gone - killed)) ms (last sign of life +$((last0 - killed)) ms);" \
       "running elsewhere ($node1): $((start1 - killed)) ms; gap between the copies: $((start1 - last0)) ms"
  [ "$last0" -lt "$start1" ] || fail "the copies overlapped: attempt 0 last seen at $last0, attempt 1 started at $start1"
  [ -n "$gone" ] && [ "$gone" -le "$start1" ] || fail "attempt 0 was still alive when attempt 1 started"
  grep -q '^end 0 ' "$tmp/rank.log" || fail "attempt 0 got no SIGTERM before its SIGKILL"
fi
dir0=$(ls -d "$tmp"/agent"$n"/replicas/*-0 | head -1)
grep -q '^lease expired at ' "$dir0/fenced" 2>/dev/null || fail "the shim did not record the fence: $(ls "$dir0")"

say "the restarted agent resurrects nothing"
start_agent "$n"
wait_nodes 2
sleep 3
[ "$(grep -c '^start 0 ' "$tmp/rank.log")" -eq 1 ] || fail "attempt 0 started again: $(grep '^start' "$tmp/rank.log")"
alive "$pid0" && fail "attempt 0 is running again"
grep -q 'Killed (fenced by yard-shim' "$tmp/agent$n.err" || fail "the restarted agent did not report the fenced attempt: $(tail -5 "$tmp/agent$n.err")"
[ "$(jshow e2e-fence 'j["tasks"][0]["replicas"][0]["attempt"]')" = 1 ] || fail "the live attempt is not 1"
"$bin/yardctl" job cancel e2e-fence >/dev/null
wait_job e2e-fence Cancelled 20

say "kill -9 of the agent mid-stop: the shim still ends a SIGTERM-ignoring replica on time"
cat >"$tmp/stubborn.yaml" <<YAML
name: e2e-stubborn
tasks:
  - name: stubborn
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh -c
          args: "'trap \"\" TERM; echo \$\$ > $tmp/stubborn.pid; while :; do sleep 0.1; done'"
YAML
submit "$tmp/stubborn.yaml"
for _ in $(seq 100); do [ -s "$tmp/stubborn.pid" ] && break; sleep 0.1; done
for _ in $(seq 100); do [ "$(jshow e2e-stubborn 'j["tasks"][0]["replicas"][0]["state"]')" = Running ] && break; sleep 0.1; done
spid=$(cat "$tmp/stubborn.pid")
node=$(jshow e2e-stubborn 'j["tasks"][0]["replicas"][0]["node"]')
n=${node#node-}
cancelled=$(ms)
"$bin/yardctl" job cancel e2e-stubborn >/dev/null
sdir=""
for _ in $(seq 50); do sdir=$(dirname "$(ls "$tmp"/agent"$n"/replicas/*/stop 2>/dev/null | head -1)"); [ "$sdir" != . ] && break; sleep 0.1; done
[ "$sdir" != . ] || fail "the agent wrote no stop file"
sleep 0.5
kill -9 "${agent_pid[$n]}"
wait "${agent_pid[$n]}" 2>/dev/null
died=""
for _ in $(seq 200); do alive "$spid" || { died=$(ms); break; }; sleep 0.05; done
if [ -z "$died" ]; then
  fail "the SIGTERM-ignoring replica outlived its agent's stop"
else
  echo "    cancel -> SIGKILL with the agent dead: $((died - cancelled)) ms (grace 5000 ms)"
  [ $((died - cancelled)) -ge 4500 ] || fail "killed before its 5 s grace: $((died - cancelled)) ms"
  [ $((died - cancelled)) -le 6500 ] || fail "killed late: $((died - cancelled)) ms"
fi
# The shim writes the status just after it reaps the workload: give it that moment.
for _ in $(seq 40); do [ -s "$sdir/status" ] && break; sleep 0.05; done
[ "$(cat "$sdir/status" 2>/dev/null)" = "signaled 9" ] || fail "status: $(cat "$sdir/status" 2>&1)"
start_agent "$n"
wait_job e2e-stubborn Cancelled 20

say "yard-master --dev stops its replicas when it exits"
start_dev_cluster "$bin" "$dev_dir" || fail "the dev cluster did not start"
cat >"$tmp/dev.yaml" <<YAML
name: e2e-dev-exit
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
          args: "'echo \$\$ > $tmp/dev.pid; exec sleep 300'"
YAML
submit "$tmp/dev.yaml"
for _ in $(seq 100); do [ -s "$tmp/dev.pid" ] && break; sleep 0.1; done
dpid=$(cat "$tmp/dev.pid" 2>/dev/null)
[ -n "$dpid" ] && alive "$dpid" || fail "the dev replica did not start"
stop_dev_cluster
dev_agent=""
sleep 0.2
[ -n "$dpid" ] && alive "$dpid" && fail "the dev replica outlived yard-master --dev"
grep -q 'stopping the dev agent' "$dev_dir/master.log" || fail "the dev master did not say it stops its replicas"
grep -q 'stopping every replica first' "$dev_dir/master.log" || fail "the dev agent did not stop its replicas: $(tail -5 "$dev_dir/master.log")"

finish e2e.fence
