#!/usr/bin/env bash
# The "run it" command: sets up, builds, and shows the main example job (a three-task DAG:
# container-job -> pytorch -> tensorflow). Today it validates the DAG and prints its
# normalised form; when the master and agents land it runs the DAG on `yard-master --dev`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
spec=configs/examples/dag.yaml
echo
echo "== yardctl validate $spec"
build/bin/yardctl validate "$spec"
echo
echo "== the DAG"
build/bin/yardctl validate -o json "$spec" | python3 scripts/lib/show_dag.py
echo
echo "== normalised spec (yardctl validate -o json $spec)"
build/bin/yardctl validate -o json "$spec"
