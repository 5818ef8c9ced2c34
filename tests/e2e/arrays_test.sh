#!/usr/bin/env bash
# Job arrays (docs/spec.md, "Job arrays"), Slurm's sbatch --array: one submission creates the
# members NAME-<index> atomically, each gets YARD_ARRAY_INDEX and YARD_ARRAY_COUNT, at most
# maxRunning of them run at once, cancel and delete by the array's name act on all of them.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 4 --memory 4Gi
wait_nodes 1

members() {  # members ARRAY: the array's member names, in index order
  "$bin/yardctl" job list -o json | python3 -c "
import json,sys
js=[j for j in json.load(sys.stdin) if j.get('array')=='$1']
print(' '.join(j['name'] for j in sorted(js, key=lambda j: j['arrayIndex'])))"
}
running() {  # running ARRAY: how many members are Running
  "$bin/yardctl" job list -o json | python3 -c "
import json,sys
print(sum(1 for j in json.load(sys.stdin) if j.get('array')=='$1' and j['state']=='Running'))"
}

say "a range makes one job per index, each with its index and the count in its environment"
cat >"$tmp/sweep.yaml" <<'YAML'
name: sweep
array: { range: "0-8:4" }
tasks:
  - name: work
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo index=$YARD_ARRAY_INDEX count=$YARD_ARRAY_COUNT array=$YARD_ARRAY job=$YARD_JOB'" }
YAML
out=$("$bin/yardctl" job submit "$tmp/sweep.yaml" 2>&1) || fail "submit: $out"
echo "$out" | grep -q "sweep-0 to sweep-8" || fail "submit says which jobs it made: $out"
[ "$(members sweep)" = "sweep-0 sweep-4 sweep-8" ] || fail "members: '$(members sweep)'"
for i in 0 4 8; do
  wait_job "sweep-$i" Succeeded 30
  "$bin/yardctl" logs "sweep-$i" | grep -q "index=$i count=3 array=sweep job=sweep-$i" \
    || fail "sweep-$i environment: $("$bin/yardctl" logs "sweep-$i")"
done
"$bin/yardctl" job events sweep-4 | grep -q "as index 4 of job array sweep" || fail "events: $("$bin/yardctl" job events sweep-4)"
out=$("$bin/yardctl" job show sweep 2>&1) && fail "job show of an array's name succeeded"
echo "$out" | grep -q "sweep is a job array of 3 jobs" || fail "job show sweep: $out"

