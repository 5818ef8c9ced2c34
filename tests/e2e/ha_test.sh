#!/usr/bin/env bash
# Three masters on Raft (docs/ha.md): the first bootstraps, two join it with the join token and
# the CA's fingerprint; yardctl and the agent take the three addresses. Acknowledged writes
# survive the leader's kill -9, a new leader accepts writes within seconds, the running replica
# is not fenced, a killed master comes back as a follower and catches up, and a leader stopped
# (SIGSTOP) past the election timeout steps down when it wakes instead of acting; `cluster status
# --stale` is answered by a follower from its own view, also once no master leads.
bin=$1
source "$(dirname "$0")/cluster.sh"

declare -A cport aport rport mpid
for i in 1 2 3; do cport[$i]=$(free_port); aport[$i]=$(free_port); rport[$i]=$(free_port); done
agent_port=${aport[1]}
# The fence as docs/ha.md advises for a 1 s election timeout: heartbeat_timeout 15 s, fence 10 s
# (cluster.sh's 6 s give 4 s, tighter than a failover's budget on a loaded machine).
sed -i 's/^heartbeat_timeout = .*/heartbeat_timeout = "15s"/' "$tmp/master.toml"
dir_of() { [ "$1" = 1 ] && echo "$tmp/master" || echo "$tmp/m$1"; }  # start_agent reads $tmp/master/ca.pem

# start_member I [args...]: master I with its own ports and data directory.
start_member() {
  local i=$1; shift
  "$bin/yard-master" --name "m$i" --config "$tmp/master.toml" --data-dir "$(dir_of "$i")" --listen "127.0.0.1:${cport[$i]}" \
    --agent-listen "127.0.0.1:${aport[$i]}" --raft-listen "127.0.0.1:${rport[$i]}" --metrics-listen "" \
    "$@" >>"$tmp/m$i.out" 2>>"$tmp/m$i.err" &
  mpid[$i]=$!
  pids+=("$!")
}
leader() {  # [SKIP]: the index of the member that leads, from yardctl cluster status (not asking SKIP)
  local addr i list=""
  for i in 1 2 3; do [ "$i" = "${1:-}" ] || list="$list${list:+,}127.0.0.1:${cport[$i]}"; done
  addr=$("$bin/yardctl" --master "$list" cluster status -o json 2>/dev/null |
    python3 -c 'import json,sys; print([m["clientAddress"] for m in json.load(sys.stdin)["members"] if m["role"] == "leader"][0])' 2>/dev/null) || return 1
  for i in 1 2 3; do [ "$addr" = "127.0.0.1:${cport[$i]}" ] && { echo "$i"; return 0; }; done
  return 1
}

say "the first master bootstraps; two join it as voters"
start_member 1
wait_log "$tmp/m1.out" '^listening ' 20 || { echo "m1 did not start: $(cat "$tmp/m1.err")"; exit 1; }
fp=$(sed -n 's/.*fingerprint \(sha256:[0-9a-f]*\).*/\1/p' "$tmp/m1.err" | head -1)
export YARD_CA="$tmp/master/ca.pem"
YARD_TOKEN=$(cat "$tmp/master/admin.token"); export YARD_TOKEN
[ -n "$fp" ] || fail "no CA fingerprint in m1's log"
for i in 2 3; do
  start_member "$i" --join "127.0.0.1:${rport[1]}" --join-token e2e-token --ca-fingerprint "$fp"
  wait_log "$tmp/m$i.err" 'this master is a voter' 30 || fail "m$i did not become a voter: $(tail -5 "$tmp/m$i.err")"
done
grep -q 'following the leader' "$tmp/m2.err" || fail "m2 does not say it follows: $(tail -3 "$tmp/m2.err")"
cmp -s "$tmp/master/ca.pem" "$tmp/m2/ca.pem" || fail "m2 has not the cluster's CA"
# Token secrets made with a request id are derived from the CA's key: every master holds it.
cmp -s "$tmp/master/ca.key" "$tmp/m3/ca.key" || fail "m3 has not the cluster CA's key"
[ "$(leader)" = 1 ] || fail "m1 is not the leader: $("$bin/yardctl" --master "127.0.0.1:${cport[1]}" cluster status 2>&1)"

