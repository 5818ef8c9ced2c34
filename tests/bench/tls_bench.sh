#!/usr/bin/env bash
# What issue 14's security costs (docs/benchmarks.md, "TLS and tokens"): a build from before it
# (plaintext, no tokens) against this one (TLS 1.3 on every connection, an API token checked and
# an audit record committed with every mutating request), rounds alternated in one invocation:
#  - durable submissions/s through the client API, 1 client and 16 concurrent clients, each on
#    one long-lived connection (yard-submit-storm);
#  - `yardctl job submit` wall time (a new process and connection each: the handshake is paid);
#  - submit to running on the dev cluster: the job's Submitted event to its replica's Running
#    event (master clock), a 1-replica host job.
# Medians of ROUNDS rounds; ratios new/base.
#   tests/bench/tls_bench.sh BASE_BIN [NEW_BIN] [ROUNDS]   (NEW_BIN default build/bin, ROUNDS 3)
# BASE_BIN: bin/ of a build of the commit before TLS (e.g. git worktree add /tmp/base 628bdc3,
# then scripts/build.sh there).
set -euo pipefail
base=$(cd "$1" && pwd)
new=$(cd "${2:-build/bin}" && pwd)
rounds=${3:-3}
tmp=$(mktemp -d)
source "$(dirname "$0")/../../scripts/lib/dev_cluster.sh"
master=
cleanup() { [ -n "$master" ] && kill -9 "$master" 2>/dev/null; stop_dev_cluster; rm -rf "$tmp"; }
trap cleanup EXIT
py=/usr/bin/python3
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# A plain master (no agents) of build $1 in $2; sets master, addr and the client's TLS flags.
start_master() {
  "$1/yard-master" --data-dir "$2" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >"$2.out" 2>"$2.err" &
  master=$!
  for _ in $(seq 100); do grep -q '^listening ' "$2.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^listening //p' "$2.out")
  storm_flags=()
  if [ -f "$2/ca.pem" ]; then
    storm_flags=(--ca "$2/ca.pem")
    export YARD_TOKEN
    YARD_TOKEN=$(cat "$2/admin.token")
  fi
}
stop_master() { kill "$master"; wait "$master" 2>/dev/null || true; master=; }
rate() {  # rate BIN CLIENTS JOBS PREFIX -> jobs/s
  "$1/yard-submit-storm" --master "$addr" "${storm_flags[@]}" --clients "$2" --jobs "$3" --prefix "$4" 2>&1 >/dev/null |
    sed -n 's/.*jobs_per_second=//p'
}

declare -A one many submit_ms running_ms
for round in $(seq "$rounds"); do
  for build in base new; do
    bin=$base; [ "$build" = new ] && bin=$new
    start_master "$bin" "$tmp/m-$build-$round"
    one[$build]+="$(rate "$bin" 1 400 one$round) "
    many[$build]+="$(rate "$bin" 16 25 many$round) "
    stop_master

    start_dev_cluster "$bin" "$tmp/dev-$build-$round"
    [ -f "$tmp/dev-$build-$round/ca.pem" ] || unset YARD_CA YARD_TOKEN
    for i in 1 2 3; do
      name="lat-$build-$round-$i"
      printf 'name: %s\ntasks:\n  - name: only\n    kind: container-job\n    container: { image: host, resources: { cpu: 50m, memory: 16Mi }, command: sleep 30 }\n' \
        "$name" >"$tmp/job.yaml"
      t0=$(date +%s%N)
      "$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null
      t1=$(date +%s%N)
      submit_ms[$build]+="$(( (t1 - t0) / 1000000 )) "
      for _ in $(seq 300); do  # until the replica (not only the job) is Running
        "$bin/yardctl" job events "$name" -o json 2>/dev/null |
          $py -c 'import json,sys; sys.exit(0 if any(e["type"] == "Running" and e["replica"] for e in json.load(sys.stdin)) else 1)' &&
          break
        sleep 0.05
      done
      running_ms[$build]+="$("$bin/yardctl" job events "$name" -o json | $py -c '
import json, sys
ev = json.load(sys.stdin)
sub = next(e["at"] for e in ev if e["type"] == "Submitted")
run = next(e["at"] for e in ev if e["type"] == "Running" and e["replica"])
print(run - sub)') "
      "$bin/yardctl" job cancel "$name" >/dev/null
    done
    stop_dev_cluster
  done
done

report() {  # report WHAT UNIT base-values new-values
  local b n
  b=$(median $3); n=$(median $4)
  printf '%-40s base %8s  new %8s  new/base %s   (base: %s| new: %s)\n' "$1 ($2)" "$b" "$n" \
    "$($py -c "print(f'{$n / $b:.2f}')")" "$3" "$4"
}
report "submissions/s, 1 client" "median" "${one[base]}" "${one[new]}"
report "submissions/s, 16 clients" "median" "${many[base]}" "${many[new]}"
report "yardctl job submit wall time" "ms" "${submit_ms[base]}" "${submit_ms[new]}"
report "submit to running (events)" "ms" "${running_ms[base]}" "${running_ms[new]}"
