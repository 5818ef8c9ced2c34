# Sourced by the benchmarks that start a master of their own (tests/bench/*.sh). Set $bin
# (the directory of Yard's binaries) first.
#   bench_init            -> $tmp (a fresh directory) and $pids (processes to kill); at exit
#                            bench_on_exit runs when the script defines it, then every pid in
#                            $pids is killed (-9) and reaped, and $tmp removed
#   bench_master [ARGS]   -> yard-master on $tmp/data, its client and agent APIs on free
#                            loopback ports, no metrics listener, plus ARGS (--config FILE,
#                            --http-listen 127.0.0.1:0, ...); its output in $tmp/master.out and
#                            .err. Sets $master (pid, also in $pids), $addr, $agents, and $http
#                            when ARGS ask for an HTTP listener; exports YARD_MASTER, YARD_CA and
#                            YARD_TOKEN (the admin's), which yardctl and yard-submit-storm read.
#                            Exits 1 when the master did not start within 10 s.
bench_init() {
  tmp=$(mktemp -d)
  pids=()
  trap bench_exit EXIT
}

bench_exit() {
  if declare -F bench_on_exit >/dev/null; then bench_on_exit || true; fi
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}

bench_master() {
  local want='^agents ' a
  for a in "$@"; do [ "$a" = --http-listen ] && want='^http '; done
  "$bin/yard-master" --data-dir "$tmp/data" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --metrics-listen "" "$@" \
    >"$tmp/master.out" 2>"$tmp/master.err" &
  master=$!
  pids+=("$master")
  for _ in $(seq 100); do grep -q "$want" "$tmp/master.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^listening //p' "$tmp/master.out")
  agents=$(sed -n 's/^agents //p' "$tmp/master.out")
  http=$(sed -n 's/^http //p' "$tmp/master.out")
  if ! grep -q "$want" "$tmp/master.out" 2>/dev/null; then
    echo "$(basename "$0"): the master did not start: $(tail -3 "$tmp/master.err")" >&2
    exit 1
  fi
  export YARD_MASTER=$addr YARD_CA="$tmp/data/ca.pem" YARD_TOKEN
  YARD_TOKEN=$(cat "$tmp/data/admin.token")
}
