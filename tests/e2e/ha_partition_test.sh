#!/usr/bin/env bash
# Three masters on Raft, each in a network namespace of its own on one bridge (docs/ha.md,
# "Failure cases"), under a steady load of job submissions from a fourth namespace. The
# leader is cut off from the others (its link to the bridge goes down): the two others elect a
# leader and accept writes again within 5 s, the cut-off master steps down and acknowledges
# nothing while cut off, and once its link is back it follows and catches up. Then the
# leader's kill -9 under the same load. Checks: every acknowledged submission is on every
# master, once; no two masters led in one term; yardctl resends a job change lost with its
# connection under the same request id; the HTTP API through a follower reaches the leader,
# and an Idempotency-Key makes a resent POST one job.
bin=$1
source "$(dirname "$0")/cluster.sh"

[ "$(id -u)" = 0 ] || { echo "e2e.ha_partition: needs root (network namespaces); skipped"; exit 0; }
command -v ip >/dev/null || { fail "no ip command (iproute2)"; finish e2e.ha_partition; }

ns="yh$$"  # namespaces yh<pid>-hub (the bridge), -m1, -m2, -m3 (masters), -cl (clients)
net=10.231.0
declare -A mpid
remove_namespaces() {
  local n p
  for n in hub m1 m2 m3 cl; do
    for p in $(ip netns pids "$ns-$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for n in hub m1 m2 m3 cl; do ip netns del "$ns-$n" 2>/dev/null; done
}
trap 'remove_namespaces; cleanup' EXIT

ip netns add "$ns-hub" || { fail "cannot make a network namespace"; finish e2e.ha_partition; }
ip -n "$ns-hub" link add br0 type bridge
ip -n "$ns-hub" link set br0 up
ip -n "$ns-hub" link set lo up
attach() {  # attach NAME ADDRESS: namespace $ns-NAME with ADDRESS on the bridge (hub side: h-NAME)
  ip netns add "$ns-$1"
  ip link add "h-$1-$$" netns "$ns-hub" type veth peer name eth0 netns "$ns-$1"
  ip -n "$ns-hub" link set "h-$1-$$" master br0 up
  ip -n "$ns-$1" addr add "$2/24" dev eth0
  ip -n "$ns-$1" link set eth0 up
  ip -n "$ns-$1" link set lo up
}
for i in 1 2 3; do attach "m$i" "$net.$i"; done
attach cl "$net.100"
in_ns() { local n=$1; shift; ip netns exec "$ns-$n" "$@"; }
cut() { ip -n "$ns-hub" link set "h-$1-$$" "$2"; }  # cut mI down|up

printf 'election_timeout_ms = 1000\n' >>"$tmp/master.toml"
dir_of() { echo "$tmp/m$1"; }
start_member() {  # start_member I [args...]
  local i=$1; shift
  # ip netns exec runs the master in its own process: $! is the master's PID.
  ip netns exec "$ns-m$i" "$bin/yard-master" --name "m$i" --config "$tmp/master.toml" --data-dir "$(dir_of "$i")" \
    --listen "$net.$i:7700" --agent-listen "$net.$i:7701" --raft-listen "$net.$i:7702" --http-listen "$net.$i:7710" \
    --metrics-listen "" "$@" >>"$tmp/m$i.out" 2>>"$tmp/m$i.err" &
  mpid[$i]=$!
  pids+=("$!")
}
export YARD_MASTER="$net.1:7700,$net.2:7700,$net.3:7700"
ctl() { in_ns cl "$bin/yardctl" "$@"; }
leader() {  # the index of the master that leads, asked of the masters the clients reach
  local addr
  addr=$(ctl cluster status -o json 2>/dev/null |
    python3 -c 'import json,sys; print([m["clientAddress"] for m in json.load(sys.stdin)["members"] if m["role"] == "leader"][0])' 2>/dev/null) || return 1
  case "$addr" in "$net.1:7700") echo 1 ;; "$net.2:7700") echo 2 ;; "$net.3:7700") echo 3 ;; *) return 1 ;; esac
}

say "three masters in three network namespaces"
start_member 1
wait_log "$tmp/m1.out" '^listening ' 20 || { fail "m1 did not start: $(tail -5 "$tmp/m1.err")"; finish e2e.ha_partition; }
fp=$(sed -n 's/.*fingerprint \(sha256:[0-9a-f]*\).*/\1/p' "$tmp/m1.err" | head -1)
export YARD_CA="$tmp/m1/ca.pem"
YARD_TOKEN=$(cat "$tmp/m1/admin.token"); export YARD_TOKEN
for i in 2 3; do
  start_member "$i" --join "$net.1:7702" --join-token e2e-token --ca-fingerprint "$fp"
  wait_log "$tmp/m$i.err" 'this master is a voter' 30 || fail "m$i did not become a voter: $(tail -5 "$tmp/m$i.err")"
done
[ "$(leader)" = 1 ] || fail "m1 does not lead"
ctl queue create load --cpu 1000 --memory 1000Gi >/dev/null || fail "queue load"

