#!/usr/bin/env bash
# /metrics on a real master and agent on loopback (docs/operations.md, "Metrics"): both
# expositions pass `promtool check metrics` (Prometheus' own parser and linter) with no
# complaint, and say what the cluster does: the submitted jobs by state, one ready node, a
# scheduling pass counted, tasks pending by reason (a dependency, GPUs), the requests and
# submissions counted, the running replica and its memory on the agent. The HTTP endpoint is
# strict; metrics_listen errors name the key and the value; a taken default port turns
# /metrics off without stopping the daemon. The alert rules pass `promtool check rules` and
# `promtool test rules`; the Grafana dashboard is JSON whose queries parse and name only
# metrics the daemons expose.
bin=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/cluster.sh"
command -v promtool >/dev/null || { echo "promtool not found: run scripts/setup.sh (Debian's prometheus package)"; exit 1; }
py=/usr/bin/python3

# value FILE SERIES: the value of the sample line `SERIES VALUE` (exact series text), or "".
value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }
# check FILE SERIES OP NUMBER: the sample's value compares as asked.
check() {
  local v
  v=$(value "$1" "$2")
  [ -n "$v" ] || { fail "$(basename "$1"): no sample $2"; return; }
  $py -c "import sys; v=float('$v'); sys.exit(0 if v $3 $4 else 1)" || fail "$(basename "$1"): $2 is $v, want $3 $4"
}
scrape() {  # scrape ADDR FILE
  curl -sf "http://$1/metrics" -o "$2" || fail "GET http://$1/metrics failed"
}
lint() {  # lint FILE: promtool parses it and finds nothing to say
  local out
  out=$(promtool check metrics <"$1" 2>&1) || fail "promtool check metrics $(basename "$1"): $out"
  [ -z "$out" ] || fail "promtool check metrics $(basename "$1") complains: $out"
}

say "a master and an agent, each with /metrics on a free loopback port"
start_master --metrics-listen 127.0.0.1:0
start_agent 1 --cpu 2 --memory 2Gi --metrics-listen 127.0.0.1:0
wait_nodes 1
master_metrics=$(sed -n 's/^metrics //p' "$tmp/master.out")
for _ in $(seq 50); do grep -q '^metrics ' "$tmp/agent1.out" && break; sleep 0.1; done
agent_metrics=$(sed -n 's/^metrics //p' "$tmp/agent1.out")
[ -n "$master_metrics" ] || fail "the master printed no metrics address: $(cat "$tmp/master.out")"
[ -n "$agent_metrics" ] || fail "the agent printed no metrics address: $(cat "$tmp/agent1.out")"
grep -q "metrics on http://$master_metrics/metrics" "$tmp/master.err" || fail "the master's log does not say where /metrics is"

say "a job runs (one task running, one waiting for it), a GPU job waits, one submission is refused"
cat >"$tmp/work.yaml" <<'YAML'
name: metrics-work
tasks:
  - name: work
    kind: container-job
    container:
      image: host
      resources: { cpu: 500m, memory: 128Mi }
      command: sleep
      args: "120"
  - name: after
    kind: container-job
    dependsOn: [work]
    container:
      image: host
      resources: { cpu: 500m, memory: 64Mi }
      command: "true"
YAML
cat >"$tmp/gpu.yaml" <<'YAML'
name: metrics-gpu
tasks:
  - name: needs-gpu
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 64Mi, gpu: 1 }
      command: "true"
YAML
sed 's/^name: metrics-gpu/name: metrics-nowhere\nqueue: no-such-queue/' "$tmp/gpu.yaml" >"$tmp/refused.yaml"
submit "$tmp/work.yaml"
submit "$tmp/gpu.yaml"
"$bin/yardctl" job submit "$tmp/refused.yaml" >/dev/null 2>&1 && fail "a job for a queue that does not exist was accepted"
wait_job metrics-work Running 30
# The agent samples usage every 2 s: wait for the replica's memory to show.
for _ in $(seq 50); do
  scrape "$agent_metrics" "$tmp/agent.prom"
  grep -q '^yard_replica_memory_bytes{job="metrics-work"' "$tmp/agent.prom" && break
  sleep 0.2
done
"$bin/yardctl" job list >/dev/null  # one more request, answered ok
scrape "$master_metrics" "$tmp/master.prom"

say "promtool accepts both expositions without a lint complaint"
lint "$tmp/master.prom"
lint "$tmp/agent.prom"

