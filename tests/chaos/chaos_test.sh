#!/usr/bin/env bash
# The chaos suite: a yard-master and three yard-agents (one behind a veth pair it can cut),
# containerd when the machine has it, DAG jobs of recording host and container gangs, and
# seeded faults (kill -9 of the master and of agents, link cuts, a containerd restart, the
# master's disk full, a connection flood); then the promises of docs/reliability.md are
# checked (docs/reliability.md, "Chaos suite"). Needs root (namespaces, cgroups, mounts).
#   tests/chaos/chaos_test.sh BUILD_BIN              the short run (ctest chaos.short)
#   CHAOS_DURATION=1200 tests/chaos/chaos_test.sh build/bin     a long run
#   CHAOS_SEED=N ...                                 reproduces a run (the seed is printed)
#   CHAOS_MASTERS=3 ...                              HA mode: three masters on Raft (ctest chaos.ha)
set -u
[ "$(id -u)" = 0 ] || { echo "chaos: needs root (network namespaces, cgroups, tmpfs)"; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" -u "$(dirname "$0")/chaos.py" "${1:-build/bin}"
