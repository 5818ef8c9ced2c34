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

finish "follow"
