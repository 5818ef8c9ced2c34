#!/usr/bin/env bash
# Preemption end to end (docs/scheduler.md, "Preemption"), on one real agent with 4 CPUs
# running host processes: queues team-a and team-b of nominal 2 CPUs in cohort "pool";
# team-a fills all 4 (2 borrowed); team-b's 2-CPU job waits while team-b does not reclaim and
# while team-a's jobs are inside their minimum runtime; then team-a's two newest jobs get the
# preemption notice and SIGTERM, exit, and only then team-b's job starts (no instant with more
# than 4 CPUs of replicas, sampled from the cgroups); they are requeued and run again once
# team-b's job ends, with a Preempted event, their preemption counted, their retries unused.
# Then an elastic job of team-a is scaled in (4 -> 2 workers) rather than preempted whole.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master --metrics-listen 127.0.0.1:0  # its own port: the default one is e2e.metrics' to test
start_agent 1 --cpu 4 --memory 4Gi
wait_nodes 1

ok() { "$@" >"$tmp/cmd.out" 2>&1 || fail "$*: $(cat "$tmp/cmd.out")"; }
ok "$bin/yardctl" queue create team-a --cpu 2 --memory 2Gi --cohort pool --min-runtime 1h
ok "$bin/yardctl" queue create team-b --cpu 2 --memory 2Gi --cohort pool

# job FILE NAME QUEUE CPU [SECONDS]: a one-replica host job that runs until told to stop. On
# SIGTERM it keeps the preemption notice it was given, takes SECONDS (a checkpoint; default
# 1), notes when it exits, and exits.
job() {
  cat >"$1" <<YAML
name: $2
queue: $3
tasks:
  - name: main
    kind: container-job
    container:
      image: host
      command:
        - sh
        - -c
        - |
          trap 'cat "\$YARD_PREEMPTED_FILE" > $tmp/notice-$2.\$YARD_ATTEMPT 2>&1; sleep ${5:-1}; date +%s%N > $tmp/exit-$2; exit 143' TERM
          date +%s%N > $tmp/start-$2
          while [ ! -e $tmp/stop-$2 ]; do sleep 0.1; done
      resources: { cpu: $4, memory: 128Mi }
YAML
}
qshow() { "$bin/yardctl" queue show "$1" -o json | python3 -c "import json,sys; q=json.load(sys.stdin); print($2)"; }
reason() { jshow "$1" 'j["tasks"][0]["reason"]'; }
events() { "$bin/yardctl" job events "$1" 2>&1; }

# The most CPUs the agent's replica cgroups held at once, sampled every 20 ms (cgroup v1 cpu
# quota or v2 cpu.max, of groups with processes in them) until $tmp/sampler-stop exists.
cat >"$tmp/sampler.py" <<'PY'
import glob, os, sys, time
root, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
def groups():
    for d in glob.glob(root + "/**/", recursive=True):
        procs = os.path.join(d, "cgroup.procs")
        try:
            if not open(procs).read().strip():
                continue
            if os.path.exists(d + "cpu.max"):
                q, p = open(d + "cpu.max").read().split()
                yield 0 if q == "max" else int(q) / int(p)
            elif os.path.exists(d + "cpu.cfs_quota_us"):
                q, p = int(open(d + "cpu.cfs_quota_us").read()), int(open(d + "cpu.cfs_period_us").read())
                yield max(q, 0) / p
        except OSError:
            pass
most = 0
while not os.path.exists(stop):
    # Only groups with processes in them count: a replica's, not the agent's parent.
    most = max(most, sum(groups()))
    with open(out, "w") as f:
        f.write("%.2f\n" % most)
    time.sleep(0.02)
PY
cpu_root=""
for m in $(cgroup_mounts); do  # v1's cpu hierarchy, or a v2 mount that has the cpu controller
  if [ -e "$m/cpu.cfs_quota_us" ] || grep -qw cpu "$m/cgroup.controllers" 2>/dev/null; then cpu_root=$m; fi
done
[ -n "$cpu_root" ] || fail "no cgroup hierarchy with the cpu controller"

say "team-a uses its 2 CPUs and borrows team-b's idle 2"
for i in 1 2 3 4; do
  # a-job-4 stops at once, a-job-3 takes 2 s: meanwhile the CPU a-job-4 left is held for
  # team-b's job, and a-job-4 (requeued, and fitting there) must not take it back.
  job "$tmp/a$i.yaml" "a-job-$i" team-a 1 "$([ $i = 4 ] && echo 0 || echo 2)"
  submit "$tmp/a$i.yaml"
  wait_job "a-job-$i" Running 30
  sleep 0.2  # distinct start times: the newest are preempted first
