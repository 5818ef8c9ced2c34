#!/usr/bin/env bash
# kill -9 the master during a submission storm (16 concurrent clients), restart it, and
# check that every job whose submission was acknowledged is present and whole (its tasks
# and first events written with it), and that no job is half-written.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"

start_master
# The admin's API token (the master's first start wrote it), in the environment, never an argument.
YARD_TOKEN=${YARD_TOKEN:-$(cat "$tmp/data/admin.token")} \
  "$bin/yard-submit-storm" --master "$addr" --ca "$YARD_CA" --clients 16 --jobs 400 --prefix crash >"$tmp/acked" 2>"$tmp/storm.err" &
storm=$!
pids+=("$storm")
# Let some submissions land, then pull the plug mid-storm.
for _ in $(seq 100); do [ "$(wc -l <"$tmp/acked")" -ge 300 ] && break; sleep 0.05; done
kill -9 "$master"
wait "$storm" 2>/dev/null
acked=$(sort -u "$tmp/acked" | wc -l)
[ "$acked" -ge 300 ] || fail "only $acked submissions were acknowledged before the kill"
[ "$acked" -lt 6400 ] || fail "the storm finished before the kill; the test proves nothing"

start_master
"$bin/yardctl" --master "$addr" -o json job list >"$tmp/list.json" || fail "job list after restart failed"
python3 - "$tmp/acked" "$tmp/list.json" <<'PY' || fail "acknowledged jobs missing or not whole"
import json, sys
acked = set(open(sys.argv[1]).read().split())
jobs = {j["name"]: j for j in json.load(open(sys.argv[2]))}
missing = acked - set(jobs)
assert not missing, f"{len(missing)} acknowledged jobs lost, e.g. {sorted(missing)[:3]}"
for name, j in jobs.items():
    assert j["tasksTotal"] == 1, f"{name} is half-written: {j}"
    assert j["state"] == "Queued", f"{name}: {j['state']}"
print(f"{len(acked)} acknowledged, {len(jobs)} present after kill -9 and restart")
PY
# Every present job can be shown with its task and has its submission events.
first=$(sort "$tmp/acked" | head -1)
"$bin/yardctl" --master "$addr" job show "$first" | grep -qE '^main +container-job +Queued' || fail "job show $first"
"$bin/yardctl" --master "$addr" job events "$first" | grep -q 'Submitted' || fail "events of $first"

finish "crash test"
