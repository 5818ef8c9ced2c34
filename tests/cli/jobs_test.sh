#!/usr/bin/env bash
# Job submission through yardctl against a real master: every refusal of docs/design.md §2
# (invalid spec, queue missing/closed/stopped, quota too small for a gang, unknown flavor
# or dataset, read-write mount of a read-only dataset, name in use), queued tasks with a
# reason, the DAG's waiting tasks, cancel, delete and name reuse, and restart.
set -u
bin=$1
src=$2
source "$(dirname "$0")/lib.sh"
spec() {  # spec FILE NAME QUEUE GPU [extra container yaml]
  cat >"$1" <<YAML
name: $2
queue: $3
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: &c { image: host, command: "python3 train.py", resources: { cpu: 1, memory: 1Gi, gpu: $4 } ${5:-} } }
      worker: { replicas: 3, container: *c }
YAML
}
printf 'dataset_roots = ["/mnt"]\n[flavors.cpu-2c4g]\ncpu = 2\nmemory = "4Gi"\n' >"$tmp/master.toml"
start_master --config "$tmp/master.toml"

"$bin/yardctl" queue create team-a --cpu 32 --memory 64Gi --gpu 8 >/dev/null
spec "$tmp/big.yaml" big-train team-a 4
expect 1 '^yardctl: queue team-a quota is too small for task train: needs gpu=16, quota gpu=8$' -- job submit "$tmp/big.yaml"
spec "$tmp/ok.yaml" ok-train team-a 2
# No node has a GPU yet: accepted (one may join), and said at once rather than left to a silent wait.
expect 0 'job ok-train submitted to queue team-a \(1 task\); note: it needs 2 GPUs on one node and no node has a GPU, so it waits until such a node joins' -- job submit "$tmp/ok.yaml"
expect 1 'job name ok-train is already used by a job that has not been deleted \(state Queued\)' -- job submit "$tmp/ok.yaml"
spec "$tmp/noq.yaml" noq-train team-z 0
expect 1 'queue team-z does not exist' -- job submit "$tmp/noq.yaml"
"$bin/yardctl" queue create closed-q --cpu 8 --memory 8Gi --gpu 0 >/dev/null
"$bin/yardctl" queue state closed-q closed >/dev/null
spec "$tmp/closed.yaml" closed-train closed-q 0
expect 1 'queue closed-q is closed: it accepts no new jobs' -- job submit "$tmp/closed.yaml"
spec "$tmp/bad.yaml" ab team-a 0
expect 1 'name: "ab" must be 4-25 characters' -- job submit "$tmp/bad.yaml"
spec "$tmp/mount.yaml" mount-train team-a 0 ", mounts: [ { dataset: imagenet, path: /data } ]"
expect 1 'tasks\[0\].roles.master.container.mounts\[0\].dataset: dataset imagenet does not exist' -- job submit "$tmp/mount.yaml"
"$bin/yardctl" dataset create imagenet --path /mnt/imagenet >/dev/null
spec "$tmp/rw.yaml" rw-train team-a 0 ", mounts: [ { dataset: imagenet, path: /data, readOnly: false } ]"
expect 1 'mounts\[0\].readOnly: dataset imagenet is read-only' -- job submit "$tmp/rw.yaml"
expect 0 'submitted' -- job submit "$tmp/mount.yaml"
expect 1 'dataset imagenet is mounted by jobs that have not finished' -- dataset delete imagenet
expect 0 'submitted to queue default \(3 tasks\)' -- job submit "$src/configs/examples/dag.yaml"
sed 's/name: image-stats/name: image-stats/' "$src/configs/examples/container-image.yaml" >"$tmp/img.yaml"
expect 0 'submitted' -- job submit "$tmp/img.yaml"

# Queued tasks say why; tasks behind a dependency say which.
sleep 1
expect 0 '^prep-data +container-job +Queued +0 +- +no node has joined yet' -- job show resnet-train
expect 0 '^train +pytorch/master-worker +Waiting +0 +prep-data +waiting for prep-data' -- job show resnet-train
expect 0 '^evaluate +tensorflow +Waiting +0 +train +waiting for train' -- job show resnet-train
expect 0 '"reason": "no node has joined yet"' -- job show ok-train -o json
expect 0 'Submitted +to queue default' -- job events resnet-train
expect 0 '^ok-train +team-a +Queued' -- job list --queue team-a
# Never started: it has waited (M:SS, counting) and has no ELAPSED yet.
expect 0 '^NAME +QUEUE +STATE +TASKS +PRIORITY +SUBMITTED +OWNER +WAITED +ELAPSED$' -- job list --queue team-a
expect 0 '^ok-train +team-a +Queued .* admin +[0-9]+:[0-9]{2} +-$' -- job list --queue team-a
expect 0 '^NAME' -- job list --state Running
out=$("$bin/yardctl" job list --state Running); [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "no job should be running: $out"
expect 0 'team-a +running .* 0 +2 +- +[0-9.]+%$' -- queue list
expect 1 'queue team-a is not empty' -- queue delete team-a

# Cancel, delete, and the name is free again.
expect 0 'job ok-train cancelled' -- job cancel ok-train
expect 1 'job ok-train already finished \(Cancelled\)' -- job cancel ok-train
expect 0 '^train +pytorch/master-worker +Cancelled' -- job show ok-train
expect 0 'Cancelled +cancelled by user' -- job events ok-train
expect 0 'job ok-train deleted' -- job delete ok-train
expect 1 'job ok-train does not exist' -- job show ok-train
expect 0 'job ok-train submitted' -- job submit "$tmp/ok.yaml"
expect 0 'job mount-train deleted' -- job delete mount-train
expect 0 'job image-stats deleted' -- job delete image-stats
expect 0 'dataset imagenet deleted' -- dataset delete imagenet

# State survives a restart: jobs, states and reasons come back.
kill -9 "$master"; wait "$master" 2>/dev/null
start_master --config "$tmp/master.toml"
sleep 1
expect 0 '^ok-train +team-a +Queued' -- job list
expect 0 '^prep-data +container-job +Queued .*no node has joined yet' -- job show resnet-train
expect 1 'job mount-train does not exist' -- job show mount-train

finish "jobs"
