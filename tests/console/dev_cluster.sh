# A dev cluster (`yard-master --dev`: a master and its embedded agent, node `dev`) on loopback
# for the console's browser tests and benchmark. Source it after setting $bin; then
# `start_dev_master [args...]` sets $tmp, $dev_master, $http (HOST:PORT of the HTTPS API and
# console), $YARD_MASTER, $YARD_CA and $YARD_TOKEN. The master is stopped by PID with SIGTERM
# on exit (it stops its agent and the agent's replicas), and $tmp removed.
set -u
tmp=$(mktemp -d)
export YARD_CONFIG="$tmp/client.toml"  # --dev writes yardctl's config here, never ~/.config
dev_master=
stop_dev_master() {
  [ -n "$dev_master" ] || return 0
  kill -TERM "$dev_master" 2>/dev/null
  for _ in $(seq 150); do kill -0 "$dev_master" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$dev_master" 2>/dev/null  # only if SIGTERM did not end it within 15 s
  wait "$dev_master" 2>/dev/null
  dev_master=
}
dev_cleanup() {
  stop_dev_master
  rm -rf "$tmp"
}
trap dev_cleanup EXIT

# start_dev_master [args...]: extra args go to yard-master (e.g. --console-dir DIR).
start_dev_master() {
  "$bin/yard-master" --dev --data-dir "$tmp/yard-dev" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --metrics-listen "" "$@" >"$tmp/master.out" 2>"$tmp/master.err" &
  dev_master=$!
  for _ in $(seq 150); do grep -q '^http ' "$tmp/master.out" 2>/dev/null && break; sleep 0.1; done
  http=$(sed -n 's/^http //p' "$tmp/master.out")
  YARD_MASTER=$(sed -n 's/^listening //p' "$tmp/master.out")
  if [ -z "$http" ] || [ -z "$YARD_MASTER" ]; then
    echo "the dev master did not start:"; cat "$tmp/master.out" "$tmp/master.err"
    return 1
  fi
  export YARD_MASTER YARD_CA="$tmp/yard-dev/ca.pem"
  YARD_TOKEN=$(cat "$tmp/yard-dev/admin.token")
  export YARD_TOKEN
}

# wait_dev_node: the embedded agent's node `dev` is ready (host tasks can run).
wait_dev_node() {
  for _ in $(seq 150); do
    "$bin/yardctl" node list 2>/dev/null | grep -q '^dev .* ready ' && return 0
    sleep 0.1
  done
  echo "node dev did not become ready: $("$bin/yardctl" node list 2>&1)"
  return 1
}