say "after a job array: all of its jobs (Slurm's afterok on an array job)"
cat >"$tmp/gate.yaml" <<YAML
name: gate
array: { count: 2 }
tasks:
  - name: work
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: [sh, -c, 'while [ ! -e $tmp/open-\$YARD_ARRAY_INDEX ]; do sleep 0.1; done'] }
YAML
submit "$tmp/gate.yaml"
cat >"$tmp/after-gate.yaml" <<'YAML'
name: after-gate
tasks:
  - { name: work, kind: container-job, container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" } }
YAML
"$bin/yardctl" job submit --after gate "$tmp/after-gate.yaml" >/dev/null 2>"$tmp/ag.err" || fail "submit --after gate: $(cat "$tmp/ag.err")"
wait_job gate-0 Running 30
[ "$(jshow after-gate 'j["job"]["afterPending"]')" = True ] || fail "after-gate is not waiting: $(jshow after-gate 'j["job"]')"
[ "$(jshow after-gate 'j["tasks"][0]["reason"]')" = "after gate (array: 0 of 2 jobs ended)" ] ||
  fail "after-gate why pending: $(jshow after-gate 'j["tasks"][0]["reason"]')"
touch "$tmp/open-0"
wait_job gate-0 Succeeded 30
sleep 0.5
[ "$(jshow after-gate 'j["tasks"][0]["reason"]')" = "after gate (array: 1 of 2 jobs ended)" ] ||
  fail "after-gate with one ended: $(jshow after-gate 'j["tasks"][0]["reason"]')"
touch "$tmp/open-1"
wait_job after-gate Succeeded 30
"$bin/yardctl" job events after-gate | grep -q 'Released .*after gate (array: 2 of 2 jobs ended)' || fail "no Released event: $("$bin/yardctl" job events after-gate)"
# Decided at submit when the array has ended: failed cannot be met by an array that succeeded.
sed 's/name: after-gate/name: on-gate-failure/' "$tmp/after-gate.yaml" >"$tmp/ogf.yaml"
"$bin/yardctl" job submit --after gate:failed "$tmp/ogf.yaml" >/dev/null || fail "submit --after gate:failed"
wait_job on-gate-failure Skipped 10
[ "$(jshow on-gate-failure 'j["job"]["reason"]')" = "after gate: every job of the array ended Succeeded, not failed" ] ||
  fail "on-gate-failure reason: $(jshow on-gate-failure 'j["job"]["reason"]')"
for j in after-gate on-gate-failure; do "$bin/yardctl" job delete $j >/dev/null; done
"$bin/yardctl" job delete gate >/dev/null

say "all or none: a member name already taken refuses the whole array"
cat >"$tmp/taken.yaml" <<'YAML'
name: sweep-4-x
tasks:
  - { name: work, kind: container-job, container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" } }
YAML
sed 's/name: sweep-4-x/name: other-1/' "$tmp/taken.yaml" >"$tmp/other1.yaml"
submit "$tmp/other1.yaml"
sed 's/name: sweep$/name: other/; s/range: "0-8:4"/count: 3/' "$tmp/sweep.yaml" >"$tmp/other.yaml"
out=$("$bin/yardctl" job submit "$tmp/other.yaml" 2>&1) && fail "an array with a taken member name was accepted"
echo "$out" | grep -q "other-1 is already used" || fail "refusal: $out"
[ -z "$(members other)" ] || fail "a refused array left members: $(members other)"

say "an array whose members together would hold more than 64 MiB of spec is refused"
big=$(head -c 100000 /dev/zero | tr '\0' a)
printf 'name: heavy\narray: { count: 1000 }\ntasks:\n  - { name: work, kind: container-job, container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true", env: { BIG: "%s" } } }\n' "$big" >"$tmp/heavy.yaml"
out=$("$bin/yardctl" job submit "$tmp/heavy.yaml" 2>&1) && fail "an array of 1000 x 100 KB was accepted"
echo "$out" | grep -q "array: 1000 members of a 9[0-9] KiB spec would hold 9[0-9] MiB, more than the 64 MiB one array may" ||
  fail "the heavy array's refusal: ${out:0:300}"
[ -z "$(members heavy)" ] || fail "a refused array left members"

say "maxRunning: at most 2 of 5 run at once; the others say why they wait"
cat >"$tmp/capped.yaml" <<YAML
name: capped
array: { count: 5, maxRunning: 2 }
tasks:
  - name: work
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'while [ ! -f $tmp/go-\$YARD_ARRAY_INDEX ]; do sleep 0.1; done'" }
YAML
submit "$tmp/capped.yaml"
for _ in $(seq 100); do [ "$(running capped)" = 2 ] && break; sleep 0.1; done
[ "$(running capped)" = 2 ] || fail "running members: $(running capped), want 2"
sleep 2
[ "$(running capped)" = 2 ] || fail "more than maxRunning run: $(running capped)"
jshow capped-4 'j["tasks"][0]["reason"]' | grep -q "job array capped has 2 of its jobs running (maxRunning 2)" \
  || fail "held member's reason: $(jshow capped-4 'j["tasks"][0]["reason"]')"
[ "$(jshow capped-0 'j["job"]["state"]')" = Running ] && [ "$(jshow capped-1 'j["job"]["state"]')" = Running ] \
  || fail "the lowest indexes start first"
touch "$tmp/go-0"
wait_job capped-0 Succeeded 20
for _ in $(seq 100); do [ "$(jshow capped-2 'j["job"]["state"]')" = Running ] && break; sleep 0.1; done
[ "$(jshow capped-2 'j["job"]["state"]')" = Running ] || fail "the next member did not start when one finished"
[ "$(running capped)" = 2 ] || fail "running after one finished: $(running capped)"

say "job list shows an array as one row; --array lists its members"
table=$("$bin/yardctl" job list)
echo "$table" | grep -qE '^capped\[5\] ' || fail "grouped row: $table"
echo "$table" | grep -q 'capped-3' && fail "members listed one by one: $table"
[ "$("$bin/yardctl" job list --array capped | grep -c '^capped-')" = 5 ] || fail "list --array: $("$bin/yardctl" job list --array capped)"

say "cancel with the array's name cancels every member"
out=$("$bin/yardctl" job cancel capped 2>&1) || fail "cancel capped: $out"
echo "$out" | grep -q "job array capped: 4 jobs cancelled" || fail "cancel says: $out"
for i in 1 2 3 4; do wait_job "capped-$i" Cancelled 30; done
[ "$(jshow capped-0 'j["job"]["state"]')" = Succeeded ] || fail "a finished member changed state"

say "delete with the array's name deletes every member"
out=$("$bin/yardctl" job delete capped 2>&1) || fail "delete capped: $out"
for _ in $(seq 100); do [ -z "$(members capped)" ] && break; sleep 0.1; done
[ -z "$(members capped)" ] || fail "members left after delete: $(members capped)"
"$bin/yardctl" job delete sweep >/dev/null || fail "delete sweep"

say "--array on the command line, and several specs in one request (all or none)"
sed 's/name: other-1/name: flagged/' "$tmp/other1.yaml" >"$tmp/flagged.yaml"
out=$("$bin/yardctl" job submit --array 1-3%1 "$tmp/flagged.yaml" 2>&1) || fail "submit --array: $out"
[ "$(members flagged)" = "flagged-1 flagged-2 flagged-3" ] || fail "--array members: '$(members flagged)'"
jshow flagged-2 'j["job"]["state"]' >/dev/null || fail "flagged-2 missing"
out=$("$bin/yardctl" job submit --array 5-1 "$tmp/flagged.yaml" 2>&1); rc=$?
[ "$rc" = 1 ] && echo "$out" | grep -q 'ends before it starts' || fail "bad --array: rc $rc: $out"
out=$("$bin/yardctl" job submit --array 0-2%0 "$tmp/flagged.yaml" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "--array with %0 is a usage error: rc $rc: $out"
sed 's/name: other-1/name: multi-a/' "$tmp/other1.yaml" >"$tmp/a.yaml"
sed 's/name: other-1/name: multi-b/' "$tmp/other1.yaml" >"$tmp/b.yaml"
out=$("$bin/yardctl" job submit "$tmp/a.yaml" "$tmp/other1.yaml" 2>&1) && fail "a taken name in a batch was accepted"
echo "$out" | grep -q "nothing was submitted" || fail "batch refusal: $out"
"$bin/yardctl" job show multi-a >/dev/null 2>&1 && fail "a refused batch left multi-a"
out=$("$bin/yardctl" -o json job submit "$tmp/a.yaml" "$tmp/b.yaml" 2>&1) || fail "batch submit: $out"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert [x["name"] for x in j["submitted"]] == ["multi-a", "multi-b"]' \
  || fail "batch -o json: $out"
for j in multi-a multi-b; do wait_job $j Succeeded 30; "$bin/yardctl" job delete $j >/dev/null; done
"$bin/yardctl" job delete flagged >/dev/null || fail "delete flagged"
"$bin/yardctl" job delete other-1 >/dev/null

finish e2e.arrays
