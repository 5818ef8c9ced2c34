#!/usr/bin/env bash
# A master and two agents on loopback run a DAG of real host processes: a container job
# (completions 4, parallelism 2), then a two-replica PyTorch-style task; the job ends
# Succeeded with every replica's output in `yardctl logs`, wired with the common variables.
# Also: a read-only dataset mount, usage in `job top`/`node top`, and nothing left behind
# once the job is deleted.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 2Gi
start_agent 2 --cpu 2 --memory 2Gi
wait_nodes 2

say "a DAG runs to Succeeded across two agents"
# The master waits for the worker's line: once the master exits 0 the task succeeds and
# cleanup stops a worker that has not finished (the PyTorch success policy).
cat >"$tmp/train.sh" <<EOF
echo \$YARD_ROLE \$YARD_REPLICA_INDEX attempt \$YARD_ATTEMPT masters=\$YARD_HOSTS_MASTER workers=\$YARD_HOSTS_WORKER job=\$YARD_JOB task=\$YARD_TASK epochs=\$EPOCHS
if [ \$YARD_ROLE = worker ]; then touch $tmp/worker-said; else while [ ! -f $tmp/worker-said ]; do sleep 0.1; done; fi
EOF
cat >"$tmp/dag.yaml" <<YAML
name: e2e-dag
tasks:
  - name: prep-data
    kind: container-job
    completions: 4
    parallelism: 2
    container:
      image: host
      resources: { cpu: 500m, memory: 64Mi }
      command: sh -c
      args: "'echo shard \$YARD_REPLICA_INDEX on \$YARD_NODE at \$YARD_NODE_ADDR:\$YARD_PORT; sleep 0.5'"
  - name: train
    kind: pytorch
    dependsOn: [prep-data]
    roles:
      master:
        replicas: 1
        container: &c
          image: host
          resources: { cpu: 1500m, memory: 128Mi }
          command: sh $tmp/train.sh
          env: [ { name: EPOCHS, value: "3" } ]
      worker: { replicas: 1, container: *c }
    advanced: { cleanup: running }
YAML
submit "$tmp/dag.yaml"
wait_job e2e-dag Succeeded 60
out=$("$bin/yardctl" logs e2e-dag 2>&1)
for i in 0 1 2 3; do
  echo "$out" | grep -qE "^prep-data/run/$i \| shard $i on node-[12] at 127\.0\.0\.[23]:31[12][0-9][0-9]$" || fail "logs of run $i: $out"
done
echo "$out" | grep -qE '^train/master/0 \| master 0 attempt 0 masters=127\.0\.0\.[23]:31[12][0-9][0-9] workers=127\.0\.0\.[23]:31[12][0-9][0-9] job=e2e-dag task=train epochs=3$' \
  || fail "master's log: $out"
echo "$out" | grep -qE '^train/worker/0 \| worker 0 attempt 0 ' || fail "worker's log: $out"
# The gang needs 3 cpu: it cannot fit on one 2-cpu node, so it spans both agents.
nodes=$(jshow e2e-dag '" ".join(sorted(r["node"] for t in j["tasks"] if t["name"]=="train" for r in t["replicas"]))')
[ "$nodes" = "node-1 node-2" ] || fail "train replicas on $nodes, want one on each node"
one=$("$bin/yardctl" logs e2e-dag --task train --role worker --index 0)
echo "$one" | grep -qE '^worker 0 attempt 0 ' || fail "one replica's log is printed bare: $one"
[ "$("$bin/yardctl" logs e2e-dag --task prep-data --tail 0 | wc -l)" -eq 0 ] || fail "--tail 0 printed lines"
"$bin/yardctl" logs e2e-dag --task nope >/dev/null 2>&1 && fail "logs of a missing task succeeded"

