#!/usr/bin/env bash
# The README's "Running a master" and "Running agents" commands, exactly as written (only
# the build/bin prefix is pointed at this build and /tmp paths at a scratch directory): the
# agent joins with a token from `yardctl token create`, the DAG they submit runs on it to
# Succeeded. A master without a static join token says at start how agents join instead.
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pids=()
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cleanup() {
  for f in "$tmp"/yard-agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for p in $(pgrep -f "$tmp/yard" || true); do kill -9 "$p" 2>/dev/null; done
  sleep 0.3
  rm -rf "$tmp"
}
trap cleanup EXIT

# The shell blocks of the two sections, with this build's binaries and scratch paths.
section() {
  awk -v want="$1" '$0 == want {on = 1; next} on && /^```sh/ {inblock = 1; next}
                    inblock && /^```/ {exit} inblock {print}' "$root/README.md" |
    sed -e "s#build/bin/#$bin/#g" -e "s#/tmp/yard#$tmp/yard#g"
}
master_cmds=$(section "## Running a master")
agent_cmds=$(section "## Running agents")
[ -n "$master_cmds" ] && [ -n "$agent_cmds" ] || { echo "FAIL: README sections not found"; exit 1; }
# The master itself warns against a join token on its command line: the README does not put one there.
echo "$master_cmds" | grep -q -- '--join-token' && fail "the README's master has --join-token on its command line"
echo "$agent_cmds" | grep -q 'YARD_JOIN_TOKEN=$(.*yardctl token create' ||
  fail "the README's agent does not join with a token from yardctl token create"

# Every job the README's commands name (job show/events/top/scale/cancel, logs) is one the
# README submits (the `name:` of a spec it passes to `job submit`).
python3 - "$root" <<'PY' || fail "the README names a job it never submits"
import re, sys
root = sys.argv[1]
text = open(root + "/README.md").read()
submitted = set()
for f in re.findall(r"yardctl job submit (configs/\S+\.yaml)", text):
    m = re.search(r"^name:\s*(\S+)", open(root + "/" + f).read(), re.M)
    if m: submitted.add(m.group(1))
named = set(re.findall(r"yardctl (?:job (?:show|events|top|scale|cancel|delete)|logs) ([a-z][a-z0-9-]+)", text))
missing = sorted(named - submitted - {"JOB", "NAME"})
if missing: print("named but never submitted:", missing, "submitted:", sorted(submitted))
sys.exit(1 if missing else 0)
PY

cd "$root"
# Run each block as one script, as a reader pasting it would; the daemons stay in the background.
(
  set -e
  eval "$(echo "$master_cmds" | sed -n '1,2p')"  # the master (a continued line)
  echo $! >"$tmp/master.pid"
) >"$tmp/master-block.out" 2>&1
sleep 1
export YARD_MASTER=127.0.0.1:7700
while IFS= read -r line; do
  case "$line" in *"yard-master"*|*"--agent-listen"*|"") continue ;; esac
  cmd=${line%%#*}
  case "$cmd" in *"logs "*|*"job top"*|*"job scale"*|*"node top"*) continue ;; esac  # need running replicas
  eval "$cmd" >"$tmp/cmd.out" 2>&1 || fail "README command failed: $cmd: $(cat "$tmp/cmd.out")"
done <<<"$master_cmds"
(eval "$(echo "$agent_cmds" | sed -n '1,3p')") >"$tmp/agent.out" 2>&1  # the token, then the agent
for _ in $(seq 100); do "$bin/yardctl" node list 2>/dev/null | grep -q '^node-1 .* ready' && break; sleep 0.1; done
"$bin/yardctl" node list | grep -q '^node-1 .* ready' || fail "the README's agent did not join: $(cat "$tmp/agent.out")"
state=""
for _ in $(seq 240); do
  state=$("$bin/yardctl" job show resnet-train -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])' 2>/dev/null)
  case "$state" in Succeeded|Failed|Cancelled) break ;; esac
  sleep 0.5
done
[ "$state" = Succeeded ] || fail "the README's DAG ended ${state:-?}: $("$bin/yardctl" job show resnet-train 2>&1)"
"$bin/yardctl" job cancel resnet-train >/dev/null 2>&1
kill "$(cat "$tmp/master.pid")" 2>/dev/null

# A master started without a static token says at once how agents join (and does not
# claim that none can: the README's agent just joined such a master).
"$bin/yard-master" --data-dir "$tmp/yard-nojoin" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >/dev/null 2>"$tmp/nojoin.err" &
nojoin=$!
for _ in $(seq 50); do grep -q 'no static join token' "$tmp/nojoin.err" && break; sleep 0.1; done
kill "$nojoin" 2>/dev/null
wait "$nojoin" 2>/dev/null
grep -q 'no static join token (join_token in the config): agents join with a token from `yardctl token create`' "$tmp/nojoin.err" ||
  fail "no note without a join token: $(cat "$tmp/nojoin.err")"
grep -q 'no agent can join' "$tmp/nojoin.err" && fail "the master still says no agent can join: $(cat "$tmp/nojoin.err")"

[ "$fails" -eq 0 ] && echo "readme: all checks passed"
exit $((fails > 0))
