# Start and stop `yard-master --dev` (a master and one agent on loopback) for scripts:
# the demo, the examples test and the benchmarks. Source it, then:
#   start_dev_cluster BIN DATA_DIR [MASTER FLAGS...]  # sets dev_master, dev_agent (pids), YARD_MASTER
#   stop_dev_cluster                 # SIGTERM; the master stops its agent
start_dev_cluster() {
  local bin=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  # yard-master --dev writes yardctl's entry for it (docs/yardctl.md): into the cluster's own
  # directory, never the user's ~/.config/yard/config.toml.
  export YARD_CONFIG="$dir/yard-client.toml"
  "$bin/yard-master" --dev --data-dir "$dir" --listen 127.0.0.1:0 "$@" >"$dir/master.out" 2>"$dir/master.log" &
  dev_master=$!
  for _ in $(seq 100); do grep -q '^listening ' "$dir/master.out" && break; sleep 0.1; done
  YARD_MASTER=$(sed -n 's/^listening //p' "$dir/master.out")
  [ -n "$YARD_MASTER" ] || { cat "$dir/master.log"; return 1; }
  export YARD_MASTER
  export YARD_CA="$dir/ca.pem"  # the cluster CA yardctl verifies the master with
  YARD_TOKEN=$(cat "$dir/admin.token" 2>/dev/null || true)  # the admin's API token
  export YARD_TOKEN
  for _ in $(seq 100); do "$bin/yardctl" node list 2>/dev/null | grep -q ' ready ' && break; sleep 0.1; done
  dev_agent=$(sed -n 's/.*dev cluster: agent pid \([0-9]*\).*/\1/p' "$dir/master.log")
}
stop_dev_cluster() {
  if [ -n "${dev_master:-}" ]; then kill "$dev_master" 2>/dev/null; wait "$dev_master" 2>/dev/null; fi
  dev_master=""
}