say "the HTTP API of a follower reaches the leader; an Idempotency-Key makes a resent POST one job"
cat >"$tmp/http.yaml" <<YAML
name: via-http
queue: load
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: [sleep, '1'], resources: { cpu: 100m, memory: 16Mi } }
YAML
http() {  # http METHOD URL [BODY-FILE] [IDEMPOTENCY-KEY]: prints "STATUS BODY"
  in_ns cl python3 - "$@" <<'PY'
import json, os, ssl, sys, urllib.request
method, url = sys.argv[1], sys.argv[2]
body = open(sys.argv[3], "rb").read() if len(sys.argv) > 3 and sys.argv[3] else None
ctx = ssl.create_default_context(cafile=os.environ["YARD_CA"])
ctx.check_hostname = False
req = urllib.request.Request(url, data=body, method=method)
req.add_header("Authorization", "Bearer " + os.environ["YARD_TOKEN"])
if len(sys.argv) > 4: req.add_header("Idempotency-Key", sys.argv[4])
try:
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r: print(r.status, r.read().decode())
except urllib.error.HTTPError as e: print(e.code, e.read().decode())
except Exception as e: print(0, e)
PY
}
out=$(http GET "https://$net.2:7710/api/v1/queues")
case "$out" in "200 "*'"load"'*) ;; *) fail "GET /api/v1/queues on a follower: $out" ;; esac
key=0123456789abcdef0123456789abcdef
first=$(http POST "https://$net.3:7710/api/v1/jobs" "$tmp/http.yaml" "$key")
again=$(http POST "https://$net.2:7710/api/v1/jobs" "$tmp/http.yaml" "$key")
case "$first" in "201 "*) ;; *) fail "POST /api/v1/jobs on a follower: $first" ;; esac
[ "$first" = "$again" ] || fail "a resent POST with the same Idempotency-Key: first $first, then $again"
out=$(http POST "https://$net.2:7710/api/v1/jobs" "$tmp/http.yaml" fedcba9876543210fedcba9876543210)
case "$out" in "409 "*"already"*) ;; *) fail "a second POST of via-http with another key: $out" ;; esac
# Live updates on a follower: the leader's feed, relayed. The stream says hello, then carries
# the events of a job submitted (through the other follower) after it opened.
sed 's/^name: .*/name: via-stream/' "$tmp/http.yaml" >"$tmp/stream.yaml"
out=$(in_ns cl python3 - "https://$net.2:7710" "https://$net.3:7710" "$tmp/stream.yaml" <<'PY'
import os, ssl, sys, urllib.request
stream_base, post_base, job = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=os.environ["YARD_CA"])
ctx.check_hostname = False
def request(url, body=None, method="GET"):
    r = urllib.request.Request(url, data=body, method=method)
    r.add_header("Authorization", "Bearer " + os.environ["YARD_TOKEN"])
    return r
try:
    s = urllib.request.urlopen(request(stream_base + "/api/v1/events/stream"), context=ctx, timeout=10)
    hello = False
    for raw in s:
        line = raw.decode().rstrip("\n")
        if line == "event: hello":
            hello = True
            with urllib.request.urlopen(request(post_base + "/api/v1/jobs", open(job, "rb").read(), "POST"), context=ctx, timeout=10) as p:
                assert p.status == 201, p.status
        elif hello and line.startswith("data:") and '"via-stream"' in line:
            print("relayed")
            break
    else:
        print("the stream ended", "after hello" if hello else "before hello")
except Exception as e:
    print("error", e)
PY
)
[ "$out" = relayed ] || fail "live events on a follower: $out"

# The steady load: one submission after another from the clients' namespace; each one
# acknowledged (exit 0) is written to acked.txt.
cat >"$tmp/load.sh" <<'SH'
#!/usr/bin/env bash
bin=$1 tmp=$2 prefix=$3
n=0
while [ ! -e "$tmp/stop-load" ]; do
  n=$((n + 1))
  sed "s/^name: .*/name: $prefix-$n/" "$tmp/http.yaml" >"$tmp/$prefix.yaml"
  if out=$("$bin/yardctl" job submit "$tmp/$prefix.yaml" 2>&1); then echo "$prefix-$n" >>"$tmp/acked.txt"
  else echo "$prefix-$n: $out" >>"$tmp/refused.txt"; fi
  echo "$out" | grep -q 'the request again' && echo "$prefix-$n" >>"$tmp/resent.txt"
done
SH
chmod +x "$tmp/load.sh"
in_ns cl "$tmp/load.sh" "$bin" "$tmp" load &
load_pid=$!
pids+=("$load_pid")
sleep 2

say "the leader is cut off: the others lead within 5 s; it steps down and acknowledges nothing"
old=$(leader)
[ -n "$old" ] || fail "no leader before the cut"
cut "m$old" down
t0=$(date +%s%N)
# A client inside the cut-off master's namespace: nothing it asks is acknowledged.
sed "s/^name: .*/name: isolated/" "$tmp/http.yaml" >"$tmp/isolated.yaml"
(YARD_MASTER="$net.$old:7700" in_ns "m$old" timeout 20 "$bin/yardctl" job submit "$tmp/isolated.yaml" >"$tmp/isolated.out" 2>&1
 echo $? >"$tmp/isolated.rc") &
