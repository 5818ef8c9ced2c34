#!/usr/bin/env bash
# `yardctl job events JOB -f` and `yardctl job list --watch` against `yard-master --dev` (a
# real host replica): events are printed as they happen, not all at the end, and -f ends
# with exit 0 when the job has finished; --watch prints the table, then a row per change
# (Running, Succeeded, Deleted); -o json makes both JSON Lines (logs too); and every
# follower ends with exit 1 and a message when the master goes away.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"

cgroup_parent=""
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  if [ -n "$cgroup_parent" ]; then
    for d in /sys/fs/cgroup/*/"$cgroup_parent" /sys/fs/cgroup/"$cgroup_parent"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  fi
  [ "$fails" -gt 0 ] && tail -20 "$tmp/err"
  cleanup
}
trap stop_all EXIT
# jsonl FILE CHECK: every line of FILE is a JSON object; CHECK (Python, over the list `l`) holds.
jsonl() {
  /usr/bin/python3 - "$1" "$2" <<'PY' || fail "$1: not JSON Lines, or $2 is false: $(cat "$1")"
import json, sys
l = [json.loads(x) for x in open(sys.argv[1]).read().splitlines()]
sys.exit(0 if all(isinstance(x, dict) for x in l) and eval("(" + sys.argv[2] + ")") else 1)
PY
}
# exits PID SECONDS: waits for a background yardctl to end; sets rc to its exit status (124:
# still running).
exits() {
  for _ in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || { wait "$1"; rc=$?; return; }; sleep 0.1; done
  rc=124
}

start_master --dev
dev_agent=$(sed -n 's/.*dev cluster: agent pid \([0-9]*\).*/\1/p' "$tmp/err")
cgroup_parent=$(tr '\0' '\n' <"/proc/$dev_agent/cmdline" 2>/dev/null | sed -n '/^--cgroup-parent$/{n;p}')
eventually ' ready ' -- node list

"$bin/yardctl" job list --watch >"$tmp/watch.out" 2>"$tmp/watch.err" &
watch=$!
"$bin/yardctl" -o json job list -w >"$tmp/watch.json" 2>"$tmp/watch.json.err" &
watch_json=$!
pids+=("$watch" "$watch_json")

cat >"$tmp/a.yaml" <<'YAML'
name: watch-a
tasks:
  - name: work
    kind: container-job
    container: { image: host, command: "sh -c 'echo hello; sleep 3; echo bye'", resources: { cpu: 100m, memory: 64Mi } }
YAML
expect 0 'job watch-a submitted' -- job submit "$tmp/a.yaml"
"$bin/yardctl" job events watch-a -f >"$tmp/events.out" 2>"$tmp/events.err" &
follow=$!
pids+=("$follow")
# While the replica sleeps, what has happened so far is already printed, the end is not.
partial=0
for _ in $(seq 100); do
  grep -q 'a run started' "$tmp/events.out" && { grep -q 'every task succeeded' "$tmp/events.out" || partial=1; break; }
  sleep 0.1
done
[ "$partial" -eq 1 ] || fail "events -f printed nothing while the job ran: $(cat "$tmp/events.out")"
exits "$follow" 20
[ "$rc" -eq 0 ] || fail "events -f: exit $rc when the job ended: $(cat "$tmp/events.out" "$tmp/events.err")"
[ "$(grep -c '^TIME ' "$tmp/events.out")" -eq 1 ] || fail "events -f: one header: $(cat "$tmp/events.out")"
tail -1 "$tmp/events.out" | grep -qE ' Succeeded +every task succeeded$' || fail "events -f: last line: $(cat "$tmp/events.out")"
grep -qE 'work +run/0 +0 +Exited +exit code 0$' "$tmp/events.out" || fail "events -f: no Exited row: $(cat "$tmp/events.out")"
[ "$(grep -c 'Submitted' "$tmp/events.out")" -eq 1 ] || fail "events -f printed an event twice: $(cat "$tmp/events.out")"
[ -s "$tmp/events.err" ] && fail "events -f wrote to stderr: $(cat "$tmp/events.err")"

# A finished job: -f prints everything and ends at once; -o json: one event per line.
timeout 10 "$bin/yardctl" -o json job events watch-a --follow >"$tmp/events.json"; rc=$?
[ $rc -eq 0 ] || fail "events -f -o json of a finished job: exit $rc"
jsonl "$tmp/events.json" "l[0]['type'] == 'Submitted' and l[-1] == dict(l[-1], type='Succeeded', reason='every task succeeded') and len(l) == $(($(wc -l <"$tmp/events.out") - 1))"
timeout 10 "$bin/yardctl" logs watch-a -o json >"$tmp/logs.json"; rc=$?
[ $rc -eq 0 ] || fail "logs -o json: exit $rc"
jsonl "$tmp/logs.json" "l == [{'replica': 'work/run/0', 'line': 'hello'}, {'replica': 'work/run/0', 'line': 'bye'}]"

