#!/usr/bin/env bash
# Elastic training for real (issue: the autoscaler): torchrun workers on two agents change
# their world size while they train, driven by the CPU they use. The training program
# (programs/elastic_train.py) burns CPU or idles on a control file this test flips, logs
# each rendezvous with its world size, and resumes from its checkpoint.
#   1. c10d: load that flips faster than the windows scales nothing; sustained load scales
#      1 -> 2 (world size 2, resumed from the checkpoint); low load scales 2 -> 1 with
#      worker 0 kept; `yardctl job scale` up and down; the job then ends Succeeded.
#   2. scaleTimeout: room for two workers only: the third is ScaleOutPending, then
#      ScaleOutCancelled, and the two running workers never restart.
#   3. the etcd backend (a real etcd, v2 API for torch 1.13): the same 1 -> 2 -> 1.
#   4. Paddle elastic with a stand-in for its launcher (programs/paddle_elastic_check.py)
#      registering in the same etcd (v3): 1 -> 2 -> 1.
# Agents advertise 1 CPU each and every worker asks for 1: one worker per node.
bin=$1
progs=$(cd "$(dirname "$0")/programs" && pwd)
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/../../scripts/lib/etcd.sh"
trap 'stop_etcd; cleanup' EXIT

start_etcd "$tmp/etcd" || exit 1
cat >>"$tmp/master.toml" <<TOML
etcd_endpoints = ["$ETCD_ENDPOINT"]
[autoscaler]
interval = "1s"
warmup = "40s"
tolerance = 0.1
scale_up_window = "3s"
scale_down_window = "5s"
cooldown = "10s"
TOML
start_master
start_agent 1 --cpu 1 --memory 8Gi
start_agent 2 --cpu 1 --memory 8Gi
wait_nodes 2

