#!/usr/bin/env bash
# `yardctl logs JOB -f` follows the whole job (kubectl logs -f with a selector, nomad alloc
# logs -f): run right after submit it waits for the first replica, picks up later tasks,
# runs and attempts as they start, and ends when the job has ended.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 2Gi
wait_nodes 1

cat >"$tmp/dag.yaml" <<'YAML'
name: follow-dag
tasks:
  - name: shard
    kind: container-job
    completions: 3
    parallelism: 1
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'sleep 1; echo shard $YARD_REPLICA_INDEX done'" }
  - name: train
    kind: container-job
    dependsOn: [shard]
    retries: 1
    restartPolicy: OnFailure
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo train attempt $YARD_ATTEMPT; test $YARD_ATTEMPT -ge 1'" }
YAML
say "logs -f right after submit follows every task, run and attempt until the job ends"
submit "$tmp/dag.yaml"
timeout 60 "$bin/yardctl" logs follow-dag -f >"$tmp/follow.out" 2>"$tmp/follow.err"
rc=$?
[ "$rc" -eq 0 ] || fail "logs -f exited $rc: $(cat "$tmp/follow.err")"
for want in 'shard/run/0 | shard 0 done' 'shard/run/1 | shard 1 done' 'shard/run/2 | shard 2 done' \
            'train/run/0 | train attempt 0' 'train/run/0 | train attempt 1'; do
  grep -qF "$want" "$tmp/follow.out" || fail "logs -f missed \"$want\": $(cat "$tmp/follow.out")"
done
state=$(jshow follow-dag 'j["job"]["state"]')
[ "$state" = Succeeded ] || fail "logs -f returned while the job is $state"

say "logs -f of a finished job prints what it has and ends"
timeout 20 "$bin/yardctl" logs follow-dag -f --task train >"$tmp/after.out" 2>&1 || fail "logs -f of an ended job: $(cat "$tmp/after.out")"
grep -qF 'train attempt 1' "$tmp/after.out" || fail "logs -f of an ended job printed: $(cat "$tmp/after.out")"

say "one user follows at most 32 log streams at once; one ended gives its place back"
cat >"$tmp/long.yaml" <<'YAML'
name: follow-long
tasks:
  - name: main
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo up; sleep 120'" }
YAML
submit "$tmp/long.yaml"
wait_job follow-long Running
followers=()
for i in $(seq 32); do
  "$bin/yardctl" logs follow-long -f >"$tmp/f$i.out" 2>&1 &
  followers+=("$!")
  pids+=("$!")
done
for _ in $(seq 100); do [ "$(cat "$tmp"/f*.out | grep -c '| up')" -ge 32 ] && break; sleep 0.2; done
[ "$(cat "$tmp"/f*.out | grep -c '| up')" -ge 32 ] || fail "32 followers did not all start"
out=$(timeout 10 "$bin/yardctl" logs follow-long -f 2>&1) && fail "a 33rd follow was accepted: $out"
echo "$out" | grep -q 'follows 32 log streams at once, the most one user may' || fail "the 33rd follow said: $out"
kill "${followers[0]}"; wait "${followers[0]}" 2>/dev/null
ok=""
for _ in $(seq 50); do  # the master sees the closed connection and gives the place back
  out=$(timeout 3 "$bin/yardctl" logs follow-long -f 2>&1)
  echo "$out" | grep -q '| up' && { ok=1; break; }
  sleep 0.2
done
[ -n "$ok" ] || fail "no place came back after a follower ended: $out"
for p in "${followers[@]:1}"; do kill "$p" 2>/dev/null; done
"$bin/yardctl" job cancel follow-long >/dev/null

finish "follow"
