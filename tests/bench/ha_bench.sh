#!/usr/bin/env bash
# Master high availability (docs/ha.md), on loopback:
#  1. durable submissions/s through a single master and through the leader of three masters on
#     Raft, side by side (yard-submit-storm; 1 and 16 clients, and 16 clients sustained for
#     200 jobs each; median of ROUNDS (3) rounds; ratio);
#  2. failover: KILLS times (default 20), kill -9 of the leader, then the time until a write
#     through yardctl (with the three addresses) is accepted again; the killed master is started
#     again as a follower before the next round. Median, p99 and worst; every acknowledged job
#     counted afterwards (lost, or made twice);
#  3. planned stops: as many SIGTERMs of the leader (it hands its lead on, docs/ha.md "Stopping
#     a master"), timed the same way from the signal; each stop's exit status and handover.
# SATURATE="16 32 64 128" adds sustained rounds with that many clients, with how busy the machine
# was (docs/benchmarks.md). Every master runs with the packaged unit's GLIBC_TUNABLES
# (packaging/systemd/yard-master.service; MASTER_TUNABLES= to run without it).
#   tests/bench/ha_bench.sh [BUILD_BIN] [KILLS]
set -uo pipefail
bin=${1:-build/bin}
kills=${2:-20}
. "$(dirname "$0")/bench_lib.sh"
bench_init
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
printf 'join_token = "bench-token"\n' >"$tmp/master.toml"
rate() {  # rate ADDR CLIENTS JOBS_PER_CLIENT PREFIX -> jobs/s
  "$bin/yard-submit-storm" --master "$1" --ca "$YARD_CA" --clients "$2" --jobs "$3" --prefix "$4" 2>&1 >/dev/null |
    sed -n 's/.*jobs_per_second=//p'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

declare -A cport aport rport mpid
for i in 1 2 3; do cport[$i]=$(free_port); aport[$i]=$(free_port); rport[$i]=$(free_port); done
tunables=${MASTER_TUNABLES-glibc.malloc.hugetlb=1}
start_member() {  # start_member I [args...]
  local i=$1; shift
  GLIBC_TUNABLES=$tunables "$bin/yard-master" --name "m$i" --config "$tmp/master.toml" --data-dir "$tmp/m$i" --listen "127.0.0.1:${cport[$i]}" \
    --agent-listen "127.0.0.1:${aport[$i]}" --raft-listen "127.0.0.1:${rport[$i]}" --metrics-listen "" "$@" \
    >>"$tmp/m$i.out" 2>>"$tmp/m$i.err" &
  mpid[$i]=$!
  pids+=("$!")
}
list="127.0.0.1:${cport[1]},127.0.0.1:${cport[2]},127.0.0.1:${cport[3]}"
leader() {
  local addr i
  addr=$("$bin/yardctl" --master "$list" cluster status -o json 2>/dev/null |
    python3 -c 'import json,sys; print([m["clientAddress"] for m in json.load(sys.stdin)["members"] if m["role"] == "leader"][0])' 2>/dev/null) || return 1
  for i in 1 2 3; do [ "$addr" = "127.0.0.1:${cport[$i]}" ] && { echo "$i"; return 0; }; done
  return 1
}

# A single master and three masters, each with a fresh data directory.
GLIBC_TUNABLES=$tunables bench_master --config "$tmp/master.toml"
single=$addr
start_member 1
for _ in $(seq 100); do grep -q '^listening ' "$tmp/m1.out" && break; sleep 0.1; done
fp=$(sed -n 's/.*fingerprint \(sha256:[0-9a-f]*\).*/\1/p' "$tmp/m1.err" | head -1)
for i in 2 3; do
  start_member "$i" --join "127.0.0.1:${rport[1]}" --join-token bench-token --ca-fingerprint "$fp"
  for _ in $(seq 300); do grep -q 'this master is a voter' "$tmp/m$i.err" && break; sleep 0.1; done
done
export YARD_CA="$tmp/m1/ca.pem" YARD_TOKEN
YARD_TOKEN=$(cat "$tmp/m1/admin.token")
ha_ca=$YARD_CA; single_ca="$tmp/data/ca.pem"; single_token=$(cat "$tmp/data/admin.token")

# 1 client x 300 jobs; 16 clients x 25 jobs (short: the 16 connections' set-up is part of it);
# 16 clients x 200 jobs (sustained).
s1=(); s16=(); h1=(); h16=(); s16L=(); h16L=()
for round in $(seq "${ROUNDS:-3}"); do
  s1+=("$(YARD_CA=$single_ca YARD_TOKEN=$single_token rate "$single" 1 300 s1r$round)")
  h1+=("$(rate "127.0.0.1:${cport[1]}" 1 300 h1r$round)")
  s16+=("$(YARD_CA=$single_ca YARD_TOKEN=$single_token rate "$single" 16 25 s16r$round)")
  h16+=("$(rate "127.0.0.1:${cport[1]}" 16 25 h16r$round)")
  s16L+=("$(YARD_CA=$single_ca YARD_TOKEN=$single_token rate "$single" 16 200 s16lr$round)")
  h16L+=("$(rate "127.0.0.1:${cport[1]}" 16 200 h16lr$round)")
done
for n in 1 16 16L; do
  eval "s=(\"\${s$n[@]}\"); h=(\"\${h$n[@]}\")"
  ms=$(median "${s[@]}"); mh=$(median "${h[@]}")
  what="$n client(s)"
  [ "$n" = 16L ] && what="16 clients x 200 jobs"
  echo "submissions/s, $what: single ${s[*]} median $ms; three masters ${h[*]} median $mh;" \
    "ratio $(awk -v a="$mh" -v b="$ms" 'BEGIN { printf "%.2f", a / b }')"
done
# SATURATE="16 32 64 128": that many clients, 200 jobs each (as the sustained round), single and
# three masters one after the other, ROUNDS times, each with the share of the machine's CPU time that was busy
# (/proc/stat) while it ran: whether more clients buy more (a side that gains is not saturated),
# and whether either side left cores idle. Medians.
cpu_ticks() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat; }
busy_rate() {  # busy_rate ADDR CLIENTS JOBS PREFIX -> "JOBS/S BUSY%"
  local a b r
  read -r -a a < <(cpu_ticks)
  r=$(rate "$@")
  read -r -a b < <(cpu_ticks)
  echo "$r $(awk -v u=$((b[0] - a[0])) -v i=$((b[1] - a[1])) 'BEGIN { printf "%.0f", 100 * u / (u + i) }')"
}
for c in ${SATURATE:-}; do
  j=200; sr=(); sb=(); hr=(); hb=()
  for round in $(seq "${ROUNDS:-3}"); do
    read -r r b < <(YARD_CA=$single_ca YARD_TOKEN=$single_token busy_rate "$single" "$c" "$j" sat${c}r$round)
    sr+=("$r"); sb+=("$b")
    read -r r b < <(busy_rate "127.0.0.1:${cport[1]}" "$c" "$j" hsat${c}r$round)
    hr+=("$r"); hb+=("$b")
  done
  ms=$(median "${sr[@]}"); mh=$(median "${hr[@]}")
  echo "saturation, $c clients x $j jobs: single ${sr[*]} median $ms (busy $(median "${sb[@]}")%);" \
    "three masters ${hr[*]} median $mh (busy $(median "${hb[@]}")%); ratio $(awk -v a="$mh" -v b="$ms" 'BEGIN { printf "%.2f", a / b }')"