done
[ "$(qshow team-a 'q["borrowed"]["cpuMillis"]')" = 2000 ] || fail "team-a borrowed: $("$bin/yardctl" queue show team-a -o json)"
python3 "$tmp/sampler.py" "$cpu_root/yard/$tag-1" "$tmp/most-cpus" "$tmp/sampler-stop" &
sampler=$!
pids+=("$sampler")

say "team-b does not reclaim by default: its job waits for the lent share"
job "$tmp/b1.yaml" b-job-1 team-b 2
submit "$tmp/b1.yaml"
for _ in $(seq 50); do reason b-job-1 | grep -q "cohort pool has cpu 0 of" && break; sleep 0.1; done
reason b-job-1 | grep -q "cohort pool has cpu 0 of" || fail "b-job-1 waits for: $(reason b-job-1)"

say "with --reclaim borrowed it still waits while team-a's jobs are inside their minimum runtime"
ok "$bin/yardctl" queue update team-b --reclaim borrowed
[ "$(qshow team-b 'q["reclaim"], q["preemptLowerPriority"], q["minRuntimeMs"]')" = "borrowed False 300000" ] ||
  fail "team-b preemption settings: $("$bin/yardctl" queue show team-b -o json)"
"$bin/yardctl" queue show team-b | grep -q '^Preemption: reclaim borrowed, lower priority in the queue no, min runtime 5m$' ||
  fail "queue show: $("$bin/yardctl" queue show team-b)"
sleep 6  # longer than a refused head's retry (5 s)
[ "$(jshow a-job-4 'j["job"]["state"], j["job"]["preemptions"]')" = "Running 0" ] || fail "a-job-4 preempted inside its minimum runtime"
[ "$(jshow b-job-1 'j["job"]["state"]')" = Queued ] || fail "b-job-1 started: $(jshow b-job-1 'j["job"]')"

say "once their minimum runtime is over, team-a's two newest jobs are preempted, and team-b starts after they exit"
ok "$bin/yardctl" queue update team-a --min-runtime 0
wait_job b-job-1 Running 30
for j in a-job-3 a-job-4; do
  [ "$(jshow $j 'j["job"]["preemptions"], j["job"]["preemptedBy"]')" = "1 team-b/b-job-1 (reclaim)" ] ||
    fail "$j: $(jshow $j 'j["job"]')"
  grep -qx 'YARD_PREEMPTED=1' "$tmp/notice-$j.0" 2>/dev/null || fail "$j's preemption notice: $(cat "$tmp/notice-$j.0" 2>&1)"
  grep -qx 'YARD_PREEMPTED_BY=team-b/b-job-1 (reclaim)' "$tmp/notice-$j.0" || fail "$j's notice: $(cat "$tmp/notice-$j.0")"
  [ -s "$tmp/exit-$j" ] && [ "$(cat "$tmp/exit-$j")" -lt "$(cat "$tmp/start-b-job-1")" ] ||
    fail "b-job-1 started before $j exited"
  events $j | grep -q 'Preempted.*preempted by team-b/b-job-1 (reclaim)' || fail "$j events: $(events $j)"
  "$bin/yardctl" job show $j | grep -q '^Preempted: *1 time, last by team-b/b-job-1 (reclaim)' || fail "job show $j: $("$bin/yardctl" job show $j)"
done
for j in a-job-1 a-job-2; do
  [ "$(jshow $j 'j["job"]["state"], j["job"]["preemptions"]')" = "Running 0" ] || fail "$j: $(jshow $j 'j["job"]')"
done
events b-job-1 | grep -q 'Preempting.*stopping team-a/a-job-3, team-a/a-job-4\|Preempting.*stopping team-a/a-job-4, team-a/a-job-3' ||
  fail "b-job-1 events: $(events b-job-1)"
metrics=$(sed -n 's/^metrics //p' "$tmp/master.out")
curl -s "http://$metrics/metrics" | grep -q '^yard_preemptions_total{queue="team-a",reason="reclaim"} 2$' ||
  fail "yard_preemptions_total: $(curl -s "http://$metrics/metrics" | grep yard_preemptions)"
"$bin/yardctl" audit --limit 20 | grep -q 'job.preempt' || fail "no audit record: $("$bin/yardctl" audit --limit 20)"
[ "$(jshow a-job-3 'j["job"]["state"]')" = Queued ] || fail "a-job-3 is not requeued: $(jshow a-job-3 'j["job"]')"

say "the preempted jobs run again when team-b's job ends, their retries unused"
touch "$tmp/stop-b-job-1"
wait_job b-job-1 Succeeded 30
for j in a-job-3 a-job-4; do
  wait_job $j Running 30
  [ "$(jshow $j 'j["tasks"][0]["state"] != "Failed" and j["job"]["preemptions"] == 1')" = True ] || fail "$j after: $(jshow $j 'j')"