say "the master's families say what the cluster does"
m=$tmp/master.prom
check "$m" 'yard_jobs{queue="default",state="Running"}' == 1
check "$m" 'yard_jobs{queue="default",state="Queued"}' == 1
check "$m" 'yard_jobs{queue="default",state="Failed"}' == 0
check "$m" 'yard_tasks{queue="default",state="Waiting"}' == 1
check "$m" 'yard_tasks_pending{queue="default",reason="dependencies"}' == 1
check "$m" 'yard_tasks_pending{queue="default",reason="gpus"}' == 1
check "$m" 'yard_tasks_pending{queue="default",reason="quota"}' == 0
check "$m" 'yard_nodes{state="ready"}' == 1
check "$m" 'yard_nodes{state="down"}' == 0
check "$m" 'yard_node_state{node="node-1",state="ready"}' == 1
check "$m" 'yard_node_heartbeat_age_seconds{node="node-1"}' '<' 10
check "$m" 'yard_scheduler_pass_duration_seconds_count' '>' 0
check "$m" 'yard_scheduler_pass_duration_seconds_bucket{le="+Inf"}' '>' 0
check "$m" 'yard_scheduler_placements_total' '>=' 1
check "$m" 'yard_job_submissions_total{outcome="accepted"}' == 2
check "$m" 'yard_job_submissions_total{outcome="refused"}' == 1
check "$m" 'yard_api_requests_total{method="jobSubmit",outcome="ok"}' == 2
check "$m" 'yard_api_requests_total{method="jobSubmit",outcome="error"}' == 1
check "$m" 'yard_api_requests_total{method="jobList",outcome="ok"}' '>=' 1
check "$m" 'yard_api_request_duration_seconds_count{method="jobSubmit"}' == 3
check "$m" 'yard_queue_used_cpu_cores{queue="default"}' == 0.5
check "$m" 'yard_queue_used_memory_bytes{queue="default"}' == 134217728
check "$m" 'yard_queue_quota_gpus{queue="default"}' == 'float("inf")'
check "$m" 'yard_queue_oldest_queued_job_age_seconds{queue="default"}' '>' 0
check "$m" 'yard_store_commit_duration_seconds_count{registry="jobs"}' '>' 0
check "$m" 'yard_store_commit_duration_seconds_count{registry="nodes"}' '>' 0
check "$m" 'yard_store_transactions_total' '>' 0
check "$m" 'yard_store_writes_total{outcome="committed"}' '>' 0
check "$m" 'process_resident_memory_bytes' '>' 0
grep -q '^yard_build_info{version="' "$m" || fail "no yard_build_info"

say "the agent's families: the running replica, its usage and its start"
a=$tmp/agent.prom
w='{job="metrics-work",task="work",role="run",index="0"}'
check "$a" 'yard_replicas{driver="host",state="Running"}' == 1
check "$a" 'yard_replicas{driver="host",state="Exited"}' == 0
check "$a" "yard_replica_memory_bytes$w" '>' 0
check "$a" "yard_replica_memory_limit_bytes$w" == 134217728
check "$a" "yard_replica_cpu_seconds_total$w" '>=' 0
check "$a" "yard_replica_restarts$w" == 0
check "$a" 'yard_replica_starts_total{driver="host"}' == 1
check "$a" 'yard_replica_start_duration_seconds_count{driver="host"}' == 1
check "$a" 'yard_gpus' '>=' 0

