#!/usr/bin/env bash
# Transport security end to end (docs/security.md): TLS 1.3 on every API, agents joining with a
# join token and the CA (file or pinned fingerprint), certificates from another CA refused on
# both sides, an agent's own API answering only the master, node identity bound to the last
# join's certificate (node delete revokes it), and the join token nowhere in argv or logs.
set -u
bin=$1
source "$(dirname "$0")/cluster.sh"
py=/usr/bin/python3
start_master
ca="$tmp/master/ca.pem"
fp=$(sed -n 's/.*cluster CA .*, fingerprint \(sha256:[0-9a-f]*\) .*/\1/p' "$tmp/master.err" | head -1)
[ -n "$fp" ] || fail "the master did not log its CA fingerprint: $(head -5 "$tmp/master.err")"

# A second, unrelated cluster: its CA and its master's certificate are another CA's.
"$bin/yard-master" --data-dir "$tmp/other" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 >"$tmp/other.out" 2>"$tmp/other.err" &
other=$!
pids+=("$other")
for _ in $(seq 100); do grep -q '^agents ' "$tmp/other.out" && break; sleep 0.1; done
other_client=$(sed -n 's/^listening //p' "$tmp/other.out")
other_ca="$tmp/other/ca.pem"

say "yardctl verifies the master: another cluster's CA is refused, so is no CA"
out=$("$bin/yardctl" --ca "$other_ca" queue list 2>&1) && fail "yardctl accepted a master from another CA: $out"
echo "$out" | grep -q "certificate did not verify" || fail "wrong-CA message: $out"
out=$("$bin/yardctl" --master "$other_client" queue list 2>&1) && fail "yardctl trusted another cluster's master: $out"
out=$(env -u YARD_CA YARD_CONFIG="$tmp/none.toml" "$bin/yardctl" queue list 2>&1) && fail "yardctl without a CA: $out"
echo "$out" | grep -q "no CA certificate to verify the master" || fail "no-CA message: $out"
"$bin/yardctl" queue list >/dev/null || fail "yardctl with the right CA and token failed"

say "plaintext is refused on the client API and the agent API"
$py - "$YARD_MASTER" "$agents" <<'PY' || fail "a plaintext peer was answered"
import socket, struct, sys
for addr in sys.argv[1:]:
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(struct.pack("<I", 8) + b"\0" * 8)
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    # At most a TLS alert record (type 21), never a frame.
    assert data == b"" or data[0] == 21, (addr, data[:16])
PY

say "an agent joins with the CA's fingerprint; a wrong fingerprint or another CA is refused"
YARD_JOIN_TOKEN=e2e-token "$bin/yard-agent" --master "127.0.0.1:$agent_port" --ca-fingerprint "sha256:$(printf '0%.0s' $(seq 64))" \
  --name wrongpin --address 127.0.0.8 --data-dir "$tmp/agent8" --cgroup-parent "yard/$tag-8" >/dev/null 2>"$tmp/wrongpin.err"
rc=$?
[ $rc -eq 1 ] || fail "agent with a wrong pin: exit $rc, want 1"
grep -q "the master's CA fingerprint is $fp, expected sha256:0000" "$tmp/wrongpin.err" || fail "wrong-pin message: $(cat "$tmp/wrongpin.err")"
YARD_JOIN_TOKEN=e2e-token timeout 20 "$bin/yard-agent" --master "127.0.0.1:$agent_port" --ca "$other_ca" \
  --name otherca --address 127.0.0.8 --data-dir "$tmp/agent8" --cgroup-parent "yard/$tag-8" >/dev/null 2>"$tmp/otherca.err"
rc=$?
[ $rc -eq 1 ] || fail "agent with another cluster's CA: exit $rc, want 1"
grep -q "certificate did not verify" "$tmp/otherca.err" || fail "other-CA message: $(cat "$tmp/otherca.err")"
"$bin/yardctl" node list | grep -q wrongpin && fail "a refused agent was registered"

# node-1 joins by fingerprint, with the token on its command line (scrubbed from argv at once).
: >"$tmp/agent1.out"
"$bin/yard-agent" --master "127.0.0.1:$agent_port" --ca-fingerprint "$fp" --token e2e-token --name node-1 \
  --address 127.0.0.2 --data-dir "$tmp/agent1" --port-range 31100-31199 --cgroup-parent "yard/$tag-1" \
  --allow-host-tasks >"$tmp/agent1.out" 2>>"$tmp/agent1.err" &
