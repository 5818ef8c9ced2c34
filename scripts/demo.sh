#!/usr/bin/env bash
# The "run it" command: sets up, builds, starts the embedded dev cluster
# (`yard-master --dev`: a master plus one agent allowed to run host tasks, all on loopback)
# and runs the main example, a three-task DAG (container-job -> pytorch -> tensorflow), to
# its end. Prints the DAG, the final job state, its events and some logs, then stops the
# cluster. Needs root (replicas run in cgroups).
#   scripts/demo.sh [SPEC]      default configs/examples/dag.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-configs/examples/dag.yaml}
if [ "${YARD_DEMO_NO_BUILD:-}" != 1 ]; then
  # Only what the demo needs: the build's packages (not the test suite's: chromium,
  # prometheus, containerd, torch, etcd, ...), and the product's binaries (not the tests',
  # not the web console). scripts/test.sh installs and builds the rest.
  scripts/setup.sh --demo
  generator=()
  command -v ninja >/dev/null && [ ! -f build/Makefile ] && generator=(-G Ninja)
  [ -f build/CMakeCache.txt ] || cmake -S . -B build "${generator[@]}" -DBUILD_TESTING=OFF >/dev/null
  cmake --build build -j"${YARD_JOBS:-2}" --target yard-master yard-agent yardctl yard-shim
fi
bin=build/bin
work=$(mktemp -d)
source scripts/lib/dev_cluster.sh
trap 'stop_dev_cluster; rm -rf "$work"' EXIT

echo "== the DAG ($spec)"
"$bin/yardctl" validate -o json "$spec" | python3 scripts/lib/show_dag.py

echo
echo "== yard-master --dev (state in $work)"
start_dev_cluster "$bin" "$work"
"$bin/yardctl" node list

name=$("$bin/yardctl" validate -o json "$spec" | python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])')
echo
echo "== yardctl job submit $spec"
"$bin/yardctl" job submit "$spec"
state=""
for _ in $(seq 600); do
  state=$("$bin/yardctl" job show "$name" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["state"])')
  case "$state" in Succeeded|Failed|Cancelled) break ;; esac
  sleep 0.2
done
echo
echo "== yardctl job show $name"
"$bin/yardctl" job show "$name"
echo
echo "== yardctl job events $name"
"$bin/yardctl" job events "$name"
echo
echo "== yardctl logs $name --tail 5"
"$bin/yardctl" logs "$name" --tail 5
echo
echo "job $name: $state"
[ "$state" = Succeeded ] || { echo "== master and agent log"; tail -40 "$work/master.log"; exit 1; }
