#!/usr/bin/env bash
# Every example in configs/examples runs to Succeeded on `yard-master --dev` (the embedded
# dev cluster: one agent, host tasks). container-image.yaml needs containerd and a registry:
# tests/e2e/containers_test.sh runs it.
bin=$1
src=$2
tmp=$(mktemp -d)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
source "$src/scripts/lib/dev_cluster.sh"
source "$src/scripts/lib/etcd.sh"
cleanup() {
  stop_dev_cluster
  stop_etcd
  for f in "$tmp"/dev/agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  [ "$fails" -gt 0 ] && tail -30 "$tmp/dev/master.log"
  rm -rf "$tmp"
}
trap cleanup EXIT
# Elastic examples on etcd (paddle-elastic) need one: a real etcd, as an operator runs it.
start_etcd "$tmp/etcd" || exit 1
start_dev_cluster "$bin" "$tmp/dev" --etcd-endpoint "$ETCD_ENDPOINT" || exit 1

names=()
for f in "$src"/configs/examples/*.yaml; do
  case "$f" in */container-image.yaml) continue ;; esac
  "$bin/yardctl" job submit "$f" >/dev/null || { fail "submit $f"; continue; }
  names+=("$("$bin/yardctl" validate -o json "$f" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')")
done
for n in "${names[@]}"; do
  state=""
  for _ in $(seq 1800); do
    state=$("$bin/yardctl" job show "$n" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])')
    case "$state" in Succeeded|Failed|Cancelled) break ;; esac
    sleep 0.1
  done
  if [ "$state" = Succeeded ]; then
    echo "ok $n"
  else
    fail "example $n: $state"
    "$bin/yardctl" job show "$n"
    "$bin/yardctl" logs "$n" --tail 10
  fi
done
[ "$fails" -eq 0 ] && echo "e2e.examples: all checks passed"
exit $((fails > 0))