agent_pid[1]=$!
pids+=("$!")
start_agent 2
wait_nodes 2
for f in node.key node.pem ca.pem; do [ -f "$tmp/agent1/tls/$f" ] || fail "node-1 has no tls/$f"; done
[ "$(stat -c %a "$tmp/agent1/tls/node.key")" = 600 ] || fail "node.key mode $(stat -c %a "$tmp/agent1/tls/node.key")"
cmp -s "$tmp/agent1/tls/ca.pem" "$ca" || fail "node-1 pinned a CA other than the master's"

say "the join token is in no argument list and no log"
tr '\0' ' ' <"/proc/${agent_pid[1]}/cmdline" | grep -q e2e-token && fail "the join token is readable in node-1's argv"
tr '\0' ' ' <"/proc/${agent_pid[1]}/cmdline" | grep -q -- "--token xxxxxxxxx" || fail "node-1's argv was not scrubbed"
grep -l e2e-token "$tmp"/*.err "$tmp"/*.out && fail "the join token appears in a log"
grep -q "warning: --token puts the join token" "$tmp/agent1.err" || fail "no warning about --token"

say "an agent's own API answers only the master: another node's certificate is refused"
api2=$(sed -n 's/^agent node-2 api //p' "$tmp/agent2.out")
[ -n "$api2" ] || fail "node-2's API address unknown"
src=$(cd "$(dirname "$0")/../.." && pwd)
echo '(id = 1, wake = void)' | capnp encode "$src/schema/agent.capnp" AgentCall >"$tmp/call.bin" || fail "capnp encode"
$py - "$api2" "$tmp/agent1/tls" "$tmp/call.bin" <<'PY' || fail "node-1's certificate could call node-2's API"
import socket, ssl, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
d = sys.argv[2]
ctx = ssl.create_default_context(cafile=d + "/ca.pem")
ctx.check_hostname = False
ctx.load_cert_chain(d + "/node.pem", d + "/node.key")
s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=5))
msg = open(sys.argv[3], "rb").read()
s.sendall(struct.pack("<I", len(msg)) + msg)
data = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except (ssl.SSLError, ConnectionResetError, socket.timeout):
    pass
assert b"only the master may call this agent" in data, data[:200]
PY
grep -q "refused a call from .*only the master may call this agent, not \"node:node-1\"" "$tmp/agent2.err" ||
  fail "node-2 did not log the refused call: $(tail -3 "$tmp/agent2.err")"

say "a restarted agent needs no token: it keeps its certificate"
kill "${agent_pid[1]}"; wait "${agent_pid[1]}" 2>/dev/null
"$bin/yard-agent" --master "127.0.0.1:$agent_port" --name node-1 --address 127.0.0.2 --data-dir "$tmp/agent1" \
  --port-range 31100-31199 --cgroup-parent "yard/$tag-1" --allow-host-tasks >"$tmp/agent1.out" 2>>"$tmp/agent1.err" &
agent_pid[1]=$!
pids+=("$!")
sleep 1
wait_nodes 2

say "node delete revokes the node's certificate: its agent is refused until it joins again"
"$bin/yardctl" node drain node-1 >/dev/null
"$bin/yardctl" node delete node-1 >/dev/null || fail "node delete node-1 failed"
for _ in $(seq 100); do kill -0 "${agent_pid[1]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${agent_pid[1]}" 2>/dev/null && fail "the deleted node's agent keeps running"
grep -q "the certificate of node node-1 is no longer valid" "$tmp/agent1.err" || fail "revocation not explained: $(tail -3 "$tmp/agent1.err")"
"$bin/yardctl" node list | grep -q '^node-1 ' && fail "node-1 came back with a revoked certificate"
rm -rf "$tmp/agent1/tls"
start_agent 1
wait_nodes 2

say "a job runs over the secured cluster"
cat >"$tmp/job.yaml" <<'YAML'
name: e2e-tls
tasks:
  - name: hello
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c, args: "'echo over tls'" }
YAML
submit "$tmp/job.yaml"
wait_job e2e-tls Succeeded 30
"$bin/yardctl" logs e2e-tls | grep -q "over tls" || fail "logs over TLS: $("$bin/yardctl" logs e2e-tls 2>&1)"
finish e2e.tls
