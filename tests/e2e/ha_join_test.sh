#!/usr/bin/env bash
# Joining a master with master_join_token (docs/ha.md, "Joining"). A joining master is given
# the cluster CA's key, so a cluster with a master_join_token admits masters with it only: the
# agents' join_token, and a join token from `yardctl token create`, are refused for a master
# (the joiner stops at once, naming the refusal) while agents still join with them; a master
# presenting the master_join_token becomes a voter. Both joins are in the audit trail.
# That voter joins through a host name and is dialled by one (--raft-advertise), as masters
# on a real network are named.
YARD_E2E_ARGS=("$@")
source "$(dirname "$0")/test_hosts.sh" yard-m1.test yard-m2.test
bin=$1
source "$(dirname "$0")/cluster.sh"

declare -A cport aport rport mpid
for i in 1 2; do cport[$i]=$(free_port); aport[$i]=$(free_port); rport[$i]=$(free_port); done
printf 'join_token = "e2e-token"\nmaster_join_token = "master-token"\nheartbeat_timeout = "6s"\n' >"$tmp/ha.toml"
printf 'join_token = "e2e-token"\nheartbeat_timeout = "6s"\n' >"$tmp/joiner.toml"
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; cleanup' EXIT
start_member() {  # start_member I CONFIG [args...]
  local i=$1 config=$2; shift 2
  "$bin/yard-master" --name "m$i" --config "$config" --data-dir "$tmp/m$i" --listen "127.0.0.1:${cport[$i]}" \
    --agent-listen "127.0.0.1:${aport[$i]}" --raft-listen "127.0.0.1:${rport[$i]}" --metrics-listen "" \
    "$@" >>"$tmp/m$i.out" 2>>"$tmp/m$i.err" &
  mpid[$i]=$!
  pids+=("$!")
}

start_member 1 "$tmp/ha.toml"
wait_log "$tmp/m1.out" '^listening ' 20 || fail "m1 did not start: $(cat "$tmp/m1.err")"
fp=$(sed -n 's/.*fingerprint \(sha256:[0-9a-f]*\).*/\1/p' "$tmp/m1.err" | head -1)
export YARD_MASTER="127.0.0.1:${cport[1]}" YARD_CA="$tmp/m1/ca.pem" YARD_TOKEN
YARD_TOKEN=$(cat "$tmp/m1/admin.token")

say "the agents' join_token does not admit a master"
start_member 2 "$tmp/joiner.toml" --join "127.0.0.1:${rport[1]}" --ca-fingerprint "$fp"
for _ in $(seq 100); do kill -0 "${mpid[2]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${mpid[2]}" 2>/dev/null && fail "m2 still runs with the agents' join token"
grep -q "join token refused for a master" "$tmp/m2.err" || fail "m2's refusal: $(tail -3 "$tmp/m2.err")"
# Exit 2, which systemd's unit does not restart: retrying cannot mend a refused token.
wait "${mpid[2]}"; rc=$?
[ $rc = 2 ] || fail "m2 refused a token exited $rc, not 2"
[ -e "$tmp/m2/ca.key" ] && fail "m2 was given the CA's key"

say "nor does a join token from yardctl token create"
tok=$("$bin/yardctl" -o json token create --uses 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])') ||
  fail "token create"
start_member 2 "$tmp/joiner.toml" --join "127.0.0.1:${rport[1]}" --join-token "$tok" --ca-fingerprint "$fp"
for _ in $(seq 100); do kill -0 "${mpid[2]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${mpid[2]}" 2>/dev/null && fail "m2 still runs with a token from yardctl token create"
[ "$(grep -c "join token refused for a master" "$tmp/m2.err")" = 2 ] || fail "m2's second refusal: $(tail -3 "$tmp/m2.err")"

say "a master whose CA is not the pinned one is refused at once, and so is a malformed pin"
wrong="sha256:$(printf '0%.0s' $(seq 64))"
start_member 2 "$tmp/joiner.toml" --join "127.0.0.1:${rport[1]}" --master-join-token master-token --ca-fingerprint "$wrong"
for _ in $(seq 100); do kill -0 "${mpid[2]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${mpid[2]}" 2>/dev/null && fail "m2 still runs (retrying?) with a CA fingerprint that is not the cluster's"
grep -q -- "--join: refusing the master at 127.0.0.1:${rport[1]}: the master's CA fingerprint is $fp, expected $wrong" \
  "$tmp/m2.err" || fail "m2's refusal of the wrong CA: $(tail -3 "$tmp/m2.err")"
