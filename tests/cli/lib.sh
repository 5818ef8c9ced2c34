# Shared by the CLI tests: a temp dir, processes killed on exit (by PID), failure counting,
# a master on loopback with port 0, and yardctl assertions. Source it after setting $bin.
tmp=$(mktemp -d)
export YARD_CONFIG="$tmp/yard-client.toml"  # yardctl's config file: the test's own, never ~/.config
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# start_master [yard-master args...]: starts a master on $tmp/data with both APIs on free
# loopback ports; sets $master (pid), $addr and YARD_MASTER (client API) and $agents.
start_master() {
  : >"$tmp/out"
  "$bin/yard-master" --data-dir "$tmp/data" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 "$@" \
    >"$tmp/out" 2>>"$tmp/err" &
  master=$!
  pids+=("$master")
  for _ in $(seq 100); do grep -q '^agents ' "$tmp/out" && break; sleep 0.1; done
  addr=$(sed -n 's/^listening //p' "$tmp/out")
  agents=$(sed -n 's/^agents //p' "$tmp/out")
  [ -n "$addr" ] || { echo "master did not start: $(cat "$tmp/err")"; exit 1; }
  export YARD_MASTER=$addr
  export YARD_CA="$tmp/data/ca.pem"  # yardctl verifies the master with the cluster CA
  YARD_TOKEN=$(cat "$tmp/data/admin.token")  # the admin's API token, made at the first start
  export YARD_TOKEN
}

# expect RC PATTERN -- yardctl args...: exit status RC and output (stdout+stderr) matching.
expect() {
  local want=$1 pattern=$2; shift 3
  out=$("$bin/yardctl" "$@" 2>&1); local rc=$?
  [ "$rc" -eq "$want" ] || fail "yardctl $*: exit $rc, want $want: $out"
  echo "$out" | grep -qE -- "$pattern" || fail "yardctl $*: output does not match /$pattern/: $out"
}

# eventually PATTERN -- yardctl args...: the output matches within 10 s.
eventually() {
  local pattern=$1; shift 2
  for _ in $(seq 50); do "$bin/yardctl" "$@" 2>&1 | grep -qE -- "$pattern" && return 0; sleep 0.2; done
  fail "yardctl $*: never matched /$pattern/: $("$bin/yardctl" "$@" 2>&1)"
}

# finish NAME: prints the verdict and exits with it.
finish() {
  [ "$fails" -eq 0 ] && echo "$1: all checks passed"
  exit $((fails > 0))
}
