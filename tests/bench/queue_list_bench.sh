#!/bin/bash
# A benchmark, not a test (docs/benchmarks.md, "queue list"): yard-master --dev with N queues in one
# cohort, created 4 at a time; prints the queue count and the median of 5 `yardctl queue list -o json`.
# qbench.sh BIN N: yardctl queue list time with N queues (median of 5)
bin=$1; n=$2; d=$(mktemp -d)
port=$((20000 + RANDOM % 10000))
$bin/yard-master --dev --data-dir $d/m --listen 127.0.0.1:$port --agent-listen 127.0.0.1:$((port+1)) --http-listen "" --metrics-listen "" > $d/out 2>$d/err &
pid=$!
for i in $(seq 50); do grep -q '^listening' $d/out && break; sleep 0.2; done
export YARD_MASTER=$(sed -n 's/^listening //p' $d/out) YARD_CA=$d/m/ca.pem YARD_TOKEN=$(cat $d/m/admin.token)
for i in $(seq $n); do echo "$i"; done | xargs -P 4 -I{} $bin/yardctl queue create q{} --cpu 4 --memory 4Gi --cohort c$(( RANDOM % 4 )) >/dev/null 2>&1
$bin/yardctl queue list | wc -l
for r in 1 2 3 4 5; do s=$(date +%s%N); $bin/yardctl queue list -o json >/dev/null; e=$(date +%s%N); echo $(( (e-s)/1000000 )); done | sort -n | sed -n 3p
kill $pid; wait $pid 2>/dev/null; rm -rf $d
