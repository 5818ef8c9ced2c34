#!/usr/bin/env bash
# A full disk under three masters on Raft (docs/ha.md, "Failure cases"). Two masters keep their
# data directories on small tmpfs mounts the test fills. A follower whose store cannot commit
# an entry stops with a message naming the disk; the two others go on, every write acknowledged.
# Given room and started again, it catches up. A leader whose store cannot commit stops too:
# another leads within seconds, and every acknowledged write is on it.
bin=$1
source "$(dirname "$0")/cluster.sh"

declare -A cport aport rport mpid
for i in 1 2 3; do cport[$i]=$(free_port); aport[$i]=$(free_port); rport[$i]=$(free_port); done
mounts=()
for i in 1 2; do
  mkdir -p "$tmp/d$i"
  mount -t tmpfs -o size=40m tmpfs "$tmp/d$i" || { echo "cannot mount a tmpfs (root is needed): skipped"; exit 0; }
  mounts+=("$tmp/d$i")
done
unmount() { for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null; done; }
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; sleep 0.3; unmount; cleanup' EXIT
mkdir -p "$tmp/d3"

start_member() {
  local i=$1; shift
  "$bin/yard-master" --name "m$i" --config "$tmp/master.toml" --data-dir "$tmp/d$i/data" --listen "127.0.0.1:${cport[$i]}" \
    --agent-listen "127.0.0.1:${aport[$i]}" --raft-listen "127.0.0.1:${rport[$i]}" --metrics-listen "" \
    "$@" >>"$tmp/m$i.out" 2>>"$tmp/m$i.err" &
  mpid[$i]=$!
  pids+=("$!")
}
queues_on() { sqlite3 "file:$tmp/d$1/data/state.db?mode=ro" 'SELECT count(*) FROM queues' 2>&1; }
fill() { dd if=/dev/zero of="$tmp/d$1/fill" bs=1M count=64 2>/dev/null; }

start_member 1
wait_log "$tmp/m1.out" '^listening ' 20 || { echo "m1 did not start: $(cat "$tmp/m1.err")"; exit 1; }
fp=$(sed -n 's/.*fingerprint \(sha256:[0-9a-f]*\).*/\1/p' "$tmp/m1.err" | head -1)
for i in 2 3; do
  start_member "$i" --join "127.0.0.1:${rport[1]}" --join-token e2e-token --ca-fingerprint "$fp"
  wait_log "$tmp/m$i.err" 'this master is a voter' 30 || fail "m$i did not become a voter: $(tail -3 "$tmp/m$i.err")"
done
cp "$tmp/d1/data/ca.pem" "$tmp/ca.pem"
export YARD_MASTER="127.0.0.1:${cport[1]},127.0.0.1:${cport[2]},127.0.0.1:${cport[3]}" YARD_CA="$tmp/ca.pem" YARD_TOKEN
YARD_TOKEN=$(cat "$tmp/d1/data/admin.token")
acked=()
out=""
write() {  # write NAME: a queue, remembered when acknowledged; $out says why not
  out=$("$bin/yardctl" queue create "$1" --cpu 1 --memory 1Gi 2>&1) && { acked+=("$1"); return 0; }
  return 1
}

say "a follower's disk fills: it stops, naming it; the others acknowledge every write"
fill 2
for n in $(seq 1 20); do write "f$n" || fail "write f$n with a follower's disk full: $out"; done
wait_log "$tmp/m2.err" 'fatal: .*disk is full' 10 || fail "m2 did not stop on its full disk: $(tail -3 "$tmp/m2.err")"
kill -0 "${mpid[2]}" 2>/dev/null && fail "m2 still runs with a full disk"

say "given room and started again, it catches up"
rm -f "$tmp/d2/fill"
start_member 2
write after-room || fail "write after-room: $out"
for _ in $(seq 100); do [ "$(queues_on 2)" = "$(queues_on 3)" ] && break; sleep 0.1; done
[ "$(queues_on 2)" = "$(queues_on 3)" ] || fail "m2 holds $(queues_on 2) queues, m3 $(queues_on 3)"

say "the leader's disk fills: it stops, another leads, every acknowledged write is there"
fill 1
t0=$(date +%s%N)
# The write whose batch the full disk stops, and one sent to a follower just as it takes the
# lead, lose their connection: their outcome is unknown to the client (yardctl says so and does
# not resend). Every other write is acknowledged.
lost=0
for n in $(seq 1 10); do
  write "l$n" && continue
  if echo "$out" | grep -q 'lost the connection' && [ "$lost" -lt 2 ]; then lost=$((lost + 1)); continue; fi
  fail "write l$n after the leader's disk filled: $out"
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "ten writes across the leader's loss in $ms ms"
[ "$ms" -lt 8000 ] || fail "writes took $ms ms across the leader's loss"
wait_log "$tmp/m1.err" 'fatal: log entry .* is held by a majority but not by' 10 || fail "m1 did not stop: $(tail -3 "$tmp/m1.err")"
list=$("$bin/yardctl" queue list -o json | python3 -c 'import json,sys; print(" ".join(q["name"] for q in json.load(sys.stdin)))')
for q in "${acked[@]}"; do [[ " $list " == *" $q "* ]] || fail "acknowledged queue $q is gone"; done
[ "${#acked[@]}" -ge 29 ] || fail "only ${#acked[@]} writes acknowledged"
echo "${#acked[@]} acknowledged writes, all held"

say "the old leader, given room, replays the log and follows"
rm -f "$tmp/d1/fill"
start_member 1
wait_log "$tmp/m1.err" 'following the leader' 20 || fail "m1 does not follow: $(tail -3 "$tmp/m1.err")"
write last || fail "write last: $out"
for _ in $(seq 100); do [ "$(queues_on 1)" = "$(queues_on 3)" ] && break; sleep 0.1; done
[ "$(queues_on 1)" = "$(queues_on 3)" ] || fail "m1 holds $(queues_on 1) queues, m3 $(queues_on 3)"

for i in 1 2 3; do kill "${mpid[$i]}" 2>/dev/null; done
for i in 1 2 3; do wait "${mpid[$i]}" 2>/dev/null; done
finish e2e.ha_disk
