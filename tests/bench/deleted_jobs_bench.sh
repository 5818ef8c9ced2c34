#!/bin/bash
# A benchmark, not a test (docs/benchmarks.md, "Deleted jobs at a start"): how long a master's
# start-up load takes when its store holds N deleted jobs whose specs are SPECKB KiB (padded in
# the file with sqlite3, as a long history of large specs would leave it).
# deleted_jobs_bench.sh BIN [BASELINE_MASTER] [N] [SPECKB]: the store is made by BASELINE_MASTER
# (default BIN/yard-master); then each master's "state loaded ... in T ms" line, three starts
# each, the median printed. A newer schema is one way: the baseline reads its own copy.
set -u
bin=$1; base=${2:-$1/yard-master}; n=${3:-10000}; kb=${4:-20}
d=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
start() {  # start MASTER DIR: runs it until the client API answers; prints its load line's ms
  "$1" --config $d/m.toml --data-dir "$2" --listen 127.0.0.1:$port --agent-listen 127.0.0.1:$((port + 1)) \
    --http-listen "" --metrics-listen "" >$d/out 2>$d/err &
  local pid=$!
  for _ in $(seq 600); do
    YARD_CA=$2/ca.pem YARD_TOKEN=$(cat "$2/admin.token" 2>/dev/null) YARD_MASTER=127.0.0.1:$port \
      $bin/yardctl queue list >/dev/null 2>&1 && break
    sleep 0.05
  done
  sed -n 's/.*state loaded: .* in \([0-9]*\) ms.*/\1/p' $d/err
  kill $pid; wait $pid 2>/dev/null
}
printf 'join_token = "bench"\n' >$d/m.toml
"$base" --config $d/m.toml --data-dir $d/a --listen 127.0.0.1:$port --agent-listen 127.0.0.1:$((port + 1)) \
  --http-listen "" --metrics-listen "" >$d/out 2>$d/err &
pid=$!
for _ in $(seq 100); do [ -s $d/a/admin.token ] && break; sleep 0.1; done
sleep 0.5
YARD_TOKEN=$(cat $d/a/admin.token) $bin/yard-submit-storm --master 127.0.0.1:$port --ca $d/a/ca.pem --clients 4 \
  --jobs $((n / 4)) >/dev/null 2>&1
kill $pid; wait $pid 2>/dev/null
sqlite3 $d/a/state.db "UPDATE jobs SET deleted = 1, state = 'Cancelled',
  spec = CAST(spec || zeroblob($kb * 1024) AS BLOB); VACUUM;"
cp -a $d/a $d/b
echo "store: $(sqlite3 $d/a/state.db 'SELECT count(*) FROM jobs WHERE deleted = 1') deleted jobs, $(( $(stat -c %s $d/a/state.db) >> 20 )) MiB"
start "$bin/yard-master" $d/b >/dev/null  # its first start adds the index (schema 17): not timed
for m in "$base" "$bin/yard-master"; do
  dir=$d/b; [ "$m" = "$base" ] && [ "$base" != "$bin/yard-master" ] && dir=$d/a
  ms=$(for _ in 1 2 3; do start "$m" $dir; done | sort -n | sed -n 2p)
  echo "$m: state loaded in $ms ms (median of 3 starts)"
done
rm -rf $d