[ -e "$tmp/m2/ca.key" ] && fail "m2 kept a CA key after refusing the master"
wait "${mpid[2]}"; rc=$?
[ $rc = 2 ] || fail "m2 refusing the master's CA exited $rc, not 2"
"$bin/yard-master" --data-dir "$tmp/m2" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --raft-listen 127.0.0.1:0 \
  --join "127.0.0.1:${rport[1]}" --master-join-token master-token --ca-fingerprint sha256:zz >"$tmp/m2.bad" 2>&1
rc=$?
[ $rc = 2 ] && grep -q 'ca_fingerprint): "sha256:zz" must be sha256: followed by 64 hex digits' "$tmp/m2.bad" ||
  fail "a malformed --ca-fingerprint: exit $rc: $(cat "$tmp/m2.bad")"

say "the agents still join with their tokens"
ln -s "$tmp/m1" "$tmp/master"  # where start_agent finds the CA
AGENT_MASTER="127.0.0.1:${aport[1]}" start_agent 1
wait_nodes 1

say "the master_join_token admits a master, which becomes a voter"
start_member 2 "$tmp/joiner.toml" --join "yard-m1.test:${rport[1]}" --master-join-token master-token --ca-fingerprint "$fp" \
  --raft-advertise "yard-m2.test:${rport[2]}"
wait_log "$tmp/m2.err" 'this master is a voter' 30 || fail "m2 did not become a voter: $(tail -3 "$tmp/m2.err")"
cmp -s "$tmp/m1/ca.key" "$tmp/m2/ca.key" || fail "m2 does not hold the cluster's CA key"
status=$("$bin/yardctl" --master "yard-m1.test:${cport[1]},yard-m2.test:${cport[2]}" -o json cluster status) ||
  fail "cluster status: $status"
echo "$status" | python3 -c '
import json, sys
members = {m["name"]: m for m in json.load(sys.stdin)["members"]}
assert sorted(members) == ["m1", "m2"], sorted(members)
assert members["m2"]["raftAddress"] == sys.argv[1], members["m2"]
assert members["m2"]["role"] == "follower" and members["m2"]["appliedIndex"] > 0, members["m2"]
' "yard-m2.test:${rport[2]}" || fail "cluster status with m2 named: $status"

say "the raft port tells a peer without a master certificate nothing (whois, version)"
# A master's certificate signed here with the cluster's CA key, as a member's is.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=yard-master \
  -keyout "$tmp/peer.key" -out "$tmp/peer.csr" 2>/dev/null &&
  openssl x509 -req -in "$tmp/peer.csr" -CA "$tmp/m1/ca.pem" -CAkey "$tmp/m1/ca.key" -CAcreateserial -days 1 \
    -out "$tmp/peer.pem" 2>/dev/null || fail "a master certificate for the test"
python3 - "${rport[1]}" "$tmp" <<'PY' || fail "whois and version on the raft port"
import socket, ssl, struct, sys
port, tmp = int(sys.argv[1]), sys.argv[2]
def call(fields, cert):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(tmp + "/m1/ca.pem")
    if cert:
        ctx.load_cert_chain(tmp + "/peer.pem", tmp + "/peer.key")
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5)) as s:
        fields = [b"call"] + [f.encode() for f in fields]
        body = struct.pack(">I", len(fields)) + b"".join(struct.pack(">I", len(f)) + f for f in fields)
        s.sendall(struct.pack(">I", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            more = s.recv(65536)
            if not more:
                break
            data += more
    n, pos, out = struct.unpack(">I", data[4:8])[0], 8, []
    for _ in range(n):
        size = struct.unpack(">I", data[pos:pos + 4])[0]
        out.append(data[pos + 4:pos + 4 + size].decode())
        pos += 4 + size
    return out
for what in ("whois", "version"):
    guest = call([what], False)
    assert guest == ["error", what + ": only a master (certificate yard-master) may ask"], guest
    master = call([what], True)
    assert master[0] == "ok", master
assert call(["whois"], True)[1] == "m1"
PY

say "a running master taken out by cluster remove is told so"
"$bin/yardctl" cluster remove m2 >/dev/null || fail "cluster remove m2"
wait_log "$tmp/m2.err" 'this master was removed from the cluster' 5 || fail "m2 was not told: $(tail -3 "$tmp/m2.err")"

say "each join is in the audit trail"
audit=$("$bin/yardctl" -o json audit 2>&1) || fail "audit: $audit"
echo "$audit" | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r.get("request") == "master.join"]
outcomes = sorted(r["outcome"] for r in rows)
assert outcomes == ["ok", "refused", "refused"], outcomes
assert all(r["source"].startswith("127.0.0.1:") for r in rows), rows  # where each joiner called from
' || fail "the audit trail's master joins: $(echo "$audit" | grep -o '"master.join"[^}]*' | head -5)"
for i in 1 2; do kill "${mpid[$i]}" 2>/dev/null; done
for i in 1 2; do wait "${mpid[$i]}" 2>/dev/null; done
finish e2e.ha_join
