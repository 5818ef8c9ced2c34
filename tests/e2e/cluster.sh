# A real cluster on loopback for end-to-end tests: one yard-master and yard-agents on
# 127.0.0.2, 127.0.0.3, ... each with its own port range, state directory and cgroup
# parent. Everything started is stopped by PID on exit, replicas included (through the
# pid files their shims keep), and their cgroups removed. Source it after setting $bin.
set -u
tmp=$(mktemp -d)
export YARD_CONFIG="$tmp/yard-client.toml"  # yardctl's config file: the test's own, never ~/.config
pids=()
tag="e2e$$"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
say() { echo "--- $*"; }

kill_replicas() {  # every workload and shim any agent of this test started
  for f in "$tmp"/agent*/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for f in "$tmp"/agent*/replicas/*/shim.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
}
# Every cgroup mount point (v1 hierarchies, a hybrid host's cgroup2, or the one v2 mount).
cgroup_mounts() {  # the file system type follows the " - " that ends the optional fields
  awk '{ for (i = 7; i < NF; i++) if ($i == "-") break; if ($(i+1) == "cgroup" || $(i+1) == "cgroup2") print $5 }' /proc/self/mountinfo
}
remove_cgroups() {
  local m d
  for d in $(for m in $(cgroup_mounts); do echo "$m"/yard/"$tag"-*; done); do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
}
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  kill_replicas
  sleep 0.2
  remove_cgroups
  if [ "$fails" -gt 0 ]; then
    for f in "$tmp"/*.err; do echo "=== $f"; tail -${E2E_LOG_LINES:-40} "$f"; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_log() {  # wait_log FILE PATTERN SECONDS: a line matching PATTERN is in FILE within SECONDS
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# start_master [args...]: a master with a fixed agent port (so agents find it again after a
# master restart); sets $master, $agents and YARD_MASTER.
agent_port=$(free_port)
# Datasets only under the test's own directory (docs/security.md, "Dataset roots").
printf 'join_token = "e2e-token"\nheartbeat_timeout = "6s"\nstop_grace = "3s"\ndataset_roots = ["%s"]\n' "$tmp" >"$tmp/master.toml"
start_master() {
  : >"$tmp/master.out"
  "$bin/yard-master" --config "$tmp/master.toml" --data-dir "$tmp/master" --listen 127.0.0.1:0 \
    --agent-listen "127.0.0.1:$agent_port" "$@" >"$tmp/master.out" 2>>"$tmp/master.err" &
  master=$!
  pids+=("$master")
  for _ in $(seq 100); do grep -q '^agents ' "$tmp/master.out" && break; sleep 0.1; done
  agents=$(sed -n 's/^agents //p' "$tmp/master.out")
  [ -n "$agents" ] || { echo "master did not start: $(cat "$tmp/master.err")"; exit 1; }
  YARD_MASTER=$(sed -n 's/^listening //p' "$tmp/master.out")
  export YARD_MASTER
  export YARD_CA="$tmp/master/ca.pem"  # yardctl verifies the master with the cluster CA
  YARD_TOKEN=$(cat "$tmp/master/admin.token")  # the admin's API token, made at the first start
  export YARD_TOKEN
}

# start_agent N [args...]: agent N on 127.0.0.(N+1), ports 31N00-31N99; sets agent_pid[N].
# Its --master is $AGENT_MASTER when set (a list of addresses), else the master's agent port.
declare -A agent_pid
start_agent() {
  local n=$1; shift
  : >"$tmp/agent$n.out"
  # The join token from the environment, never the command line (docs/security.md).
  YARD_JOIN_TOKEN=e2e-token "$bin/yard-agent" --master "${AGENT_MASTER:-127.0.0.1:$agent_port}" --ca "$tmp/master/ca.pem" --name "node-$n" \
    --address "127.0.0.$((n + 1))" --data-dir "$tmp/agent$n" --port-range "31${n}00-31${n}99" \
    --cgroup-parent "yard/$tag-$n" --allow-host-tasks "$@" >"$tmp/agent$n.out" 2>>"$tmp/agent$n.err" &
  agent_pid[$n]=$!
  pids+=("$!")
}
wait_nodes() {  # wait_nodes COUNT: that many nodes ready
  for _ in $(seq 100); do
    [ "$("$bin/yardctl" node list 2>/dev/null | grep -c ' ready ')" -ge "$1" ] && return 0
    sleep 0.1
  done
  fail "fewer than $1 nodes became ready: $("$bin/yardctl" node list 2>&1)"
}

# wait_job NAME STATE [SECONDS]: the job reaches STATE (fails if it ends in another state).
wait_job() {
  local name=$1 want=$2 secs=${3:-30} state=""
  for _ in $(seq $((secs * 10))); do
    state=$("$bin/yardctl" job show "$name" -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])' 2>/dev/null)
    [ "$state" = "$want" ] && return 0
    case "$state" in Succeeded|Failed|Cancelled) break ;; esac
    sleep 0.1
  done
  fail "job $name: state ${state:-?}, want $want"
  "$bin/yardctl" job show "$name"
  "$bin/yardctl" job events "$name"
  return 1
}

# jq-like access to `yardctl job show NAME -o json`: jshow NAME PYTHON-EXPR (j = the JSON)
jshow() { "$bin/yardctl" job show "$1" -o json | python3 -c "import json,sys; j=json.load(sys.stdin); print($2)"; }

submit() {  # submit FILE
  "$bin/yardctl" job submit "$1" >/dev/null 2>"$tmp/submit.err" || fail "submit $1: $(cat "$tmp/submit.err")"
}

# no_leftovers: no replica directories and no replica cgroups remain on any agent, in any
# cgroup hierarchy (runc makes a container's group in all of them, not only in Yard's four).
no_leftovers() {
  local left m
  left=$(find "$tmp"/agent*/replicas -mindepth 1 -maxdepth 1 2>/dev/null)
  [ -z "$left" ] || fail "replica directories left behind: $left"
  left=$(for m in $(cgroup_mounts); do find "$m"/yard/"$tag"-* -mindepth 1 -type d 2>/dev/null; done)
  [ -z "$left" ] || fail "replica cgroups left behind: $left"
}

finish() {
  [ "$fails" -eq 0 ] && echo "$1: all checks passed"
  exit $((fails > 0))
}