say "a dataset mounted read-only; usage shows in job top and node top"
# Mount points of host replicas must exist on the node: Yard creates none on the host's tree.
rm -rf /mnt/yard-e2e-data /mnt/yard-e2e-shared  # left by an earlier run, if any
mkdir -p /mnt/yard-e2e-data
mkdir -p "$tmp/dataset"
echo "imagenet-sample" >"$tmp/dataset/labels.txt"
"$bin/yardctl" dataset create sample --path "$tmp/dataset" >/dev/null || fail "dataset create"
# It spins until the test has seen its usage (or 60 s pass).
cat >"$tmp/spin.sh" <<EOF
cat /mnt/yard-e2e-data/labels.txt
touch /mnt/yard-e2e-data/x 2>/dev/null && echo WRITABLE || echo read-only
end=\$((\$(date +%s) + 60))
while [ ! -f $tmp/stop-spin ] && [ \$(date +%s) -lt \$end ]; do :; done
EOF
cat >"$tmp/busy.yaml" <<YAML
name: e2e-busy
tasks:
  - name: spin
    kind: container-job
    container:
      image: host
      resources: { cpu: 500m, memory: 64Mi }
      command: sh $tmp/spin.sh
      mounts: [ { dataset: sample, path: /mnt/yard-e2e-data, readOnly: true } ]
YAML
submit "$tmp/busy.yaml"
used=""
for _ in $(seq 150); do
  used=$("$bin/yardctl" job top e2e-busy -o json | python3 -c 'import json,sys; u=json.load(sys.stdin); print(u[0]["used"]["cpuMillis"] if u and u[0]["sampledAt"] else "")' 2>/dev/null)
  [ -n "$used" ] && [ "$used" -gt 100 ] && break
  sleep 0.2
done
[ -n "$used" ] && [ "$used" -gt 100 ] && [ "$used" -le 650 ] || fail "job top: cpu used '$used' millicores, want 100-650 (limit 500m)"
"$bin/yardctl" job top e2e-busy | grep -qE '^spin/run/0 ' || fail "job top table: $("$bin/yardctl" job top e2e-busy)"
"$bin/yardctl" node top -o json | python3 -c 'import json,sys; n=json.load(sys.stdin); assert sum(x["used"]["cpuMillis"] for x in n) > 100' \
  || fail "node top shows no usage: $("$bin/yardctl" node top)"
touch "$tmp/stop-spin"
wait_job e2e-busy Succeeded 30
out=$("$bin/yardctl" logs e2e-busy)
echo "$out" | grep -q 'imagenet-sample' || fail "dataset not visible: $out"
echo "$out" | grep -q 'read-only' || fail "dataset mount writable: $out"
[ -e "$tmp/dataset/x" ] && fail "the replica wrote into a read-only dataset"
[ -e /mnt/yard-e2e-data/labels.txt ] && fail "the mount leaked into the host namespace"
[ -d /mnt/yard-e2e-data ] || fail "the mount point that existed before was removed"

say "a mount point missing on the node is refused, and nothing is created on the host's tree"
cat >"$tmp/missing.yaml" <<YAML
name: e2e-missing-mount
tasks:
  - name: pair
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: cat /mnt/yard-e2e-shared/deep/set/labels.txt
      mounts: [ { dataset: sample, path: /mnt/yard-e2e-shared/deep/set, readOnly: true } ]
YAML
submit "$tmp/missing.yaml"
wait_job e2e-missing-mount Failed 30
reason=$("$bin/yardctl" job show e2e-missing-mount -o json | python3 -c 'import json,sys; j=json.load(sys.stdin); print([r["reason"] for t in j["tasks"] for r in t["replicas"]][0])')
echo "$reason" | grep -q 'mount-point: No such file or directory (/mnt/yard-e2e-shared/deep/set does not exist on this node' \
  || fail "missing mount point: reason '$reason'"
[ -e /mnt/yard-e2e-shared ] && fail "a mount point was created on the host: $(find /mnt/yard-e2e-shared)"
"$bin/yardctl" job delete e2e-missing-mount >/dev/null

say "datasets through symbolic links: refused at creation, and a directory swapped for a link later is refused at mount"
# Checked as text only, `ln -s /etc ROOT/lnk` made the host's /etc a read-write dataset.
ln -s /etc "$tmp/lnk"
out=$("$bin/yardctl" dataset create lnk --path "$tmp/lnk" --read-write 2>&1) && fail "a dataset through a link to /etc was created: $out"
echo "$out" | grep -qF "dataset lnk: path $tmp/lnk resolves to /etc, which is refused: under /etc, a system directory" \
  || fail "dataset through a link: $out"