say "cluster status lists the three, and a follower redirects"
st=$("$bin/yardctl" --master "127.0.0.1:${cport[2]}" cluster status -o json 2>&1) || fail "cluster status through a follower: $st"
version=$("$bin/yard-master" --version | awk '{print $2}')
echo "$st" | YARD_BUILT="$version" python3 -c '
import json,os,sys
c=json.load(sys.stdin)
m=c["members"]
assert len(m) == 3 and not c["single"], c
# each says what it runs (rolling upgrades, docs/ha.md "Upgrading")
assert all(x["version"] == os.environ["YARD_BUILT"] and x["schemaVersion"] >= 16 for x in m), m
assert sorted(x["role"] for x in m) == ["follower", "follower", "leader"], m
assert all(x["voter"] == "voter" and x["term"] == c["term"] for x in m), m
# raft contact: the leader 0, each follower answered its heartbeats (every 100 ms) just now
assert all((x["lastContactMs"] == 0) if x["role"] == "leader" else (0 <= x["lastContactMs"] < 1000) for x in m), m
assert sorted(x["name"] for x in m) == ["m1", "m2", "m3"], m
' || fail "cluster status: $st"
table=$("$bin/yardctl" --master "127.0.0.1:${cport[3]}" cluster status 2>&1)
echo "$table" | grep -Eq "^m1 +leader .* $version \(schema [0-9]+\)$" && ! echo "$table" | grep -q 'different versions' ||
  fail "cluster status table: $table"
out=$("$bin/yardctl" --master "127.0.0.1:${cport[2]}" queue create via-follower --cpu 1 --memory 1Gi 2>&1) || fail "a write through a follower: $out"

export YARD_MASTER="127.0.0.1:${cport[1]},127.0.0.1:${cport[2]},127.0.0.1:${cport[3]}"

say "a joiner with a wrong token or CA is refused"
out=$("$bin/yard-master" --data-dir "$tmp/bad" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --metrics-listen "" \
  --raft-listen 127.0.0.1:0 --join "127.0.0.1:${rport[1]}" --join-token wrong --ca-fingerprint "$fp" 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q 'refused: join token' || fail "a wrong token: rc $rc: $out"
out=$("$bin/yard-master" --data-dir "$tmp/bad2" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --metrics-listen "" \
  --raft-listen 127.0.0.1:0 --join "127.0.0.1:${rport[1]}" --join-token e2e-token \
  --ca-fingerprint sha256:0000000000000000000000000000000000000000000000000000000000000000 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q 'fingerprint' || fail "a wrong CA fingerprint: rc $rc: $out"

say "an agent and a running job, with the three addresses"
# A follower's agent address first: it names the leader's, and the agent goes there.
AGENT_MASTER="127.0.0.1:${aport[2]},127.0.0.1:${aport[3]},127.0.0.1:${aport[1]}" start_agent 1 --cpu 2 --memory 1Gi
wait_nodes 1
grep -q "not the leader: the leader's agent API is at 127.0.0.1:${aport[1]}" "$tmp"/agent1.* ||
  fail "the agent was not told where the leader is: $(grep -h 'master ' "$tmp"/agent1.* | head -3)"
# The follower's connection is closed once it has redirected, not left open by the agent.
held=$(ss -Htn state established "( sport = :${aport[2]} )" | wc -l)
[ "$held" -eq 0 ] || fail "the redirecting follower still holds $held connection(s) from the agent: $(ss -Htn state established "( sport = :${aport[2]} )")"
cat >"$tmp/long.yaml" <<YAML
name: long-ha
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: [sh, -c, 'echo started; sleep 600'], resources: { cpu: 100m, memory: 32Mi } }
YAML
submit "$tmp/long.yaml"
wait_job long-ha Running 30

say "an ended replica's log is archived on a majority of the masters before the agent is answered"
cat >"$tmp/short.yaml" <<YAML
name: short-ha
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: [sh, -c, 'echo archived-line-one; echo archived-line-two'], resources: { cpu: 100m, memory: 32Mi } }
YAML
submit "$tmp/short.yaml"
wait_job short-ha Succeeded 30
for _ in $(seq 100); do grep -q 'replica .* log archived on the master' "$tmp"/agent1.* && break; sleep 0.1; done
grep -q 'replica .* log archived on the master' "$tmp"/agent1.* || fail "the log was not archived: $(grep -h 'archiv' "$tmp"/agent1.* | tail -3)"
# The agent was answered once the leader and at least one follower held it; the other
# follower's copy was made at the same time.
for i in 1 2 3; do
  for _ in $(seq 50); do ls "$(dir_of "$i")"/logs/*/*.log >/dev/null 2>&1 && break; sleep 0.1; done
  cat "$(dir_of "$i")"/logs/*/*.log 2>/dev/null | grep -q archived-line-two || fail "m$i holds no copy of the archived log: $(ls -R "$(dir_of "$i")/logs" 2>&1 | head)"
