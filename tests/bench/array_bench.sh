#!/usr/bin/env bash
# Job arrays against single submissions, side by side in one run (docs/benchmarks.md): jobs
# per second for a 10,000-job array through one `yardctl job submit` call, for 10,000 single
# submissions through the client API from 16 concurrent clients (yard-submit-storm: the
# store's group commit, no process start per job), and for single `yardctl job submit`
# processes (1,000 of them; the rate is what a shell loop of 10,000 gets). Median of 3 rounds
# each; ratios against the one-process-per-job loop. A master without agents: jobs stay queued.
# When Slurm is installed (apt-get install slurmctld slurm-client munge), the same for a
# private one-node slurmctld on loopback (no slurmd: its jobs stay pending too):
# `sbatch --array=0-9999` and single `sbatch` processes (300 per round).
#   tests/bench/array_bench.sh [BUILD_BIN]   (default build/bin)
set -euo pipefail
bin=${1:-build/bin}
. "$(dirname "$0")/bench_lib.sh"
. "$(dirname "$0")/slurm_lib.sh"
bench_init
bench_on_exit() { slurm_stop; }
# TLS and API tokens (docs/security.md): the cluster CA and the admin's token the master's first
# start wrote, in the environment (yardctl reads both there too).
bench_master
now() { date +%s.%N; }
spec() {  # spec NAME [ARRAY]
  cat <<YAML
name: $1
${2:+array: $2}
tasks:
  - name: work
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo \$YARD_ARRAY_INDEX'" }
YAML
}
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }

array=(); storm=(); loop=()
for round in 1 2 3; do
  spec "arr$round" "{ count: 10000 }" >"$tmp/arr.yaml"
  t0=$(now)
  "$bin/yardctl" --master "$addr" job submit "$tmp/arr.yaml" >/dev/null
  t1=$(now)
  array+=("$(rate 10000 "$t0" "$t1")")
  storm+=("$("$bin/yard-submit-storm" --master "$addr" --ca "$YARD_CA" --clients 16 --jobs 625 --prefix "st$round" 2>&1 >/dev/null |
    sed -n 's/.*jobs_per_second=//p' | cut -d. -f1)")
  t0=$(now)
  for i in $(seq 1000); do
    spec "one$round-$i" >"$tmp/one.yaml"
    "$bin/yardctl" --master "$addr" job submit "$tmp/one.yaml" >/dev/null
  done
  t1=$(now)
  loop+=("$(rate 1000 "$t0" "$t1")")
done
ma=$(median "${array[@]}"); ms=$(median "${storm[@]}"); ml=$(median "${loop[@]}")
echo "jobs/s, one yardctl call, 10,000-job array:        ${array[*]}  median $ma"
echo "jobs/s, 10,000 single submissions, 16 API clients: ${storm[*]}  median $ms"
echo "jobs/s, one yardctl process per job (1,000 runs):   ${loop[*]}  median $ml"
echo "ratio array/loop: $(awk -v a="$ma" -v b="$ml" 'BEGIN { printf "%.1f", a / b }');" \
  "storm/loop: $(awk -v a="$ms" -v b="$ml" 'BEGIN { printf "%.1f", a / b }');" \
  "array/storm: $(awk -v a="$ma" -v b="$ms" 'BEGIN { printf "%.1f", a / b }')"
if slurm_start "$tmp/slurm"; then
  sarray=(); sloop=()
  for round in 1 2 3; do
    t0=$(now); sbatch --array=0-9999 --wrap true >/dev/null; t1=$(now)
    sarray+=("$(rate 10000 "$t0" "$t1")")
    t0=$(now); for i in $(seq 300); do sbatch --wrap true >/dev/null; done; t1=$(now)
    sloop+=("$(rate 300 "$t0" "$t1")")
  done
  msa=$(median "${sarray[@]}"); msl=$(median "${sloop[@]}")
  echo "jobs/s, sbatch --array=0-9999 (Slurm 22.05):       ${sarray[*]}  median $msa"
  echo "jobs/s, one sbatch process per job (300 runs):    ${sloop[*]}  median $msl"
  echo "ratio Yard array / sbatch array: $(awk -v a="$ma" -v b="$msa" 'BEGIN { printf "%.3f", a / b }');" \
    "yardctl loop / sbatch loop: $(awk -v a="$ml" -v b="$msl" 'BEGIN { printf "%.2f", a / b }')"
else
  echo "Slurm: not installed (apt-get install slurmctld slurm-client munge), not measured"
fi
total=$("$bin/yardctl" --master "$addr" -o json job list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
echo "jobs held by the master at the end: $total; master RSS $(awk '/VmRSS/ {print $2}' "/proc/$master/status") KiB"
