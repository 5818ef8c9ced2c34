#!/usr/bin/env bash
# An elastic PyTorch worker that crashes at start (issue 27, item 9): real torchrun restarts
# its worker group locally, Yard counts those restarts from its output (docs/wiring.md,
# "PyTorch elastic") and fails the worker after 3, so the task fails with the count in its
# reason (not "Running, attempt 0" for the whole of torchrun's own budget of 103), and
# `job show` shows the restarts. A healthy elastic worker in the same cluster shows 0.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 8Gi
wait_nodes 1

cat >"$tmp/crash.py" <<'PY'
import sys
print("crashing at start, as a script written for a newer torch does", flush=True)
sys.exit(3)
PY
cat >"$tmp/crash.yaml" <<YAML
name: e2e-crashloop
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { backend: c10d, target: 80, minReplicas: 1, maxReplicas: 2 }
    roles:
      worker:
        container:
          image: host
          resources: { cpu: 1, memory: 2Gi }
          command: python3 -m torch.distributed.run --redirects 1 --tee 1 $tmp/crash.py
          env: [ { name: PET_RDZV_CONF, value: "last_call_timeout=1" } ]
YAML
say "a worker crashing at start fails the task after 3 torchrun restarts"
started=$(date +%s)
submit "$tmp/crash.yaml"
wait_job e2e-crashloop Failed 240
took=$(( $(date +%s) - started ))
echo "    Failed after ${took}s"
reason=$(jshow e2e-crashloop 'j["tasks"][0]["reason"]')
echo "$reason" | grep -qE 'worker group failed [4-9] times \(torchrun restarts\); 3 allowed' ||
  fail "task reason does not give the restart count: $reason"
restarts=$(jshow e2e-crashloop 'j["tasks"][0]["replicas"][0]["restarts"]')
[ "${restarts:-0}" -ge 4 ] && [ "${restarts:-0}" -le 6 ] || fail "worker restarts shown: ${restarts:-none}, want 4 (3 allowed + the one that failed it)"
"$bin/yardctl" job show e2e-crashloop | grep -q RESTARTS || fail "job show has no RESTARTS column"
starts=$("$bin/yardctl" logs e2e-crashloop 2>/dev/null | grep -c 'crashing at start')
[ "$starts" -le 8 ] || fail "the worker started $starts times: torchrun's own budget, not Yard's, ended it"

finish e2e.elastic_restarts