done
kill -9 "$master"

# Failover: failover SIGNAL ROUNDS WHAT.
acked=0
failover() {
  local sig=$1 rounds=$2 what=$3 k j old t0 before rc
  local tag=${sig,,}  # names are lower case
  local times=() exits=() handed=0
  for k in $(seq "$rounds"); do
    for j in $(seq 5); do
      cat >"$tmp/ack.yaml" <<YAML
name: ack-$tag-$k-$j
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: [sh, -c, 'true'], resources: { cpu: 100m, memory: 32Mi } }
YAML
      "$bin/yardctl" --master "$list" job submit "$tmp/ack.yaml" >/dev/null 2>&1 && acked=$((acked + 1))
    done
    old=$(leader) || { echo "round $k: no leader" >&2; break; }
    before=$(grep -c 'handed the lead to' "$tmp/m$old.err")
    t0=$(date +%s%N)
    kill "-$sig" "${mpid[$old]}"
    until "$bin/yardctl" --master "$list" queue create "q$tag$k" --cpu 1 --memory 1Gi >/dev/null 2>&1; do
      sleep 0.02
      [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 30000 ] && break
    done
    times+=("$(( ($(date +%s%N) - t0) / 1000000 ))")
    wait "${mpid[$old]}" 2>/dev/null; rc=$?
    exits+=("$rc")
    [ "$(grep -c 'handed the lead to' "$tmp/m$old.err")" -gt "$before" ] && handed=$((handed + 1))
    before=$(grep -c 'following the leader' "$tmp/m$old.err")
    start_member "$old"
    for _ in $(seq 300); do [ "$(grep -c 'following the leader' "$tmp/m$old.err")" -gt "$before" ] && break; sleep 0.1; done
  done
  local sorted n p50 p99
  sorted=$(printf '%s\n' "${times[@]}" | sort -n)
  n=${#times[@]}
  p50=$(echo "$sorted" | awk -v n="$n" 'NR == int((n + 1) / 2)')
  p99=$(echo "$sorted" | awk -v n="$n" 'NR == (int(n * 0.99 + 0.999) > n ? n : int(n * 0.99 + 0.999))')
  echo "failover, $n $what: writes accepted again after median ${p50} ms, p99 ${p99} ms, worst $(echo "$sorted" | tail -1) ms"
  echo "  each: ${times[*]}"
  [ "$sig" = TERM ] && echo "  exit statuses: $(printf '%s\n' "${exits[@]}" | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }'); lead handed on: $handed of $n"
}
failover 9 "$kills" "leader kills (kill -9)"
failover TERM "${STOPS:-$kills}" "leader stops (SIGTERM)"
held=$("$bin/yardctl" --master "$list" -o json job list 2>/dev/null | python3 -c '
import json,sys
names=[j["name"] for j in json.load(sys.stdin) if j["name"].startswith("ack-")]
print(len(names), len(names) - len(set(names)))')
echo "acknowledged jobs: $acked; held after the kills: ${held% *}; held twice: ${held#* }"
