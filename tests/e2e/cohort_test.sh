#!/usr/bin/env bash
# Cohorts end to end (docs/scheduler.md, "Cohorts"), on one real agent with 4 CPUs running host
# processes: two queues of nominal 2 CPUs in cohort "pool"; team-a fills all 4 (2 borrowed);
# queue show says what is borrowed, lent and free; team-b's job waits for its lent share with
# the cohort named in "why pending", and starts once a team-a job ends; a lend limit keeps a
# queue's share its own; bad flags are refused naming the flag, the rule and the value.
bin=$1
source "$(dirname "$0")/cluster.sh"

# Fair share with a memory (docs/scheduler.md, "Fair share"): past usage counts, halved hourly.
printf '[scheduler]\nfairshare_half_life = "1h"\n' >>"$tmp/master.toml"
start_master --metrics-listen 127.0.0.1:0  # its own port: the default one is e2e.metrics' to test
start_agent 1 --cpu 4 --memory 4Gi
wait_nodes 1

ok() { "$@" >"$tmp/cmd.out" 2>&1 || fail "$*: $(cat "$tmp/cmd.out")"; }
ok "$bin/yardctl" queue create team-a --cpu 2 --memory 2Gi --cohort pool
ok "$bin/yardctl" queue create team-b --cpu 2 --memory 2Gi --cohort pool

# job FILE NAME QUEUE: a one-replica host job of 1 CPU that runs until told to stop.
job() {
  cat >"$1" <<YAML
name: $2
queue: $3
tasks:
  - name: main
    kind: container-job
    container:
      image: host
      command: [sh, -c, 'while [ ! -e $tmp/stop-$2 ]; do sleep 0.1; done']
      resources: { cpu: 1, memory: 128Mi }
YAML
}
qshow() { "$bin/yardctl" queue show "$1" -o json | python3 -c "import json,sys; q=json.load(sys.stdin); print($2)"; }
reason() { jshow "$1" 'j["tasks"][0]["reason"]'; }

say "team-a uses its 2 CPUs and borrows team-b's idle 2"
for i in 1 2 3 4; do
  job "$tmp/a$i.yaml" "a-job-$i" team-a
  submit "$tmp/a$i.yaml"
done
for i in 1 2 3 4; do wait_job "a-job-$i" Running 30; done
[ "$(qshow team-a 'q["borrowed"]["cpuMillis"]')" = 2000 ] || fail "team-a borrowed: $("$bin/yardctl" queue show team-a -o json)"
[ "$(qshow team-b 'q["lent"]["cpuMillis"]')" = 2000 ] || fail "team-b lent: $("$bin/yardctl" queue show team-b -o json)"
[ "$(qshow team-a 'q["nominal"]["cpuMillis"], q["free"]["cpuMillis"], q["cohort"]')" = "2000 0 pool" ] ||
  fail "team-a nominal/free/cohort: $("$bin/yardctl" queue show team-a -o json)"
"$bin/yardctl" queue show team-a | grep -q '^  borrowed: *cpu 2, ' || fail "queue show: $("$bin/yardctl" queue show team-a)"
"$bin/yardctl" queue list | grep -Eq '^team-b .* pool +[0-9.]+%$' || fail "queue list COHORT: $("$bin/yardctl" queue list)"
# /metrics: what each member borrows and lends.
metrics=$(sed -n 's/^metrics //p' "$tmp/master.out")
m=$(curl -s "http://$metrics/metrics")
echo "$m" | grep -q '^yard_queue_borrowed{queue="team-a",resource="cpu"} 2$' || fail "yard_queue_borrowed: $(echo "$m" | grep yard_queue_)"
echo "$m" | grep -q '^yard_queue_lent{queue="team-b",resource="cpu"} 2$' || fail "yard_queue_lent: $(echo "$m" | grep yard_queue_lent)"