# The watchers poll once a second: give them the time to see Succeeded before the delete
# (on a busy machine the window between the end and the delete can be shorter than a poll).
for _ in $(seq 50); do
  grep -qE '^watch-a +default +Succeeded' "$tmp/watch.out" && grep -q '"state":"Succeeded"' "$tmp/watch.json" && break
  sleep 0.1
done
# job list: WAITED and ELAPSED (Slurm's M:SS) once the job has run and ended.
expect 0 '^watch-a +default +Succeeded +1/1 +0 +[0-9-]+ [0-9:]+Z +admin +[0-9]+:[0-9]{2} +[0-9]+:[0-9]{2}$' -- job list
expect 0 'deleted' -- job delete watch-a --wait --timeout 20
for _ in $(seq 50); do grep -q 'Deleted' "$tmp/watch.out" && grep -q DELETED "$tmp/watch.json" && break; sleep 0.1; done
head -1 "$tmp/watch.out" | grep -qE '^NAME +QUEUE +STATE +TASKS +PRIORITY +SUBMITTED +OWNER +WAITED +ELAPSED$' || fail "--watch: no header: $(cat "$tmp/watch.out")"
grep -qE '^watch-a +default +(Queued|Running) ' "$tmp/watch.out" || fail "--watch: no row for the new job: $(cat "$tmp/watch.out")"
grep -qE '^watch-a +default +Succeeded +1/1 ' "$tmp/watch.out" || fail "--watch: no Succeeded row: $(cat "$tmp/watch.out")"
# The job ran 3 s: its clocks (WAITED, ELAPSED) changed each second, the job itself did not.
[ "$(grep -cE '^watch-a +default +Running ' "$tmp/watch.out")" -le 1 ] || fail "--watch: a row per second: $(cat "$tmp/watch.out")"
tail -1 "$tmp/watch.out" | grep -qE '^watch-a +default +Deleted ' || fail "--watch: no Deleted row last: $(cat "$tmp/watch.out")"
jsonl "$tmp/watch.json" "l[0]['type'] == 'ADDED' and l[0]['job']['name'] == 'watch-a' and 'Succeeded' in [x['job']['state'] for x in l if x['type'] == 'MODIFIED'] and l[-1]['type'] == 'DELETED'"

# The master goes away while jobs are followed: each follower ends, exit 1, saying so.
cat >"$tmp/q.yaml" <<'YAML'
name: watch-q
tasks:
  - name: work
    kind: container-job
    container: { image: host, command: "true", resources: { cpu: 1000, memory: 64Mi } }
YAML
expect 0 'submitted' -- job submit "$tmp/q.yaml"
"$bin/yardctl" job events watch-q -f >"$tmp/q.out" 2>"$tmp/q.err" &
qfollow=$!
"$bin/yardctl" job events watch-q -f -o json >"$tmp/q.json" 2>"$tmp/q.json.err" &
qfollow_json=$!
pids+=("$qfollow" "$qfollow_json")
for _ in $(seq 50); do grep -q Queued "$tmp/q.out" && grep -q Queued "$tmp/q.json" && break; sleep 0.1; done
kill -TERM "$master"; wait "$master" 2>/dev/null
for p in "$watch" "$qfollow"; do
  exits "$p" 5
  [ "$rc" -eq 1 ] || fail "a text follower: exit $rc after the master went away"
done
for p in "$watch_json" "$qfollow_json"; do
  exits "$p" 5
  [ "$rc" -eq 1 ] || fail "a JSON follower: exit $rc after the master went away"
done
grep -qE "^yardctl: (cannot reach|lost the connection to) the master at $addr" "$tmp/watch.err" || fail "--watch: no message: $(cat "$tmp/watch.err")"
grep -qE "^yardctl: (cannot reach|lost the connection to) the master at $addr" "$tmp/q.err" || fail "events -f: no message: $(cat "$tmp/q.err")"
jsonl "$tmp/watch.json" "set(l[-1]) == {'error'} and 'the master at $addr' in l[-1]['error']['message']"
jsonl "$tmp/q.json" "l[0]['type'] == 'Submitted' and set(l[-1]) == {'error'}"
[ -s "$tmp/watch.json.err" ] && fail "--watch -o json wrote to stderr: $(cat "$tmp/watch.json.err")"

finish "cli.watch"
