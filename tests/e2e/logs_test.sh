#!/usr/bin/env bash
# Logs outlive replicas (docs/reliability.md): agents ship an ended replica's output to the
# master's archive before removing its directory, so `yardctl logs` still prints it after
# `cleanup: all`, after `yardctl job delete`, after the node is lost, and when the agent
# was killed before it had shipped (its restart ships). The archive keeps the last
# log_archive_max_bytes of a log, after a line saying how much was dropped.
bin=$1
source "$(dirname "$0")/cluster.sh"

echo 'log_archive_max_bytes = "4Ki"' >>"$tmp/master.toml"
start_master
start_agent 1
wait_nodes 1

# job NAME SCRIPT [CLEANUP]: a one-replica pytorch task on the host running sh SCRIPT.
job() {
  cat >"$tmp/$1.yaml" <<YAML
name: $1
tasks:
  - name: main
    kind: pytorch
    advanced: { cleanup: ${3:-all} }
    roles:
      master:
        replicas: 1
        container:
          image: host
          resources: { cpu: 100m, memory: 32Mi }
          command: sh
          args: [ "$2" ]
YAML
  submit "$tmp/$1.yaml"
}
shipped() { grep -c "log archived on the master" "$tmp/agent1.err"; }  # the agent's log, across restarts
replica_dirs() { find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null; }
wait_removed() {
  for _ in $(seq 150); do [ -z "$(replica_dirs)" ] && return 0; sleep 0.1; done
  fail "$1: the agent kept the replica directory: $(replica_dirs)"
}
# logs_ok NAME WHAT ARGS...: yardctl logs prints lines 101-200 and the stderr line after the
# dropped-bytes marker, and says nothing was unreadable.
logs_ok() {
  local name=$1 what=$2
  shift 2
  local out err
  out=$(timeout 20 "$bin/yardctl" logs "$name" "$@" 2>"$tmp/logs.err")
  err=$(cat "$tmp/logs.err")
  echo "$out" | head -1 | grep -qE '^\[… [0-9]+ bytes dropped …\]$' || fail "$what: no marker first: $(echo "$out" | head -3)"
  echo "$out" | grep -qx 'line 200 of the output of a failing run' || fail "$what: no last line: $(echo "$out" | tail -3)"
  echo "$out" | grep -qx 'to stderr' || fail "$what: no stderr line: $(echo "$out" | tail -3)"
  echo "$out" | grep -qx 'line 1 of the output of a failing run' && fail "$what: the start was not dropped"
  [ -z "$err" ] || fail "$what: yardctl said: $err"
}
# 200 lines of about 38 bytes: more than the 4 KiB the archive keeps.
cat >"$tmp/fail.sh" <<'SH'
for i in $(seq 200); do echo "line $i of the output of a failing run"; done
echo to stderr >&2
exit 3
SH

say "cleanup: all removes the replica at once; its output is read from the archive"
job e2e-fail "$tmp/fail.sh"
wait_job e2e-fail Failed 30
wait_removed e2e-fail
[ "$(shipped)" -eq 1 ] || fail "the agent did not say it archived the log"
logs_ok e2e-fail "after cleanup: all" --task main --role master --index 0
logs_ok e2e-fail "logs -f of an ended replica" -f --task main --role master --index 0
out=$("$bin/yardctl" logs e2e-fail --tail 2 2>&1)
[ "$out" = "$(printf 'main/master/0 | line 200 of the output of a failing run\nmain/master/0 | to stderr')" ] ||
  fail "--tail 2 from the archive: $out"

say "after yardctl job delete, until log_retention"
"$bin/yardctl" job delete e2e-fail >/dev/null || fail "job delete"
logs_ok e2e-fail "after job delete" --task main --role master --index 0
out=$("$bin/yardctl" logs e2e-fail --task nope 2>&1) && fail "a filter that matches nothing succeeded: $out"
out=$("$bin/yardctl" logs never-was 2>&1)
[ "$out" = "yardctl: job never-was does not exist" ] || fail "an unknown job: $out"