say "team-b waits for what it lent, with the cohort named, and runs once team-a gives one back"
job "$tmp/b1.yaml" b-job-1 team-b
submit "$tmp/b1.yaml"
for _ in $(seq 50); do reason b-job-1 | grep -q "cohort pool has cpu 0 of 4 free to lend, needs 1" && break; sleep 0.1; done
reason b-job-1 | grep -q "cohort pool has cpu 0 of 4 free to lend, needs 1" || fail "b-job-1 waits for: $(reason b-job-1)"
[ "$(jshow b-job-1 'j["job"]["state"]')" = Queued ] || fail "b-job-1 is not queued"
touch "$tmp/stop-a-job-4"
wait_job a-job-4 Succeeded 30
wait_job b-job-1 Running 30
# Never more than the 4 CPUs: 3 of team-a and 1 of team-b.
[ "$(qshow team-a 'q["used"]["cpuMillis"]')" = 3000 ] || fail "team-a uses $(qshow team-a 'q["used"]')"

say "fair share remembers what team-a used (its ended job's usage row)"
for _ in $(seq 100); do [ "$(qshow team-a 'q["pastShare"] > 0')" = True ] && break; sleep 0.1; done
[ "$(qshow team-a 'q["pastShare"] > 0 and q["share"] > q["pastShare"]')" = True ] ||
  fail "team-a's fair share: $("$bin/yardctl" queue show team-a -o json)"
[ "$(qshow team-b 'q["pastShare"]')" = 0.0 ] || fail "team-b's past share: $(qshow team-b 'q["pastShare"]')"

say "a lend limit keeps a queue's share its own"
ok "$bin/yardctl" queue create team-c --cpu 1 --memory 1Gi --cohort pool --lend-limit cpu=0
[ "$(qshow team-c 'q["lendLimit"]["cpuMillis"]')" = 0 ] || fail "team-c lendLimit: $("$bin/yardctl" queue show team-c -o json)"
touch "$tmp/stop-a-job-3"
wait_job a-job-3 Succeeded 30
job "$tmp/c1.yaml" c-job-1 team-c
submit "$tmp/c1.yaml"
wait_job c-job-1 Running 30  # its guaranteed CPU, though team-a still borrows

say "bad flags are refused, naming the flag, the rule and the value"
out=$("$bin/yardctl" queue update team-a --borrow-limit cpu=lots 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q -- '--borrow-limit: cpu:' || fail "--borrow-limit cpu=lots: rc $rc: $out"
out=$("$bin/yardctl" queue update team-a --lend-limit disks=2 2>&1); rc=$?
[ "$rc" -ne 0 ] && echo "$out" | grep -q -- '--lend-limit: "disks=2" must be cpu=N' || fail "--lend-limit disks=2: rc $rc: $out"
out=$("$bin/yardctl" queue create solo --cpu 1 --memory 1Gi --borrow-limit cpu=1 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q -- '--borrow-limit: only a queue in a cohort' || fail "limit without cohort: rc $rc: $out"
out=$("$bin/yardctl" queue update team-a --cohort 'Bad Name' 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q -- '--cohort: cohort name' || fail "--cohort 'Bad Name': rc $rc: $out"
ok "$bin/yardctl" queue update team-a --borrow-limit none
[ "$(qshow team-a 'q["borrowLimit"]')" = None ] || fail "borrow limit not removed"

say "it survives a master restart"
kill "$master"; wait "$master" 2>/dev/null
start_master --metrics-listen 127.0.0.1:0
[ "$(qshow team-c 'q["cohort"], q["lendLimit"]["cpuMillis"]')" = "pool 0" ] || fail "after restart: $("$bin/yardctl" queue show team-c -o json)"
[ "$(qshow team-a 'q["pastShare"] > 0')" = True ] || fail "fair share forgot team-a's past at the restart"

for f in a-job-1 a-job-2 b-job-1 c-job-1; do touch "$tmp/stop-$f"; done
for j in a-job-1 a-job-2 b-job-1 c-job-1; do wait_job "$j" Succeeded 30; done
finish e2e.cohort