# events_of JOB TYPE: how many events of TYPE the job has.
events_of() { "$bin/yardctl" job events "$1" -o json | python3 -c "import json,sys; print(sum(1 for e in json.load(sys.stdin) if e['type'] == '$2'))"; }
# wait_for SECONDS DESCRIPTION COMMAND...: COMMAND succeeds within SECONDS.
wait_for() {
  local secs=$1 what=$2; shift 2
  for _ in $(seq $((secs * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  fail "$what (waited ${secs}s)"
  return 1
}
has_events() { [ "$(events_of "$1" "$2")" -ge "${3:-1}" ]; }
logs_have() { "$bin/yardctl" logs "$1" 2>/dev/null | grep -qE "$2"; }
live_workers() { jshow "$1" "sum(1 for r in j['tasks'][0]['replicas'] if r['state'] in ('Placed','Starting','Running'))"; }
dump() { "$bin/yardctl" job show "$1"; "$bin/yardctl" job events "$1" | tail -25; "$bin/yardctl" logs "$1" --tail 15; }

# elastic_job NAME BACKEND MIN MAX [SCALE_TIMEOUT]: writes the spec; control file $tmp/NAME.ctl.
elastic_job() {
  local name=$1 backend=$2 min=$3 max=$4 timeout=${5:-0}
  echo low >"$tmp/$name.ctl"
  cat >"$tmp/$name.yaml" <<YAML
name: $name
tasks:
  - name: train
    kind: pytorch
    mode: elastic
    elastic: { backend: $backend, metric: cpu, target: 50, minReplicas: $min, maxReplicas: $max, scaleTimeout: $timeout }
    roles:
      worker:
        container:
          image: host
          resources: { cpu: 1, memory: 2Gi }
          command: python3 -m torch.distributed.run --redirects 1 --tee 1 $progs/elastic_train.py $tmp/$name.ctl $tmp/$name.ckpt
          env: [ { name: PET_RDZV_CONF, value: "last_call_timeout=2" } ]
    advanced: { cleanup: all }
YAML
  submit "$tmp/$name.yaml"
}

count_logs() { "$bin/yardctl" logs "$1" 2>/dev/null | grep -cE "$2"; }
more_logs() { [ "$(count_logs "$1" "$2")" -gt "$3" ]; }
more_events() { [ "$(events_of "$1" "$2")" -gt "$3" ]; }
last_event() { "$bin/yardctl" job events "$1" | grep " $2 " | tail -1; }
one_worker() { [ "$(live_workers "$1")" = 1 ] && [ "$(jshow "$1" "j['tasks'][0]['elastic']['pending']")" = False ]; }

# scale_cycle JOB: from one worker, sustained load scales 1 -> 2 (training resumes from its
# checkpoint with world size 2), low load scales back 2 -> 1 keeping worker 0.
scale_cycle() {
  local job=$1 outs ins w2 w1
  outs=$(events_of "$job" ScaledOut); ins=$(events_of "$job" ScaledIn)
  w2=$(count_logs "$job" 'rendezvous world=2 rank=1 step=[1-9]')
  w1=$(count_logs "$job" 'worker/0 \| \[default0\]:rendezvous world=1 rank=0 step=[1-9]')
  echo high >"$tmp/$job.ctl"
  wait_for 120 "$job: ScaledOut 1 -> 2 on sustained load" more_events "$job" ScaledOut "$outs" || { dump "$job"; return 1; }
  last_event "$job" ScaledOut | grep -qE '1 -> 2: cpu [0-9]+% above target 50%' || fail "$job: ScaledOut reason: $(last_event "$job" ScaledOut)"
  wait_for 120 "$job: training resumed with world size 2" more_logs "$job" 'rendezvous world=2 rank=1 step=[1-9]' "$w2" ||
    { dump "$job"; return 1; }
  echo low >"$tmp/$job.ctl"
  wait_for 150 "$job: ScaledIn 2 -> 1 on low load" more_events "$job" ScaledIn "$ins" || { dump "$job"; return 1; }
  last_event "$job" ScaledIn | grep -qE '2 -> 1: cpu [0-9]+% below target 50%' || fail "$job: ScaledIn reason: $(last_event "$job" ScaledIn)"
  [ "$(jshow "$job" "[r['state'] for r in j['tasks'][0]['replicas'] if r['index'] == 0][0]")" = Running ] ||
    fail "$job: worker 0 did not survive the scale-in"
  wait_for 120 "$job: training goes on with world size 1" more_logs "$job" 'worker/0 \| \[default0\]:rendezvous world=1 rank=0 step=[1-9]' "$w1" ||
    { dump "$job"; return 1; }
}

say "1. c10d: no flapping, then 1 -> 2 -> 1, manual scale, Succeeded"
elastic_job el-c10d c10d 1 2
wait_for 120 "el-c10d: first rendezvous" logs_have el-c10d 'rendezvous world=1 rank=0' || dump el-c10d
wait_for 60 "el-c10d: the autoscaler measures" bash -c "$bin/yardctl job show el-c10d -o json | grep -q '\"utilisation\": [0-9]'"
for i in $(seq 12); do [ $((i % 2)) = 0 ] && echo high >"$tmp/el-c10d.ctl" || echo low >"$tmp/el-c10d.ctl"; sleep 1; done
flaps=$(( $(events_of el-c10d ScaledOut) + $(events_of el-c10d ScaledIn) ))
[ "$flaps" -le 1 ] || fail "el-c10d: load flipping every second caused $flaps scale events"
echo low >"$tmp/el-c10d.ctl"
wait_for 150 "el-c10d: back to one worker" one_worker el-c10d
scale_cycle el-c10d
say "   yardctl job scale up and down"
"$bin/yardctl" job scale el-c10d --task train --replicas 2 >/dev/null || fail "job scale --replicas 2"
[ "$(jshow el-c10d "j['tasks'][0]['elastic']['desired']")" = 2 ] || fail "el-c10d: desired after job scale 2"
wait_for 60 "el-c10d: manual scale to 2" bash -c "[ \"\$($bin/yardctl job show el-c10d -o json | python3 -c \"import json,sys; print(sum(1 for r in json.load(sys.stdin)['tasks'][0]['replicas'] if r['state'] == 'Running'))\")\" = 2 ]"
"$bin/yardctl" job scale el-c10d --task train --replicas 1 >/dev/null || fail "job scale --replicas 1"
wait_for 30 "el-c10d: manual scale to 1" one_worker el-c10d
echo stop >"$tmp/el-c10d.ctl"
wait_job el-c10d Succeeded 120 || dump el-c10d

say "2. scaleTimeout: the third worker has no room; the two running ones are not disturbed"
elastic_job el-timeout c10d 2 3 15
wait_for 120 "el-timeout: first rendezvous (world 2)" logs_have el-timeout 'rendezvous world=2 rank=1' || dump el-timeout
echo high >"$tmp/el-timeout.ctl"
wait_for 90 "el-timeout: ScaleOutPending" has_events el-timeout ScaleOutPending || dump el-timeout
wait_for 40 "el-timeout: ScaleOutCancelled after scaleTimeout" has_events el-timeout ScaleOutCancelled || dump el-timeout
"$bin/yardctl" job events el-timeout | grep ScaleOutCancelled | grep -q 'not running within scaleTimeout 15 s: ' ||
  fail "el-timeout: ScaleOutCancelled reason: $("$bin/yardctl" job events el-timeout | grep ScaleOutCancelled)"
restarts=$(jshow el-timeout "sum(1 for r in j['tasks'][0]['replicas'] if r['index'] in (0, 1) and r['state'] != 'Running')")
[ "$restarts" = 0 ] || fail "el-timeout: a running worker was disturbed"
[ "$(jshow el-timeout "j['tasks'][0]['attempt']")" = 0 ] || fail "el-timeout: the gang restarted"
echo stop >"$tmp/el-timeout.ctl"
wait_job el-timeout Succeeded 120 || dump el-timeout

say "3. etcd backend (a real etcd): 1 -> 2 -> 1"
elastic_job el-etcd etcd 1 2
wait_for 120 "el-etcd: first rendezvous" logs_have el-etcd 'rendezvous world=1 rank=0' || dump el-etcd
wait_for 60 "el-etcd: the autoscaler measures" bash -c "$bin/yardctl job show el-etcd -o json | grep -q '\"utilisation\": [0-9]'"
wait_for 150 "el-etcd: one worker" one_worker el-etcd
scale_cycle el-etcd
echo stop >"$tmp/el-etcd.ctl"
wait_job el-etcd Succeeded 120 || dump el-etcd

say "4. Paddle elastic (a stand-in for its launcher, on the same etcd): 1 -> 2 -> 1"
echo low >"$tmp/el-paddle.ctl"
cat >"$tmp/el-paddle.yaml" <<YAML
name: el-paddle
tasks:
  - name: train
    kind: paddle
    mode: elastic
    elastic: { backend: etcd, target: 50, minReplicas: 1, maxReplicas: 2 }
    roles:
      trainer:
        container:
          image: host
          resources: { cpu: 1, memory: 256Mi }
          command: python3 $progs/paddle_elastic_check.py $tmp/el-paddle.ctl
    advanced: { cleanup: all }
YAML
submit "$tmp/el-paddle.yaml"
wait_for 60 "el-paddle: trainer registered in etcd" logs_have el-paddle 'registered=1' || dump el-paddle
logs_have el-paddle "paddle-elastic np=1:2 endpoint=127\.0\.0\.[23]:[0-9]+ id=0" || fail "el-paddle: launcher variables"
echo high >"$tmp/el-paddle.ctl"
wait_for 90 "el-paddle: ScaledOut 1 -> 2" has_events el-paddle ScaledOut || dump el-paddle
wait_for 60 "el-paddle: two trainers registered" logs_have el-paddle 'registered=2' || dump el-paddle
echo low >"$tmp/el-paddle.ctl"
wait_for 90 "el-paddle: ScaledIn 2 -> 1" has_events el-paddle ScaledIn || dump el-paddle
echo stop >"$tmp/el-paddle.ctl"
wait_job el-paddle Succeeded 60 || dump el-paddle

for j in el-c10d el-timeout el-etcd el-paddle; do "$bin/yardctl" job delete $j >/dev/null; done
finish e2e.elastic