done
# Its start file is rewritten by its second run: that was after b-job-1's start.
for _ in $(seq 50); do [ "$(cat "$tmp/start-a-job-4")" -gt "$(cat "$tmp/start-b-job-1")" ] && break; sleep 0.1; done
[ "$(cat "$tmp/start-a-job-4")" -gt "$(cat "$tmp/start-b-job-1")" ] || fail "a-job-4 ran again before b-job-1 started"
say "an elastic task shrinks towards its minimum before any whole job is taken"
for j in a-job-1 a-job-2 a-job-3 a-job-4; do touch "$tmp/stop-$j"; done
for j in a-job-1 a-job-2 a-job-3 a-job-4; do wait_job "$j" Succeeded 30; done
cat >"$tmp/el.yaml" <<YAML
name: el-job
queue: team-a
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { minReplicas: 1, maxReplicas: 4 }
    roles:
      worker:
        container:
          image: host
          command: [sh, -c, 'while [ ! -e $tmp/stop-el-job ]; do sleep 0.1; done']
          resources: { cpu: 1, memory: 128Mi }
YAML
submit "$tmp/el.yaml"
wait_job el-job Running 30
ok "$bin/yardctl" job scale el-job --task train --replicas 4
running_workers() { jshow el-job 'sum(1 for r in j["tasks"][0]["replicas"] if r["state"] == "Running")'; }
for _ in $(seq 100); do [ "$(running_workers)" = 4 ] && break; sleep 0.1; done
[ "$(running_workers)" = 4 ] || fail "el-job runs $(running_workers) workers, want 4"
# Not while its scale-out is pending (the job would be taken whole): once it is done.
for _ in $(seq 50); do events el-job | grep -q ScaledOut && break; sleep 0.1; done
events el-job | grep -q ScaledOut || fail "el-job's scale-out did not finish: $(events el-job)"
job "$tmp/b2.yaml" b-job-2 team-b 2
submit "$tmp/b2.yaml"
wait_job b-job-2 Running 30
[ "$(jshow el-job 'j["job"]["state"], j["job"]["preemptions"], j["tasks"][0]["state"]')" = "Running 0 Running" ] ||
  fail "el-job after the shrink: $(jshow el-job 'j["job"], j["tasks"][0]["state"]')"
[ "$(running_workers)" = 2 ] || fail "el-job runs $(running_workers) workers, want 2"
[ "$(jshow el-job 'sorted(r["index"] for r in j["tasks"][0]["replicas"] if r["state"] == "Running")')" = "[0, 1]" ] ||
  fail "el-job kept workers $(jshow el-job '[(r["index"], r["state"]) for r in j["tasks"][0]["replicas"]]')"
events el-job | grep -q 'ScaledIn.*4 -> 2: preempted by team-b/b-job-2 (reclaim)' || fail "el-job events: $(events el-job)"
touch "$tmp/stop-b-job-2" "$tmp/stop-el-job"
wait_job b-job-2 Succeeded 30
wait_job el-job Succeeded 60

touch "$tmp/sampler-stop"
wait "$sampler" 2>/dev/null
most=$(cat "$tmp/most-cpus" 2>/dev/null)
python3 -c "import sys; sys.exit(0 if 3.5 < float('$most') <= 4.0 else 1)" || fail "replicas held up to $most CPUs at once (want 4, never more)"

say "bad flags are refused, naming the flag, the rule and the value"
out=$("$bin/yardctl" queue update team-b --reclaim sometimes 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--reclaim' || fail "--reclaim sometimes: rc $rc: $out"
out=$("$bin/yardctl" queue update team-b --min-runtime soon 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q -- '--min-runtime: "soon"' || fail "--min-runtime soon: rc $rc: $out"
out=$("$bin/yardctl" queue create solo --cpu 1 --memory 1Gi --reclaim any 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q -- '--reclaim any: only a queue in a cohort' || fail "reclaim without cohort: rc $rc: $out"

say "the settings survive a master restart"
kill "$master"; wait "$master" 2>/dev/null
start_master --metrics-listen 127.0.0.1:0
[ "$(qshow team-b 'q["reclaim"]')" = borrowed ] || fail "after restart: $("$bin/yardctl" queue show team-b -o json)"
[ "$(jshow a-job-4 'j["job"]["preemptions"]')" = 1 ] || fail "a-job-4 preemptions after restart"

for j in a-job-1 a-job-2 a-job-3 a-job-4 b-job-1 b-job-2 el-job; do "$bin/yardctl" job delete $j >/dev/null; done
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.preempt
