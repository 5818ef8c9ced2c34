#!/usr/bin/env bash
# Any spec the master accepts runs on any node (issue: "one ordinary job can wedge a node"):
# a 0.9 MiB spec (one large environment value) whose ten runs all land on one node makes
# ten 0.9 MiB replica specs. The heartbeat's answer carries at most ~4 MiB of specs and
# says `more`; the agent beats again at once for the rest. The job succeeds, the agent
# registers once (no drop-and-re-register loop), and a cancel of another job on the node is
# delivered meanwhile.
bin=$1
source "$(dirname "$0")/cluster.sh"

start_master
start_agent 1 --cpu 2 --memory 4Gi
wait_nodes 1

# 0.9 MiB of text in ten variables (Linux refuses one exec string over 128 KiB).
blob=$(head -c 70000 /dev/zero | base64 -w0 | head -c 92160)
env=""
for i in 0 1 2 3 4 5 6 7 8 9; do env="$env, BLOB$i: \"$blob\""; done
cat >"$tmp/big.yaml" <<YAML
name: big-spec
tasks:
  - name: fanout
    kind: container-job
    completions: 10
    parallelism: 10
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: sh -c
      args: "'n=0; for v in \"\$BLOB0\" \"\$BLOB1\" \"\$BLOB2\" \"\$BLOB3\" \"\$BLOB4\" \"\$BLOB5\" \"\$BLOB6\" \"\$BLOB7\" \"\$BLOB8\" \"\$BLOB9\"; do n=\$((n + \${#v})); done; echo \$n bytes; test \$n -eq 921600 && echo blob intact'"
      env: { ${env#, } }
YAML
ls -l "$tmp/big.yaml" | awk '{print "spec bytes:", $5}'
cat >"$tmp/other.yaml" <<'YAML'
name: other
tasks:
  - name: wait
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep 600 }
YAML
submit "$tmp/other.yaml"
for _ in $(seq 100); do [ "$(jshow other 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
t0=$(date +%s.%N)
submit "$tmp/big.yaml"
"$bin/yardctl" job cancel other >/dev/null || fail "cancel other"
wait_job big-spec Succeeded 60
say "ten 0.9 MiB replica specs delivered and run in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
wait_job other Cancelled 20
n=$(grep -c 'registered with master' "$tmp/agent1.err" "$tmp/agent1.out" 2>/dev/null | awk -F: '{s += $2} END {print s}')
[ "$n" -eq 1 ] || fail "the agent registered $n times (a connection drop loop?)"
"$bin/yardctl" logs big-spec 2>/dev/null | grep -c 'blob intact' | grep -qx 10 || fail "not every run saw its whole environment: $("$bin/yardctl" logs big-spec 2>&1 | head -5)"
"$bin/yardctl" node list | grep -q 'node-1 .* ready' || fail "node-1 is not ready: $("$bin/yardctl" node list)"

finish "bigspec"