done
for n in $(seq 1 10); do
  out=$("$bin/yardctl" queue create "acked-$n" --cpu 1 --memory 1Gi 2>&1) || fail "queue acked-$n: $out"
done
# A token create whose answer a script did not get: sent again with the same request id
# after the failover, it gets the same token and secret (below).
rid=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0
tok1=$("$bin/yardctl" --request-id "$rid" -o json user token create admin --description resent 2>&1) || fail "token create: $tok1"

say "kill -9 of the leader: another leads with every acknowledged write, within 5 s"
kill -9 "${mpid[1]}"; wait "${mpid[1]}" 2>/dev/null
t0=$(date +%s%N)
for _ in $(seq 200); do "$bin/yardctl" queue create after-kill --cpu 1 --memory 1Gi >/dev/null 2>&1 && break; sleep 0.05; done
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "writes accepted again $ms ms after the leader's kill -9"
[ "$ms" -lt 5000 ] || fail "writes accepted only after $ms ms"
new=$(leader) || fail "no leader after the kill"
[ "${new:-1}" != 1 ] || fail "the killed master serves"
list=$("$bin/yardctl" queue list 2>&1)
for n in $(seq 1 10) ; do echo "$list" | grep -q "^acked-$n " || fail "acked-$n lost in the failover: $list"; done
echo "$list" | grep -q '^after-kill ' || fail "after-kill missing"

say "a token create sent again with its request id gets the same secret from the new leader"
tok2=$("$bin/yardctl" --request-id "$rid" -o json user token create admin --description resent 2>&1) || fail "token create again: $tok2"
s1=$(echo "$tok1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
s2=$(echo "$tok2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
[ -n "$s1" ] && [ "$s1" = "$s2" ] || fail "the resend got another secret: $tok1 / $tok2"
n=$("$bin/yardctl" -o json user token list admin | python3 -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin) if t.get("description") == "resent"))')
[ "$n" = 1 ] || fail "$n tokens made by one request"
YARD_TOKEN=$s2 "$bin/yardctl" whoami >/dev/null 2>&1 || fail "the resent secret does not authenticate"

say "the new leader serves the log archived by the old one"
out=$("$bin/yardctl" logs short-ha 2>&1) || fail "logs short-ha after the failover: $out"
echo "$out" | grep -q archived-line-one && echo "$out" | grep -q archived-line-two || fail "logs short-ha after the failover: $out"

say "the running job is not disturbed: the agent follows the new leader"
for _ in $(seq 100); do "$bin/yardctl" node list 2>/dev/null | grep -q '^node-1 .* ready ' && break; sleep 0.1; done
"$bin/yardctl" node list | grep -q '^node-1 .* ready ' || fail "node-1 not ready under the new leader: $("$bin/yardctl" node list 2>&1)"
[ "$(jshow long-ha "j['job']['state']")" = Running ] || fail "long-ha is $(jshow long-ha "j['job']['state']")"
[ "$(jshow long-ha "j['tasks'][0]['attempt']")" = 0 ] || fail "long-ha restarted: attempt $(jshow long-ha "j['tasks'][0]['attempt']")"
grep -q 'fenced: no answer' "$tmp"/agent1.* && fail "the agent fenced its replica: $(grep 'fenced: no answer' "$tmp"/agent1.* | tail -2)"