# A real directory when created, replaced by a link to /etc before a replica mounts it.
mkdir "$tmp/swap"
"$bin/yardctl" dataset create swap --path "$tmp/swap" --read-write >/dev/null || fail "dataset create swap"
rmdir "$tmp/swap" && ln -s /etc "$tmp/swap"
cat >"$tmp/swapped.yaml" <<YAML
name: e2e-swapped
tasks:
  - name: peek
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: cat /mnt/yard-e2e-data/passwd
      mounts: [ { dataset: swap, path: /mnt/yard-e2e-data } ]
YAML
submit "$tmp/swapped.yaml"
wait_job e2e-swapped Failed 30
reason=$("$bin/yardctl" job show e2e-swapped -o json | python3 -c 'import json,sys; j=json.load(sys.stdin); print([r["reason"] for t in j["tasks"] for r in t["replicas"]][0])')
echo "$reason" | grep -qF "mount-source: Too many levels of symbolic links ($tmp/swap is a symbolic link; yard-shim mounts no path through one)" \
  || fail "swapped dataset: reason '$reason'"
"$bin/yardctl" logs e2e-swapped 2>&1 | grep -q 'root:' && fail "the link's target was mounted: $("$bin/yardctl" logs e2e-swapped 2>&1)"
"$bin/yardctl" job delete e2e-swapped >/dev/null
rm "$tmp/lnk" "$tmp/swap"

say "logs -f streams while the replica runs and ends when it ends"
cat >"$tmp/ticker.yaml" <<'YAML'
name: e2e-ticker
tasks:
  - name: ticker
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: sh -c
      args: "'for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done'"
YAML
submit "$tmp/ticker.yaml"
for _ in $(seq 100); do "$bin/yardctl" logs e2e-ticker 2>/dev/null | grep -q 'tick 1' && break; sleep 0.05; done
timeout 20 "$bin/yardctl" logs e2e-ticker -f >"$tmp/follow.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] || fail "logs -f exit $rc: $(cat "$tmp/follow.out")"
[ "$(grep -c '^ticker/run/0 | tick [1-6]$' "$tmp/follow.out")" -eq 6 ] || fail "logs -f output: $(cat "$tmp/follow.out")"
wait_job e2e-ticker Succeeded 10
"$bin/yardctl" job delete e2e-ticker >/dev/null

say "a running container job's run that waits for room says why"
# Two nodes of 2 cores: two runs of 1500m fit, the third waits, and the Running task says so
# (it said nothing: a task Running with no reason while a run waited).
cat >"$tmp/wide.yaml" <<'YAML'
name: e2e-wide
tasks:
  - name: shards
    kind: container-job
    completions: 3
    parallelism: 3
    container: { image: host, resources: { cpu: 1500m, memory: 64Mi }, command: sleep, args: "3" }
YAML
submit "$tmp/wide.yaml"
seen=""
for _ in $(seq 50); do
  why=$("$bin/yardctl" job show e2e-wide -o json 2>/dev/null | python3 -c 'import json,sys; t=json.load(sys.stdin)["tasks"][0]; print(t["state"], "|", t.get("reason", ""))' 2>/dev/null)
  case "$why" in "Running | run 2 waits: "*) seen=1; break ;; esac
  sleep 0.1
done
[ -n "$seen" ] || fail "the waiting run's reason is not shown: $why"
"$bin/yardctl" job show e2e-wide | grep -qE '^shards .*Running .*run 2 waits: ' || fail "job show: $("$bin/yardctl" job show e2e-wide)"
wait_job e2e-wide Succeeded 30

say "deleting the jobs removes every replica, log and cgroup"
"$bin/yardctl" job delete e2e-dag >/dev/null || fail "delete e2e-dag"
"$bin/yardctl" job delete e2e-busy >/dev/null || fail "delete e2e-busy"
"$bin/yardctl" job delete e2e-wide >/dev/null || fail "delete e2e-wide"
for _ in $(seq 100); do
  [ -z "$(find "$tmp"/agent*/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break
  sleep 0.1
done
no_leftovers
rmdir /mnt/yard-e2e-data 2>/dev/null
finish e2e.run
