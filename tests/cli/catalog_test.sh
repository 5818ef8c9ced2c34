#!/usr/bin/env bash
# Queues and datasets through yardctl against a real yard-master with a real SQLite file:
# create/update/state/list/show/delete, the refusals and their exit codes, and that all of
# it survives a master restart (and a kill -9).
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
y() { "$bin/yardctl" "$@"; }
printf 'dataset_roots = ["/mnt/nfs", "/srv/data"]\n' >"$tmp/master.toml"

start_master --config "$tmp/master.toml"
expect 0 '^default +running +0/unlimited' -- queue list
# A single master (no raft_listen): cluster status shows it alone; there is nothing to remove.
expect 0 '"single": true' -- cluster status -o json
expect 0 '^yard-master +leader ' -- cluster status
expect 1 'this is a single master' -- cluster remove m2
expect 2 '' -- cluster remove
expect 0 '^team-a +running +0/8 +0/64Gi +0/8 +3 +2 +binpack' -- queue create team-a --cpu 8 --memory 64Gi --gpu 8 --max-running-jobs 3 --weight 2
expect 1 'queue team-a already exists' -- queue create team-a --cpu 1 --memory 1Gi --gpu 0
expect 1 'queue name "Team_B" must use only lowercase' -- queue create Team_B --cpu 1 --memory 1Gi --gpu 0
expect 2 '--cpu: "lots" is not a cpu quantity' -- queue create team-b --cpu lots --memory 1Gi --gpu 0
expect 1 'queue team-b does not exist' -- queue show team-b
expect 2 'memory' -- queue create team-b --cpu 1 --gpu 0
expect 2 '--gpu: -1 must be 0 or more' -- queue create team-b --cpu 1 --memory 1Gi --gpu -1
expect 2 '^yardctl: --cpu: -1 must be 0 or more$' -- queue create team-b --cpu -1 --memory 1Gi
expect 2 '^yardctl: --max-running-jobs: -1 must be 0 \(no limit\) or more$' -- queue create team-b --cpu 1 --memory 1Gi --max-running-jobs -1
expect 2 '^yardctl: --weight: 0 must be greater than 0$' -- queue create team-b --cpu 1 --memory 1Gi --weight 0
# A CPU-only cluster's queue needs no --gpu: it gets none.
expect 0 '^cpu-only +running +0/1 +0/1Gi +0/0 ' -- queue create cpu-only --cpu 1 --memory 1Gi
expect 0 'queue cpu-only deleted' -- queue delete cpu-only
expect 0 'team-a +running +0/8 +0/64Gi +0/16 +3 +2 +spread' -- queue update team-a --gpu 16 --placement spread
expect 2 'nothing to change' -- queue update team-a
expect 0 'team-a +stopped' -- queue state team-a stopped
expect 2 '' -- queue state team-a paused
expect 1 'queue default cannot be deleted' -- queue delete default
expect 0 '"state": "stopped"' -- queue show team-a -o json
out=$(y -o json queue list)
python3 -c 'import json,sys; q={x["name"]: x for x in json.loads(sys.argv[1])}; assert q["team-a"]["quota"] == {"cpuMillis": 8000, "memoryBytes": 64 << 30, "gpu": 16}, q; assert q["team-a"]["weight"] == 2' "$out" || fail "queue list json: $out"

expect 0 '^imagenet +/mnt/nfs/imagenet +read-only' -- dataset create imagenet --path /mnt/nfs/imagenet
expect 0 '^ckpt +/mnt/nfs/ckpt +read-write' -- dataset create ckpt --path /mnt/nfs/ckpt --read-write
expect 1 '--path: "rel/path" must be an absolute path' -- dataset create bad-one --path rel/path
expect 1 'dataset imagenet already exists' -- dataset create imagenet --path /mnt/nfs/x
# Datasets live only under dataset_roots, and never in system directories or Yard's own data.
expect 1 '^yardctl: dataset outside: path /mnt/other is refused: not under any dataset_roots \(/mnt/nfs, /srv/data\)$' -- dataset create outside --path /mnt/other
expect 1 'dataset etc: path /etc is refused: under /etc, a system directory' -- dataset create etc --path /etc
expect 1 'dataset up: path /mnt/nfs/../../etc is refused: it must not contain a ".." component' -- dataset create up --path /mnt/nfs/../../etc
expect 1 'dataset outside does not exist' -- dataset show outside
expect 0 '"readOnly": true' -- dataset show imagenet -o json
expect 0 'dataset ckpt deleted' -- dataset delete ckpt
expect 1 'dataset ckpt does not exist' -- dataset show ckpt

# Everything acknowledged survives a kill -9 and restart.
kill -9 "$master"; wait "$master" 2>/dev/null
start_master --config "$tmp/master.toml"
expect 0 'team-a +stopped +0/8 +0/64Gi +0/16 +3 +2 +spread' -- queue list
expect 0 '^imagenet +/mnt/nfs/imagenet +read-only' -- dataset list
expect 1 'dataset ckpt does not exist' -- dataset show ckpt
expect 0 'queue team-a deleted' -- queue delete team-a
kill -TERM "$master"; wait "$master"
start_master --config "$tmp/master.toml"
out=$(y queue list)
echo "$out" | grep -q team-a && fail "deleted queue came back: $out"
[ "$(y -o json queue list | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] || fail "expected only default"

finish "catalog"