say "the killed master comes back as a follower and catches up"
start_member 1
wait_log "$tmp/m1.err" 'following the leader' 20 || fail "m1 does not follow: $(tail -5 "$tmp/m1.err")"
"$bin/yardctl" queue create after-return --cpu 1 --memory 1Gi >/dev/null || fail "queue after-return"

say "yard-rsh (OpenMPI's launcher) passes a master that is gone and follows a follower to the leader"
ldr=$(leader); f=1; [ "$ldr" = 1 ] && f=2
out=$(env YARD_EXEC_MASTER="127.0.0.1:1,127.0.0.1:${cport[$f]}" YARD_EXEC_CA="$fp" YARD_EXEC_TOKEN=not-a-token \
  YARD_JOB=long-ha YARD_TASK=main YARD_ROLE=main YARD_REPLICA_INDEX=0 YARD_ATTEMPT=0 "$bin/yard-rsh" node-1 true 2>&1); rc=$?
# The leader itself refuses the made-up exec token: the request reached it.
[ "$rc" = 255 ] && echo "$out" | grep -q '^yard-rsh: exec: ' && ! echo "$out" | grep -q 'not the leader' ||
  fail "yard-rsh through a follower: rc $rc: $out"

say "a leader stopped past the election timeout steps down when it wakes"
old=$(leader)
kill -STOP "${mpid[$old]}"
for _ in $(seq 100); do n=$(leader "$old") && [ "$n" != "$old" ] && break; sleep 0.1; done
n=$(leader "$old"); [ -n "$n" ] && [ "$n" != "$old" ] || fail "no new leader while m$old is stopped"
"$bin/yardctl" queue create while-stopped --cpu 1 --memory 1Gi >/dev/null || fail "queue while-stopped"
kill -CONT "${mpid[$old]}"
wait_log "$tmp/m$old.err" 'running again as a follower' 20 || fail "m$old did not step down: $(tail -5 "$tmp/m$old.err")"
wait_log "$tmp/m$old.err" 'following the leader' 20 || fail "m$old does not follow again"

say "every master holds the same queues"
"$bin/yardctl" queue create last --cpu 1 --memory 1Gi >/dev/null || fail "queue last"
sleep 1
want=$("$bin/yardctl" queue list -o json | python3 -c 'import json,sys; print(sorted(q["name"] for q in json.load(sys.stdin)))')
for i in 1 2 3; do
  got=$(sqlite3 "file:$(dir_of "$i")/state.db?mode=ro" 'SELECT name FROM queues ORDER BY name' | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin if l.strip()))')
  [ "$got" = "$want" ] || fail "m$i holds $got, the leader $want"
done

say "SIGTERM of the leader: it hands its lead to another master, exits 0, and writes go on"
old=$(leader)
declare -A off
for i in 1 2 3; do off[$i]=$(stat -c %s "$tmp/m$i.err"); done
since() { tail -c +$(( ${off[$1]} + 1 )) "$tmp/m$1.err"; }  # what master I logged in this step
t0=$(date +%s%N)
kill -TERM "${mpid[$old]}"
for _ in $(seq 200); do "$bin/yardctl" queue create after-term --cpu 1 --memory 1Gi >/dev/null 2>&1 && break; sleep 0.05; done
t1=$(date +%s%N)
echo "writes accepted again $(( (t1 - t0) / 1000000 )) ms after the leader's SIGTERM"
wait "${mpid[$old]}"; rc=$?
[ "$rc" = 0 ] || fail "m$old exited $rc on SIGTERM: $(since "$old" | tail -8)"
to=$(since "$old" | sed -n 's/.*raft: handed the lead to master \(m[0-9]\) .*/\1/p')
[ -n "$to" ] || fail "m$old did not hand its lead over: $(since "$old" | tail -8)"
since "$old" | tail -1 | grep -q 'stopped$' || fail "m$old did not stop in order: $(since "$old" | tail -3)"
new=$(leader "$old") && [ "m$new" = "$to" ] || fail "m$old handed its lead to $to, but m${new:-?} leads"
# It was told to stand (raft's TimeoutNow), not left to find the old leader gone.
since "$new" | grep -q 'refuses connections' && fail "m$new waited for the old leader's port to refuse: $(since "$new" | grep refuses)"
"$bin/yardctl" queue list | grep -q '^after-term ' || fail "after-term missing"
start_member "$old"
wait_log "$tmp/m$old.err" 'following the leader' 20 || fail "m$old does not follow after its restart"

