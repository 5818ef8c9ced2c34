#!/usr/bin/env bash
# Elastic scale-out latency (issue 12): seconds from the load crossing the target to training
# at the new world size, with real torchrun (tests/e2e/programs/elastic_train.py) on two
# agents. Each round, from one settled worker: the control file flips to "high" at t0;
#   decide = t0 -> the ScaleOutRequested event (master's clock, read through job events);
#   train  = t0 -> the log line of the rendezvous at world size 2 (polled every 0.25 s).
# Then "low" until the task is back to one worker, and again. The floor of `decide` is the
# scale-up window plus the agents' 2 s usage sample; of `train`, that plus the new worker's
# torchrun start and the rendezvous (last_call_timeout=2). Prints medians over N rounds.
#   tests/bench/elastic_bench.sh [BUILD_BIN] [N]   (default build/bin, 3)
bin=$(cd "${1:-build/bin}" && pwd)
n=${2:-3}
e2e=$(cd "$(dirname "$0")/../e2e" && pwd)
progs=$e2e/programs
source "$e2e/cluster.sh"
window=3
cat >>"$tmp/master.toml" <<TOML
[autoscaler]
interval = "1s"
warmup = "40s"
tolerance = 0.1
scale_up_window = "${window}s"
scale_down_window = "5s"
cooldown = "10s"
TOML
start_master
start_agent 1 --cpu 1 --memory 8Gi
start_agent 2 --cpu 1 --memory 8Gi
wait_nodes 2
echo low >"$tmp/ctl"
cat >"$tmp/job.yaml" <<YAML
name: bench-elastic
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { backend: c10d, target: 50, minReplicas: 1, maxReplicas: 2 }
    roles:
      worker:
        container:
          image: host
          resources: { cpu: 1, memory: 2Gi }
          command: python3 -m torch.distributed.run --redirects 1 --tee 1 $progs/elastic_train.py $tmp/ctl $tmp/ckpt
          env: [ { name: PET_RDZV_CONF, value: "last_call_timeout=2" } ]
    advanced: { cleanup: all }
YAML
"$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null || exit 1
now() { python3 -c 'import time; print(time.time())'; }
count() { "$bin/yardctl" logs bench-elastic 2>/dev/null | grep -cE "$1"; }
# One worker, settled (its warmup since the last change is over) and measured.
measured() {
  "$bin/yardctl" job show bench-elastic -o json | python3 -c 'import json,sys,time
e = json.load(sys.stdin)["tasks"][0]["elastic"]
print(int(e["utilisation"] is not None and e["current"] == 1 and not e["pending"] and 0 < e["nextDecisionAt"] <= time.time() * 1000))'
}
decides=() trains=()
for round in $(seq "$n"); do
  for _ in $(seq 600); do [ "$(measured)" = 1 ] && break; sleep 0.5; done
  outs=$("$bin/yardctl" job events bench-elastic | grep -c ' ScaleOutRequested ')
  worlds=$(count 'rendezvous world=2 rank=1')
  t0=$(now)
  echo high >"$tmp/ctl"
  decide="" train=""
  for _ in $(seq 1200); do
    [ -z "$decide" ] && [ "$("$bin/yardctl" job events bench-elastic | grep -c ' ScaleOutRequested ')" -gt "$outs" ] &&
      decide=$(python3 -c "print($(now) - $t0)")
    [ "$(count 'rendezvous world=2 rank=1')" -gt "$worlds" ] && { train=$(python3 -c "print($(now) - $t0)"); break; }
    sleep 0.25
  done
  echo "round $round: decide ${decide:-?} s, train at world size 2 ${train:-?} s"
  decides+=("${decide:-nan}") trains+=("${train:-nan}")
  echo low >"$tmp/ctl"
done
echo stop >"$tmp/ctl"
median() { printf '%s\n' "$@" | sort -g | python3 -c 'import sys; v=[float(x) for x in sys.stdin]; print("%.1f" % sorted(v)[len(v)//2])'; }
echo "elastic scale-out, $n rounds: decide median $(median "${decides[@]}") s (floor ~$((window + 2)) s: window ${window} s + 2 s usage sample); training at world size 2 median $(median "${trains[@]}") s"
