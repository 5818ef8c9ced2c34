#!/usr/bin/env bash
# Fencing of container replicas when their agent is dead (docs/reliability.md, "Fencing";
# docs/shim.md, `yard-shim guard`): `kill -9` of the agent running a container rank makes the
# container's guard stop it when the lease runs out, before the master re-places the gang on the
# other node; the restarted agent reports it fenced and resurrects nothing. A guard that is gone
# is replaced by the restarted agent, and a stop under way (cancel) still ends the container on
# time when the agent is killed mid-stop. Private containerd, registry on 127.0.0.1 (images.sh).
bin=$1
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/images.sh"
kill_guards() { for f in "$tmp"/agent*/replicas/*/guard.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done; }
trap 'kill_guards; stop_containerd; cleanup' EXIT
# 6 s heartbeat timeout: agents (and guards) fence after 4 s without an answer, SIGKILL within 1 s.
printf 'join_token = "e2e-token"\nheartbeat_timeout = "6s"\nstop_grace = "3s"\n' >"$tmp/master.toml"

ms() { date +%s%3N; }
alive() { kill -0 "$1" 2>/dev/null && ! grep -qs '^[^ ]* ([^)]*) Z' "/proc/$1/stat"; }
ctr_() { ctr --address "$containerd_sock" -n yard "$@"; }
task_pid() { ctr_ tasks ls | awk -v id="$1" '$1==id && $3=="RUNNING" {print $2}'; }
containerd_sock=""

say "a local image in a registry on 127.0.0.1, a private containerd, a master and two agents"
build_busybox_image "$tmp/oci" bb >"$tmp/image.log" 2>&1 || { fail "image build: $(cat "$tmp/image.log")"; exit 1; }
start_registry || exit 1
push_image "$tmp/oci" bb yard/busybox:1 || { fail "push"; exit 1; }
start_containerd || exit 1
image=$registry/yard/busybox:1
agent_args=(--cpu 2 --memory 8Gi --containerd-socket "$containerd_sock" --insecure-registry "$registry")
start_master
for n in 1 2; do start_agent "$n" "${agent_args[@]}"; done
wait_nodes 2

say "kill -9 of the agent running a container rank: its guard stops it before it runs elsewhere"
cat >"$tmp/rank.yaml" <<YAML
name: cf-rank
tasks:
  - name: train
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: $image
          resources: { cpu: 250m, memory: 32Mi }
          command: [sh, -c, 'echo rank attempt \$YARD_ATTEMPT; while :; do sleep 0.1; done']
    advanced: { retries: 2 }
YAML
submit "$tmp/rank.yaml"
for _ in $(seq 300); do [ "$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
node=$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["node"]')
n=${node#node-}
cid=$(ctr_ containers ls -q 'labels."yard.job"==cf-rank')
pid0=$(task_pid "$cid")
dir0=$tmp/agent$n/replicas/${cid#node-$n-}
guard0=$(cat "$dir0/guard.pid" 2>/dev/null)
[ -n "$pid0" ] && alive "$pid0" || fail "attempt 0 is not running: $(ctr_ tasks ls)"
[ -n "$guard0" ] && alive "$guard0" || fail "no guard beside attempt 0: $(ls "$dir0")"
tr '\0' ' ' <"/proc/$guard0/cmdline" | grep -q "yard-shim guard --dir $dir0 --pid $pid0 --cgroup-procs" \
  || fail "the guard's command line: $(tr '\0' ' ' <"/proc/$guard0/cmdline")"
sleep 1  # some beats, so the lease is a fresh one
killed=$(ms)
kill -9 "${agent_pid[$n]}"
wait "${agent_pid[$n]}" 2>/dev/null
gone="" elsewhere=""
for _ in $(seq 400); do
  [ -z "$gone" ] && ! alive "$pid0" && gone=$(ms)
  if [ -z "$elsewhere" ] && [ "$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["attempt"]')" = 1 ] \
     && [ "$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["state"]')" = Running ]; then elsewhere=$(ms); fi
  [ -n "$gone" ] && [ -n "$elsewhere" ] && break
  sleep 0.05
done
if [ -z "$gone" ]; then
  fail "the container of attempt 0 (pid $pid0) outlived its agent's lease: $(ctr_ tasks ls)"
else
  echo "    kill -9 -> container gone: $((gone - killed)) ms (fence_timeout 4000 + grace 1000 ms);" \
       "attempt 1 running elsewhere: $(( ${elsewhere:-0} - killed )) ms"
  [ $((gone - killed)) -le 6500 ] || fail "the container was stopped late: $((gone - killed)) ms after kill -9"
  [ $((gone - killed)) -ge 2500 ] || fail "the container was stopped before its lease ran out: $((gone - killed)) ms"
fi
[ -n "$elsewhere" ] || fail "attempt 1 never ran: $("$bin/yardctl" job events cf-rank)"
[ -n "$elsewhere" ] && [ -n "$gone" ] && [ "$gone" -gt "$elsewhere" ] && fail "attempt 1 ran before attempt 0 was gone"
[ "$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["node"]')" != "$node" ] || fail "attempt 1 ran on the dead agent's node"
grep -q '^lease expired at ' "$dir0/fenced" 2>/dev/null || fail "the guard did not record the fence: $(ls "$dir0")"
for _ in $(seq 40); do alive "$guard0" || break; sleep 0.05; done
alive "$guard0" && fail "the guard outlived its container"

say "the restarted agent reports it fenced and resurrects nothing"
start_agent "$n" "${agent_args[@]}"
wait_nodes 2
for _ in $(seq 50); do grep -q 'Killed (fenced by yard-shim guard: lease expired' "$tmp/agent$n.err" && break; sleep 0.1; done
grep -q 'Killed (fenced by yard-shim guard: lease expired' "$tmp/agent$n.err" \
  || fail "the restarted agent did not report the fenced attempt: $(grep -i 'attempt 0' "$tmp/agent$n.err" | tail -3)"
sleep 2
[ -z "$(task_pid "$cid")" ] || fail "attempt 0's container runs again: $(ctr_ tasks ls)"
[ "$(jshow cf-rank 'j["tasks"][0]["replicas"][0]["attempt"]')" = 1 ] || fail "the live attempt is not 1"
"$bin/yardctl" job cancel cf-rank >/dev/null
wait_job cf-rank Cancelled 20

say "a guard that is gone is replaced by the restarted agent; a stop outlives the agent"
cat >"$tmp/stop.yaml" <<YAML
name: cf-stop
tasks:
  - name: stubborn
    kind: pytorch
    roles:
      master:
        replicas: 1
        container:
          image: $image
          resources: { cpu: 250m, memory: 32Mi }
          command: [sh, -c, 'trap "" TERM; while :; do sleep 0.1; done']
YAML
submit "$tmp/stop.yaml"
for _ in $(seq 300); do [ "$(jshow cf-stop 'j["tasks"][0]["replicas"][0]["state"]' 2>/dev/null)" = Running ] && break; sleep 0.1; done
node=$(jshow cf-stop 'j["tasks"][0]["replicas"][0]["node"]')
n=${node#node-}
cid=$(ctr_ containers ls -q 'labels."yard.job"==cf-stop')
spid=$(task_pid "$cid")
sdir=$tmp/agent$n/replicas/${cid#node-$n-}
[ -n "$spid" ] || fail "cf-stop is not running: $(ctr_ tasks ls)"
old_guard=$(cat "$sdir/guard.pid" 2>/dev/null)
kill -9 "$old_guard" "${agent_pid[$n]}"
wait "${agent_pid[$n]}" 2>/dev/null
start_agent "$n" "${agent_args[@]}"
for _ in $(seq 50); do grep -q "started a new guard for $cid" "$tmp/agent$n.err" && break; sleep 0.1; done
new_guard=$(cat "$sdir/guard.pid" 2>/dev/null)
[ -n "$new_guard" ] && [ "$new_guard" != "$old_guard" ] && alive "$new_guard" \
  || fail "no new guard after the restart (was $old_guard, now ${new_guard:-none}): $(grep guard "$tmp/agent$n.err" | tail -3)"
wait_nodes 2
cancelled=$(ms)
"$bin/yardctl" job cancel cf-stop >/dev/null
for _ in $(seq 50); do [ -f "$sdir/stop" ] && break; sleep 0.1; done
[ -f "$sdir/stop" ] || fail "the agent did not hand the stop to the guard (no $sdir/stop)"
sleep 0.5
kill -9 "${agent_pid[$n]}"
wait "${agent_pid[$n]}" 2>/dev/null
died=""
for _ in $(seq 200); do alive "$spid" || { died=$(ms); break; }; sleep 0.05; done
if [ -z "$died" ]; then
  fail "the SIGTERM-ignoring container outlived its agent's stop"
else
  echo "    cancel -> SIGKILL by the guard with the agent dead: $((died - cancelled)) ms (grace 3000 ms)"
  [ $((died - cancelled)) -ge 2500 ] || fail "killed before its 3 s grace: $((died - cancelled)) ms"
  [ $((died - cancelled)) -le 4500 ] || fail "killed late: $((died - cancelled)) ms"
fi
[ -f "$sdir/fenced" ] && fail "a stop was recorded as a fence"
start_agent "$n" "${agent_args[@]}"
wait_job cf-stop Cancelled 20

say "nothing is left in containerd or the cgroups once the jobs are deleted"
for j in cf-rank cf-stop; do "$bin/yardctl" job delete "$j" >/dev/null || fail "delete $j"; done
for _ in $(seq 100); do
  [ -z "$(ctr_ containers ls -q)" ] && [ -z "$(find "$tmp"/agent*/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break
  sleep 0.1
done
[ -z "$(ctr_ containers ls -q)" ] || fail "containers left: $(ctr_ containers ls)"
no_leftovers
[ -z "$(pgrep -f "yard-shim guard --dir $tmp/")" ] || fail "guards left: $(pgrep -af "yard-shim guard --dir $tmp/")"

finish e2e.container_fence