say "cluster remove takes a stopped follower out"
ldr=$(leader); gone=1; [ "$ldr" = 1 ] && gone=2
# A follower stops in order on SIGTERM too (exit 0: systemd counts it as a clean stop).
kill "${mpid[$gone]}"; wait "${mpid[$gone]}"; rc=$?
[ "$rc" = 0 ] || fail "follower m$gone exited $rc on SIGTERM: $(tail -5 "$tmp/m$gone.err")"
tail -2 "$tmp/m$gone.err" | grep -q 'shutting down on SIGTERM while following the leader' &&
  tail -1 "$tmp/m$gone.err" | grep -q 'stopped$' || fail "follower m$gone did not stop in order: $(tail -3 "$tmp/m$gone.err")"
# With m$gone down, removing the other live follower would leave two voters of which one
# answers: no majority for the change or anything after it. Refused, and nothing changes.
other=$((6 - ldr - gone))
out=$("$bin/yardctl" cluster remove "m$other" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q "refused: it would leave 2 voters of which 1 answer (m$gone does not)" ||
  fail "removing a live follower while another is down: rc $rc: $out"
n=$("$bin/yardctl" cluster status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')
[ "$n" = 3 ] || fail "after the refused remove: $n members"

say "a new master may not join at a member's raft address, nor under a member's name"
out=$(timeout 60 "$bin/yard-master" --name clash --config "$tmp/master.toml" --data-dir "$tmp/clash" --listen 127.0.0.1:0 \
  --agent-listen 127.0.0.1:0 --metrics-listen "" --raft-listen "127.0.0.1:${rport[$gone]}" \
  --join "127.0.0.1:${rport[$ldr]}" --join-token e2e-token --ca-fingerprint "$fp" 2>&1); rc=$?
# A joiner has shown no token when this is checked: it is not told the member's name or id.
[ "$rc" -eq 2 ] && echo "$out" | grep -q "refused: the raft address 127.0.0.1:${rport[$gone]} is already a member's" ||
  fail "a join at a stopped member's raft address: rc $rc: $out"
[ -e "$tmp/clash/ca.key" ] && fail "a join at a member's raft address was given the CA's key"
echo "$out" | grep -q "member m$gone\|raft id" && fail "a joiner without a token was told the member's name or id: $out"
out=$(timeout 60 "$bin/yard-master" --name "m$other" --config "$tmp/master.toml" --data-dir "$tmp/clash2" \
  --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --metrics-listen "" --raft-listen "127.0.0.1:$(free_port)" \
  --join "127.0.0.1:${rport[$ldr]}" --join-token e2e-token --ca-fingerprint "$fp" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q "refused: a master named m$other is already a member" ||
  fail "a join under a member's name: rc $rc: $out"
n=$("$bin/yardctl" cluster status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')
[ "$n" = 3 ] || fail "after the refused joins: $n members"
"$bin/yardctl" -o json audit | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r.get("request") == "master.join" and r.get("outcome") == "refused"]
assert any("is already member" in r["message"] for r in rows), rows
assert any("a master named" in r["message"] for r in rows), rows
assert all(r["source"].startswith("127.0.0.1:") for r in rows), rows
' || fail "the refused joins are not in the audit trail with their source"

out=$("$bin/yardctl" cluster remove "m$gone" 2>&1) || fail "cluster remove m$gone: $out"
echo "$out" | grep -q "removed master m$gone" || fail "cluster remove said: $out"
out=$("$bin/yardctl" cluster remove "m$ldr" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q 'it is the leader' || fail "removing the leader: rc $rc: $out"
out=$("$bin/yardctl" cluster remove nosuch 2>&1); [ $? -eq 1 ] || fail "removing nosuch: $out"
n=$("$bin/yardctl" cluster status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')
[ "$n" = 2 ] || fail "after the remove: $n members"
"$bin/yardctl" queue create after-remove --cpu 1 --memory 1Gi >/dev/null || fail "a write with two masters"

say "the removed master, started again as it was, learns that it is out and stays out"
: >"$tmp/m$gone.err"
start_member "$gone"
wait_log "$tmp/m$gone.err" 'this master was removed from the cluster' 30 ||
  fail "m$gone did not learn of its removal: $(tail -5 "$tmp/m$gone.err")"
n=$("$bin/yardctl" cluster status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')
[ "$n" = 2 ] || fail "with the removed master running again: $n members"
"$bin/yardctl" queue create while-removed --cpu 1 --memory 1Gi >/dev/null || fail "a write beside the removed master"
kill "${mpid[$gone]}"; wait "${mpid[$gone]}" 2>/dev/null

say "the removed master, its data directory lost, joins again from nothing"
rm -rf "$(dir_of "$gone")"
: >"$tmp/m$gone.err"
start_member "$gone" --join "127.0.0.1:${rport[$ldr]}" --join-token e2e-token --ca-fingerprint "$fp"
wait_log "$tmp/m$gone.err" 'this master is a voter' 30 || fail "m$gone did not join again: $(tail -5 "$tmp/m$gone.err")"
n=$("$bin/yardctl" cluster status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["members"]))')
[ "$n" = 3 ] || fail "after the rejoin: $n members"
"$bin/yardctl" queue create after-rejoin --cpu 1 --memory 1Gi >/dev/null || fail "queue after-rejoin"
for _ in $(seq 50); do
  sqlite3 "file:$(dir_of "$gone")/state.db?mode=ro" "SELECT name FROM queues WHERE name = 'after-rejoin'" 2>/dev/null | grep -q . && break
  sleep 0.1
done
got=$(sqlite3 "file:$(dir_of "$gone")/state.db?mode=ro" 'SELECT count(*) FROM queues' 2>&1)
want=$("$bin/yardctl" queue list -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$got" = "$want" ] || fail "the rejoined m$gone holds $got queues, the leader $want"
for i in 1 2 3; do kill -0 "${mpid[$i]}" 2>/dev/null || fail "m$i is gone after the rejoin (rc $(wait "${mpid[$i]}"; echo $?))"; done

say "the rejoined master is caught up on the logs archived before it came: same text, same age"
for _ in $(seq 200); do cat "$(dir_of "$gone")"/logs/*/*.log 2>/dev/null | grep -q archived-line-two && break; sleep 0.1; done
cat "$(dir_of "$gone")"/logs/*/*.log 2>/dev/null | grep -q archived-line-two ||
  fail "m$gone has not the log archived before it joined: $(ls -R "$(dir_of "$gone")/logs" 2>&1 | head); $(grep 'log archive' "$tmp/m$ldr.err" | tail -3)"
orig=$(ls "$(dir_of "$ldr")"/logs/*/*.log | head -1); copy=$(ls "$(dir_of "$gone")"/logs/*/*.log | head -1)
[ "${orig#"$(dir_of "$ldr")"}" = "${copy#"$(dir_of "$gone")"}" ] || fail "the copy is $copy, the leader's $orig"
[ "$(stat -c %Y "$orig")" = "$(stat -c %Y "$copy")" ] || fail "the copy's time $(stat -c %Y "$copy") is not its original's $(stat -c %Y "$orig"): it would age out later"
grep -q 'log archive: caught up with the other masters: fetched 0 logs this master lacked, copied 1 ' "$tmp/m$ldr.err" ||
  fail "the leader does not say it caught m$gone up: $(grep 'log archive' "$tmp/m$ldr.err" | tail -3)"

"$bin/yardctl" job delete long-ha >/dev/null
"$bin/yardctl" job delete short-ha >/dev/null
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers

say "cluster status --stale: a follower answers from its own view, and still does once no master leads"
ldr=$(leader) || fail "no leader before the stale status"
f1=$(( ldr % 3 + 1 )); f2=$(( f1 % 3 + 1 ))  # the two followers
st=$("$bin/yardctl" --master "127.0.0.1:${cport[$f1]}" cluster status --stale -o json 2>&1) || fail "cluster status --stale: $st"
echo "$st" | F="m$f1" L="m$ldr" python3 -c '
import json,os,sys
c=json.load(sys.stdin)
assert c["stale"] and c["answeredBy"] == os.environ["F"], c
roles = {x["name"]: x["role"] for x in c["members"]}
assert roles[os.environ["L"]] == "leader" and roles[os.environ["F"]] == "follower", roles
' || fail "cluster status --stale through m$f1: $st"
st=$("$bin/yardctl" --master "127.0.0.1:${cport[$ldr]}" cluster status --stale -o json 2>&1) || fail "cluster status --stale of the leader: $st"
echo "$st" | L="m$ldr" python3 -c '
import json,os,sys
c=json.load(sys.stdin)
assert not c["stale"] and c["answeredBy"] == os.environ["L"], c
' || fail "the leader answers --stale with its own, current view: $st"
out=$(YARD_TOKEN=yard_abcdefgh_0123456789012345678901234567890123456789012 \
  "$bin/yardctl" --master "127.0.0.1:${cport[$f1]}" cluster status --stale 2>&1) && fail "a follower answered --stale to a bad token: $out"
echo "$out" | grep -q 'not authenticated' || fail "a bad token's refusal by a follower: $out"
# Two of three gone: no master can lead.
kill -9 "${mpid[$ldr]}" "${mpid[$f2]}"; wait "${mpid[$ldr]}" "${mpid[$f2]}" 2>/dev/null
out=$("$bin/yardctl" cluster status 2>&1) && fail "cluster status answered without a leader: $out"
echo "$out" | grep -q -- 'cluster status --stale' || fail "cluster status without a leader does not point to --stale: $out"
table=$("$bin/yardctl" cluster status --stale 2>&1) || fail "cluster status --stale without a leader: $table"
echo "$table" | grep -Eq "^m$ldr +unreachable " && echo "$table" | grep -Eq "^m$f2 +unreachable " &&
  echo "$table" | grep -Eq "^m$f1 +(follower|candidate) " && echo "$table" | grep -q "(as m$f1 sees them, .*no member that answered leads)" &&
  ! echo "$table" | grep -q 'different versions' || fail "cluster status --stale without a leader: $table"
# The survivor says that no leader is known, rather than sending clients to the dead one's port.
out=$("$bin/yardctl" --master "127.0.0.1:${cport[$f1]}" queue list 2>&1) && fail "queue list answered without a leader: $out"
echo "$out" | grep -q 'no leader is known' && ! echo "$out" | grep -q "127.0.0.1:${cport[$ldr]}" ||
  fail "a follower without a leader still sends clients to the last one: $out"
# Restarted alone, the survivor has no leader to learn the commit index from: it still says
# at least what it applied (raft alone would say 0 or 1).
kill "${mpid[$f1]}"; wait "${mpid[$f1]}" 2>/dev/null
: >"$tmp/m$f1.out"
start_member "$f1"
for _ in $(seq 100); do  # a follower's client API answers --stale once the master is up
  st=$("$bin/yardctl" --master "127.0.0.1:${cport[$f1]}" cluster status --stale -o json 2>&1) && break
  sleep 0.2
done
[ -n "$st" ] && echo "$st" | grep -q answeredBy || fail "--stale after a restart: $st $(tail -3 "$tmp/m$f1.err")"
echo "$st" | F="m$f1" python3 -c '
import json,os,sys
c=json.load(sys.stdin)
me = [x for x in c["members"] if x["name"] == os.environ["F"]][0]
assert me["appliedIndex"] > 10 and c["commitIndex"] >= me["appliedIndex"], (c["commitIndex"], me)
' || fail "the commit index of a master restarted alone: $st"
finish e2e.ha
