#!/usr/bin/env bash
# Several master addresses (docs/reliability.md, "Several master addresses"): yardctl and
# yard-agent take "A1,A2" and use the first that answers. Here the first address of each list
# is a port nothing listens on: the agent joins, registers, ships a finished replica's log and
# comes back after a master restart through the second; yardctl answers through it; with no
# address answering, yardctl's error names each.
#
# Addresses may be host names, resolved each time they are dialled: the test runs in a mount
# namespace of its own whose /etc/hosts also names 127.0.0.1 yard-master-a.test and
# yard-master-b.test (the machine's /etc/hosts is untouched).
YARD_E2E_ARGS=("$@")
source "$(dirname "$0")/test_hosts.sh" yard-master-a.test yard-master-b.test
bin=$1
source "$(dirname "$0")/cluster.sh"

dead=$(free_port)  # nothing listens here
start_master
# The agent's second address is a host name.
AGENT_MASTER="127.0.0.1:$dead,yard-master-a.test:$agent_port" start_agent 1 --cpu 2 --memory 1Gi
wait_nodes 1
real=$YARD_MASTER
port=${real##*:}

say "yardctl with a dead address first answers through the next"
export YARD_MASTER="127.0.0.1:$dead,$real"
"$bin/yardctl" node list | grep -q '^node-1 ' || fail "node list through the list: $("$bin/yardctl" node list 2>&1)"
out=$("$bin/yardctl" --master "127.0.0.1:$dead, $real" queue list 2>&1) || fail "--master with a list: $out"

say "yardctl takes host names, and names one that does not resolve"
out=$("$bin/yardctl" --master "yard-master-b.test:$port" node list 2>&1) && echo "$out" | grep -q '^node-1 ' ||
  fail "--master by host name: $out"
out=$(YARD_MASTER="no-such-master.invalid:$port,yard-master-a.test:$port" "$bin/yardctl" queue list 2>&1) ||
  fail "YARD_MASTER with an unresolvable name first: $out"
out=$("$bin/yardctl" --master "no-such-master.invalid:$port" queue list 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "rc $rc for a name that does not resolve: $out"
echo "$out" | grep -q "cannot reach the master at no-such-master.invalid:$port: cannot resolve \"no-such-master.invalid\"" ||
  fail "the error does not name the unresolvable host: $out"
out=$("$bin/yardctl" --master "yard_master:$port" queue list 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q 'is neither an IP address nor a host name' || fail "rc $rc for a malformed name: $out"

say "a job runs, and its log is archived through the agent's second address"
cat >"$tmp/hello.yaml" <<YAML
name: hello-masters
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: [sh, -c, 'echo hello from a listed master'], resources: { cpu: 100m, memory: 32Mi } }
YAML
submit "$tmp/hello.yaml"
wait_job hello-masters Succeeded 30
for _ in $(seq 100); do grep -q 'log archived on the master' "$tmp/agent1.err" "$tmp/agent1.out" 2>/dev/null && break; sleep 0.1; done
grep -q 'log archived on the master' "$tmp/agent1.err" "$tmp/agent1.out" || fail "the log was not archived: $(tail -5 "$tmp/agent1.err")"
"$bin/yardctl" logs hello-masters | grep -q 'hello from a listed master' || fail "logs: $("$bin/yardctl" logs hello-masters 2>&1)"

say "after a master restart the agent comes back, trying the list in turn"
kill "$master"; wait "$master" 2>/dev/null
sleep 1
start_master
export YARD_MASTER="127.0.0.1:$dead,$YARD_MASTER"
for _ in $(seq 150); do "$bin/yardctl" node list 2>/dev/null | grep -q '^node-1 .* ready ' && break; sleep 0.2; done
"$bin/yardctl" node list | grep -q '^node-1 .* ready ' || fail "node-1 not ready after the restart: $("$bin/yardctl" node list 2>&1)"
grep -q "retrying with yard-master-a.test:$agent_port" "$tmp/agent1.err" "$tmp/agent1.out" ||
  fail "the agent's log does not show it moving to the next address: $(grep retrying "$tmp/agent1.err" | tail -3)"

say "with no address answering, the error names each and yardctl exits 1"
other=$(free_port)
out=$("$bin/yardctl" --master "127.0.0.1:$dead,127.0.0.1:$other" node list 2>&1); rc=$?
[ "$rc" -eq 1 ] || fail "rc $rc with no master: $out"
echo "$out" | grep -q "127.0.0.1:$dead" && echo "$out" | grep -q "127.0.0.1:$other" || fail "error does not name both: $out"

"$bin/yardctl" job delete hello-masters >/dev/null
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.masters