iso_pid=$!
# Writes accepted again: a new client's, with the three addresses, the cut-off one first.
# (The load's request in flight at the cut waits for its answer, then is sent again.)
for _ in $(seq 100); do ctl queue create after-cut --cpu 1 --memory 1Gi >/dev/null 2>&1 && break; sleep 0.05; done
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "writes accepted again $ms ms after the leader was cut off"
[ "$ms" -lt 5000 ] || fail "writes accepted only after $ms ms"
wait "$iso_pid"; iso_rc=$(cat "$tmp/isolated.rc")
[ "$iso_rc" -ne 0 ] || fail "the cut-off master acknowledged a submission: $(cat "$tmp/isolated.out")"
echo "the cut-off client: $(tail -1 "$tmp/isolated.out")"
wait_log "$tmp/m$old.err" 'running again as a follower' 10 || fail "m$old did not step down: $(tail -5 "$tmp/m$old.err")"
new=$(leader); [ -n "$new" ] && [ "$new" != "$old" ] || fail "no new leader ($new) while m$old is cut off"
sleep 2
cut "m$old" up
say "the link is back: m$old follows and catches up"
wait_log "$tmp/m$old.err" 'following the leader' 20 || fail "m$old does not follow: $(tail -5 "$tmp/m$old.err")"
sleep 2

say "kill -9 of the leader under the same load"
old=$(leader)
before=$(wc -l <"$tmp/acked.txt")
kill -9 "${mpid[$old]}"; wait "${mpid[$old]}" 2>/dev/null
t0=$(date +%s%N)
for _ in $(seq 100); do ctl queue create after-kill --cpu 1 --memory 1Gi >/dev/null 2>&1 && break; sleep 0.05; done
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "writes accepted again $ms ms after the leader's kill -9"
[ "$ms" -lt 5000 ] || fail "writes accepted only after $ms ms"
start_member "$old"
wait_log "$tmp/m$old.err" 'following the leader' 20 || fail "m$old does not come back: $(tail -5 "$tmp/m$old.err")"
# The load goes on under the new leader: wait for its next acknowledgment (up to 20 s).
for _ in $(seq 200); do [ "$(wc -l <"$tmp/acked.txt")" -gt "$before" ] && break; sleep 0.1; done
touch "$tmp/stop-load"
wait "$load_pid" 2>/dev/null

say "every acknowledged submission is on every master, once"
acked=$(wc -l <"$tmp/acked.txt")
refused=$(cat "$tmp/refused.txt" 2>/dev/null | wc -l)
resent=$(cat "$tmp/resent.txt" 2>/dev/null | wc -l)
echo "submissions: $acked acknowledged, $refused refused, $resent sent again after a lost connection"
[ "$acked" -ge 20 ] || fail "only $acked submissions acknowledged"
[ "$(cat "$tmp/acked.txt" | wc -l)" -gt "$before" ] || fail "no submission acknowledged after the kill: $(tail -3 "$tmp/refused.txt" 2>/dev/null)"
[ "$refused" -eq 0 ] || echo "refused: $(head -3 "$tmp/refused.txt")"
[ "$refused" -le 2 ] || fail "$refused submissions refused"
ctl queue create last --cpu 1 --memory 1Gi >/dev/null || fail "queue last"
sleep 1
for i in 1 2 3; do
  sqlite3 "file:$(dir_of "$i")/state.db?mode=ro" "SELECT name FROM jobs WHERE deleted = 0" | sort >"$tmp/held$i.txt"
  missing=$(sort "$tmp/acked.txt" | comm -23 - "$tmp/held$i.txt" | head -5)
  [ -z "$missing" ] || fail "m$i lacks acknowledged jobs: $missing"
  twice=$(uniq -d "$tmp/held$i.txt" | head -5)
  [ -z "$twice" ] || fail "m$i holds jobs twice: $twice"
  grep -qx isolated "$tmp/held$i.txt" && [ "$iso_rc" -ne 0 ] && echo "(the cut-off client's job was made by the majority after all: allowed, it was not acknowledged)"
  for q in last after-cut after-kill; do
    sqlite3 "file:$(dir_of "$i")/state.db?mode=ro" "SELECT count(*) FROM queues WHERE name = '$q'" | grep -qx 1 || fail "m$i lacks queue $q"
  done
done

say "no two masters led in one term"
terms=$(for i in 1 2 3; do sed -n "s/.*raft: leader in term \([0-9]*\);.*/\1 m$i/p" "$tmp/m$i.err"; done | sort -u)
echo "leaders by term: $(echo "$terms" | tr '\n' ' ')"
dup=$(echo "$terms" | awk '{print $1}' | uniq -d)
[ -z "$dup" ] || fail "two leaders in term(s) $dup: $terms"
[ "$(echo "$terms" | wc -l)" -ge 3 ] || fail "expected at least three terms with a leader: $terms"
finish e2e.ha_partition
