#!/usr/bin/env bash
# yardctl against Slurm's CLI, side by side in one run (issue 25, "A fast CLI";
# docs/benchmarks.md): single `yardctl job submit` processes against single `sbatch`
# processes, one at a time and 16 at a time, and `yardctl job show` against `scontrol show
# job`. A master without agents (TLS, the admin token, the session cache in a fresh
# XDG_CACHE_HOME) and a private one-node slurmctld on loopback (slurm_lib.sh): jobs stay
# queued on both. Each figure is the median of 3 rounds of N commands; the last line:
#   submit_per_s yardctl=A sbatch=B ratio=A/B; submit16_per_s yardctl=C sbatch=D ratio=C/D; show_ms yardctl=E scontrol=F
#   tests/bench/cli_bench.sh [BIN_DIR] [N]   (defaults build/bin 200)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-200}
. "$(dirname "$0")/bench_lib.sh"
. "$(dirname "$0")/slurm_lib.sh"
bench_init
bench_on_exit() { slurm_stop; }
slurm_start "$tmp/slurm" || { echo "cli_bench: needs Slurm (apt-get install slurmctld slurm-client munge)" >&2; exit 1; }
bench_master
export XDG_CACHE_HOME="$tmp/cache"
mkdir -p "$tmp/specs" "$tmp/cache"
for r in 1 2 3; do
  for i in $(seq "$n"); do
    printf 'name: r%s-%s\ntasks:\n  - name: work\n    kind: container-job\n    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" }\n' \
      "$r" "$i" >"$tmp/specs/r$r-$i.yaml"
    printf 'name: p%s-%s\ntasks:\n  - name: work\n    kind: container-job\n    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: "true" }\n' \
      "$r" "$i" >"$tmp/specs/p$r-$i.yaml"
  done
done
now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
per_s() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.1f", n / (b - a) }'; }
ms_each() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", 1000 * (b - a) / n }'; }
ys=(); ss=(); yp=(); sp=(); yshow=(); sshow=()
"$bin/yardctl" queue list >/dev/null  # the first command fills the session cache
for r in 1 2 3; do
  t0=$(now); for i in $(seq "$n"); do "$bin/yardctl" job submit "$tmp/specs/r$r-$i.yaml" >/dev/null; done; t1=$(now)
  ys+=("$(per_s "$n" "$t0" "$t1")")
  t0=$(now); for i in $(seq "$n"); do sbatch --wrap true >/dev/null; done; t1=$(now)
  ss+=("$(per_s "$n" "$t0" "$t1")")
  t0=$(now)
  seq "$n" | xargs -P 16 -I{} "$bin/yardctl" job submit "$tmp/specs/p$r-{}.yaml" >/dev/null
  t1=$(now)
  yp+=("$(per_s "$n" "$t0" "$t1")")
  t0=$(now); seq "$n" | xargs -P 16 -I{} sbatch --wrap true >/dev/null; t1=$(now)
  sp+=("$(per_s "$n" "$t0" "$t1")")
  t0=$(now); for i in $(seq "$n"); do "$bin/yardctl" job show "r$r-$i" >/dev/null; done; t1=$(now)
  yshow+=("$(ms_each "$n" "$t0" "$t1")")
  id=$(squeue -h -o %i | sed -n 1p)  # sed reads all: no SIGPIPE under pipefail
  t0=$(now); for i in $(seq "$n"); do scontrol show job "$id" >/dev/null; done; t1=$(now)
  sshow+=("$(ms_each "$n" "$t0" "$t1")")
done
echo "submits/s, one yardctl process per job:     ${ys[*]}"
echo "submits/s, one sbatch process per job:      ${ss[*]}"
echo "submits/s, 16 yardctl processes at a time:  ${yp[*]}"
echo "submits/s, 16 sbatch processes at a time:   ${sp[*]}"
echo "ms per yardctl job show:                    ${yshow[*]}"
echo "ms per scontrol show job:                   ${sshow[*]}"
a=$(median "${ys[@]}"); b=$(median "${ss[@]}"); c=$(median "${yp[@]}"); d=$(median "${sp[@]}")
e=$(median "${yshow[@]}"); f=$(median "${sshow[@]}")
awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v e="$e" -v f="$f" 'BEGIN {
  printf "submit_per_s yardctl=%s sbatch=%s ratio=%.2f; submit16_per_s yardctl=%s sbatch=%s ratio=%.2f; show_ms yardctl=%s scontrol=%s\n",
    a, b, a / b, c, d, c / d, e, f }'
