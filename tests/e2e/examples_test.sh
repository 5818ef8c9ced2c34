#!/usr/bin/env bash
# Every example in configs/examples runs to Succeeded on `yard-master --dev` (the embedded
# dev cluster: one agent, host tasks). container-image.yaml needs containerd and is left to
# the containerd tests.
bin=$1
src=$2
tmp=$(mktemp -d)
master=
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cleanup() {
  if [ -n "$master" ]; then kill "$master" 2>/dev/null; wait "$master" 2>/dev/null; fi
  for f in "$tmp"/dev/agent/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  [ "$fails" -gt 0 ] && tail -30 "$tmp/master.log"
  rm -rf "$tmp"
}
trap cleanup EXIT
"$bin/yard-master" --dev --data-dir "$tmp/dev" --listen 127.0.0.1:0 >"$tmp/out" 2>"$tmp/master.log" &
master=$!
for _ in $(seq 100); do grep -q '^listening ' "$tmp/out" && break; sleep 0.1; done
export YARD_MASTER=$(sed -n 's/^listening //p' "$tmp/out")
for _ in $(seq 100); do "$bin/yardctl" node list 2>/dev/null | grep -q ' ready ' && break; sleep 0.1; done

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