say "an agent killed before it shipped a log ships it when it restarts"
printf 'while [ ! -f %s ]; do sleep 0.1; done\nexec sh %s\n' "$tmp/go" "$tmp/fail.sh" >"$tmp/resume.sh"
job e2e-resume "$tmp/resume.sh"
for _ in $(seq 100); do [ "$(jshow e2e-resume 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
kill -9 "$master"  # shipping cannot happen now
wait "$master" 2>/dev/null
touch "$tmp/go"
dir=$(replica_dirs)
for _ in $(seq 100); do grep -q . "$dir/status" 2>/dev/null && break; sleep 0.1; done
grep -q . "$dir/status" 2>/dev/null || fail "the replica did not end: $(ls "$dir")"
sleep 1.5  # the shipper tries and fails
kill -9 "${agent_pid[1]}"
wait "${agent_pid[1]}" 2>/dev/null
[ -e "$dir/log-archived" ] && fail "the log was archived with the master down"
[ "$(shipped)" -eq 1 ] || fail "a log was shipped with the master down"
start_master
start_agent 1
wait_job e2e-resume Failed 30
wait_removed e2e-resume
[ "$(shipped)" -ge 2 ] || fail "the restarted agent did not ship: $(tail -5 "$tmp/agent1.err")"
logs_ok e2e-resume "after the agent restart" --task main --role master --index 0

say "a lost node: what it had shipped"
job e2e-lost "$tmp/fail.sh" running
wait_job e2e-lost Failed 30
for _ in $(seq 100); do [ "$(shipped)" -ge 3 ] && break; sleep 0.1; done
[ "$(shipped)" -ge 3 ] || fail "e2e-lost was not shipped"
[ -n "$(replica_dirs)" ] || fail "cleanup: running removed the replica"
kill -9 "${agent_pid[1]}"
wait "${agent_pid[1]}" 2>/dev/null
for _ in $(seq 150); do "$bin/yardctl" node list 2>/dev/null | grep -q ' down ' && break; sleep 0.1; done
"$bin/yardctl" node list | grep -q ' down ' || fail "the node did not go down"
logs_ok e2e-lost "after the node was lost" --task main --role master --index 0

say "a running replica's output.log holds at most replica_log_max_bytes of the node's disk"
# node-1 is down: the flood runs on node-2, whose bound is 1Mi. 6 MB of lines, then it runs on.
start_agent 2 --replica-log-max-bytes 1Mi
for _ in $(seq 100); do "$bin/yardctl" node list 2>/dev/null | grep -q '^node-2 .* ready ' && break; sleep 0.1; done
cat >"$tmp/flood.sh" <<'SH'
seq 0 59999 | sed 's/.*/flood line & ......................................................................../'
echo flood-done
sleep 120
SH
job e2e-flood "$tmp/flood.sh"
for _ in $(seq 150); do grep -q "main/master/0 attempt 0 (replica .*): dropped the oldest" "$tmp/agent2.err" 2>/dev/null && break; sleep 0.1; done
grep -q "main/master/0 attempt 0 (replica .*): dropped the oldest" "$tmp/agent2.err" || fail "the agent dropped nothing: $(tail -5 "$tmp/agent2.err")"
for _ in $(seq 100); do "$bin/yardctl" logs e2e-flood 2>/dev/null | grep -q 'flood-done' && break; sleep 0.1; done
dir=$(grep -l flood-done "$tmp"/agent2/replicas/*/output.log | head -1)
dir=${dir%/output.log}
[ -n "$dir" ] || fail "no replica directory with the flood's output"
held=$(du -k "$dir/output.log" | cut -f1)
[ "$held" -le 1100 ] || fail "output.log holds ${held}K of disk, the bound is 1Mi"
[ "$(stat -c %s "$dir/output.log")" -gt 5000000 ] || fail "output.log's size (offsets) changed: $(stat -c %s "$dir/output.log")"
out=$(timeout 20 "$bin/yardctl" logs e2e-flood 2>&1)
echo "$out" | head -1 | grep -qE '^main/master/0 \| \[yard: [0-9]+ bytes of earlier output were dropped on the node' ||
  fail "logs of a capped log: no notice first: $(echo "$out" | head -2)"
echo "$out" | tail -1 | grep -qx 'main/master/0 | flood-done' || fail "logs of a capped log: no last line: $(echo "$out" | tail -2)"
echo "$out" | grep -q 'flood line 0 ' && fail "logs of a capped log printed the dropped start"
timeout 20 "$bin/yardctl" logs e2e-flood >"$tmp/flood.out" 2>&1
[ "$(tr -cd '\000' <"$tmp/flood.out" | wc -c)" = 0 ] || fail "logs of a capped log printed the hole's zeros"
out=$(timeout 20 "$bin/yardctl" logs e2e-flood --tail 1 2>&1)
[ "$out" = "main/master/0 | flood-done" ] || fail "--tail 1 of a capped log: $out"
"$bin/yardctl" job cancel e2e-flood >/dev/null

kill_replicas
finish e2e.logs