say "the endpoint is strict: GET and HEAD of /metrics only"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code -X POST "http://$master_metrics/metrics")" = 405 ] || fail "POST /metrics was not refused with 405"
[ "$(code "http://$master_metrics/other")" = 404 ] || fail "GET /other was not 404"
[ "$(code -I "http://$agent_metrics/metrics")" = 200 ] || fail "HEAD /metrics was not 200"
curl -sI "http://$agent_metrics/metrics" | grep -qi '^content-type: text/plain; version=0.0.4' || fail "wrong Content-Type"

say "metrics_listen errors name the key and the value; a taken address is an error"
printf 'metrics_listen = "nonsense"\n' >"$tmp/bad-master.toml"
out=$("$bin/yard-master" --config "$tmp/bad-master.toml" --data-dir "$tmp/m2" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "bad metrics_listen: exit $rc, want 2"
echo "$out" | grep -q 'metrics_listen: "nonsense" is not HOST:PORT' || fail "bad metrics_listen: $out"
out=$("$bin/yard-master" --data-dir "$tmp/m2" --metrics-listen 127.0.0.1:99999 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "bad --metrics-listen: exit $rc, want 2"
echo "$out" | grep -q -- '--metrics-listen: "127.0.0.1:99999": port must be 0-65535' || fail "bad --metrics-listen: $out"
printf 'token = "t"\nmetrics_listen = 7781\n' >"$tmp/bad-agent.toml"
out=$("$bin/yard-agent" --config "$tmp/bad-agent.toml" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "agent metrics_listen = 7781: exit $rc, want 2"
echo "$out" | grep -q 'metrics_listen: must be a string' || fail "agent metrics_listen = 7781: $out"
out=$("$bin/yard-agent" --token t --metrics-listen example.org:80 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "agent --metrics-listen example.org:80: exit $rc, want 2"
echo "$out" | grep -q -- '--metrics-listen: "example.org:80": "example.org" is not an IP address' || fail "agent flag: $out"
out=$(timeout 10 "$bin/yard-master" --data-dir "$tmp/m3" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 \
  --metrics-listen "$master_metrics" 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "metrics address in use: exit $rc, want 1"
echo "$out" | grep -q "/metrics: cannot listen on $master_metrics" || fail "metrics address in use: $out"

say "the default address taken (another daemon has it): /metrics is off, the daemon runs"
$py -c 'import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a daemon binds: a TIME_WAIT left there is no owner
try:
    s.bind(("127.0.0.1", 7780)); s.listen(1)
except OSError:
    pass  # taken already: by someone else, which is the case under test too
time.sleep(60)' >/dev/null 2>&1 &
holder=$!
pids+=("$holder")
sleep 0.5
"$bin/yard-master" --data-dir "$tmp/m4" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >"$tmp/m4.out" 2>"$tmp/m4.err" &
m4=$!
pids+=("$m4")
for _ in $(seq 50); do grep -q '^agents ' "$tmp/m4.out" && break; sleep 0.1; done
grep -q '^listening ' "$tmp/m4.out" || fail "with the default metrics port taken the master did not start: $(cat "$tmp/m4.err")"
grep -q '/metrics is off' "$tmp/m4.err" || fail "the master did not say /metrics is off: $(cat "$tmp/m4.err")"
grep -q '^metrics ' "$tmp/m4.out" && fail "the master claims /metrics with its default port taken"
kill "$m4" "$holder" 2>/dev/null

say "alert rules: promtool check rules and promtool test rules"
out=$(promtool check rules "$src/configs/prometheus/yard-alerts.yml" 2>&1) || fail "promtool check rules: $out"
echo "$out" | grep -q 'SUCCESS: 3 rules found' || fail "promtool check rules: $out"
out=$(cd "$src/tests/e2e" && promtool test rules metrics_alerts_test.yml 2>&1) || fail "promtool test rules: $out"

say "the Grafana dashboard: JSON, queries that parse, only metrics the daemons expose"
$py - "$src/configs/grafana/yard-dashboard.json" "$m" "$a" "$tmp/dashboard-rules.yml" <<'PY' || fail "dashboard check failed"
import json, re, sys
dash = json.load(open(sys.argv[1]))
exposed = set()
for f in sys.argv[2:4]:
    for line in open(f):
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            exposed.add(name)
            if kind == "histogram":
                exposed.update({name + "_bucket", name + "_sum", name + "_count"})
# Families that exist only where there is something to say (a GPU with NVML, an autoscaler
# decision, an image pull's outcome): documented, not exposed by this cluster.
exposed.update({"yard_gpu_utilization_ratio", "yard_gpu_memory_used_bytes", "yard_gpu_memory_total_bytes",
                "yard_autoscaler_decisions_total", "yard_image_pulls_total", "yard_replica_oom_kills_total"})
exprs, bad = [], []
def walk(panels):
    for p in panels:
        walk(p.get("panels", []))
        for t in p.get("targets", []):
            exprs.append((p["title"], t["expr"]))
walk(dash["panels"])
for var in dash["templating"]["list"]:
    if var["type"] == "query":
        exprs.append(("variable " + var["name"], var["query"]["query"].replace("label_values(", "").split(",")[0]))
for title, e in exprs:
    for name in re.findall(r"\b(?:yard|process)_[a-z_]+", e):
        if name not in exposed:
            bad.append(f"{title}: {name} is not exposed")
if bad:
    print("\n".join(bad)); sys.exit(1)
# Every query as a recording rule: `promtool check rules` parses the PromQL.
with open(sys.argv[4], "w") as out:
    out.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$master", ".*").replace("$agent", ".*").replace("$queue", ".*")
        out.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(e)}\n")
print(f"{len(exprs)} queries")
PY
if [ -f "$tmp/dashboard-rules.yml" ]; then
  out=$(promtool check rules "$tmp/dashboard-rules.yml" 2>&1) || fail "a dashboard query does not parse: $out"
fi

finish metrics
