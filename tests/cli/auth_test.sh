#!/usr/bin/env bash
# Users, tokens, grants and the audit trail against a real master and a real agent
# (docs/security.md, "Users, roles and grants"): unauthenticated and wrong-token clients are
# refused on every command class; a user submits only where granted and sees, cancels,
# deletes, reads logs of and execs into only their own jobs, while an admin may; a revoked
# token stops at once; a join token with --uses 1 admits one agent; the audit trail has
# every change and refusal; no secret shows in a log, an argument list or job show.
# Usage: auth_test.sh BIN_DIR
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
# Besides lib.sh's cleanup: the agents' replicas and shims, and their cgroups.
auth_cleanup() {
  for f in "$tmp"/agent*/replicas/*/pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
  for f in "$tmp"/agent*/replicas/*/shim.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  [ "$fails" -gt 0 ] && for f in "$tmp"/err "$tmp"/agent*.err; do echo "=== $f"; tail -20 "$f"; done
  cleanup
  for d in /sys/fs/cgroup/*/yard/auth$$-* /sys/fs/cgroup/yard/auth$$-*; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
  done
}
trap auth_cleanup EXIT
start_master
admin=$YARD_TOKEN
me_uid=$(id -u) me_gid=$(id -g)

# --- every command class without a token, and with a wrong one
unset YARD_TOKEN
none='not authenticated: no token'
bad='not authenticated: the token is unknown, expired or revoked'
cat >"$tmp/host.yaml" <<'EOF'
name: any-job
tasks:
  - name: main
    kind: container-job
    container: { image: host, command: "sh -c 'echo hi'", resources: { cpu: 100m, memory: 64Mi } }
EOF
classes=("queue list" "queue create q1 --cpu 1 --memory 1Gi" "dataset list" "job list" "job submit $tmp/host.yaml"
         "job show x" "job cancel x" "job delete x" "job events x" "logs x" "job top x" "exec x -- true" "node list"
         "node drain x" "node delete x" "user list" "user create x" "user token create admin" "token create"
         "token list" "token revoke abcdefgh" "queue grant default x" "dataset grant d x" "audit" "whoami")
for c in "${classes[@]}"; do
  # shellcheck disable=SC2086
  expect 1 "$none" -- $c
  # shellcheck disable=SC2086
  YARD_TOKEN=yard_abcdefgh_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA expect 1 "$bad" -- $c
  # shellcheck disable=SC2086
  YARD_TOKEN=$admin-x expect 1 "$bad" -- $c
done
expect 0 'master: yard-master ' -- version  # ping needs no token
export YARD_TOKEN=$admin
expect 0 'admin +admin +0 +0' -- whoami

# --- users and their tokens
expect 0 'alice +user' -- user create alice --uid "$me_uid" --gid "$me_gid"
expect 0 'bob +user +- +-' -- user create bob
expect 1 'user bob already exists' -- user create bob
expect 1 '--uid and --gid go together' -- user create eve --uid 5
alice=$("$bin/yardctl" user token create alice --description "alice's laptop" 2>/dev/null)
bob=$("$bin/yardctl" user token create bob -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
[ ${#alice} -eq 57 ] && [ ${#bob} -eq 57 ] || fail "token secrets: '$alice' '$bob'"
bob_id=$(echo "$bob" | cut -c6-13)
YARD_TOKEN=$bob expect 0 'bob +user' -- whoami
YARD_TOKEN=$bob expect 1 'user bob may not create queues: admins only' -- queue create q2 --cpu 1 --memory 1Gi
YARD_TOKEN=$bob expect 1 'user bob may not list users: admins only' -- user list
YARD_TOKEN=$bob expect 1 'user bob may not create join tokens: admins only' -- token create
YARD_TOKEN=$bob expect 1 'user bob may not read the audit trail: admins only' -- audit
YARD_TOKEN=$bob expect 1 'user bob may not list the tokens of user alice: admins only' -- user token list alice
YARD_TOKEN=$bob expect 0 "$bob_id +api +bob +active" -- user token list

# --- a join token good for one agent
# --uses 0 would be read as no limit on the wire: refused as a usage error instead.
expect 2 '--uses: must be 1 or more, not 0' -- token create --uses 0
join=$("$bin/yardctl" token create --uses 1 --ttl 1h --description rack-1 2>/dev/null)
expect 0 'join +- +active .* 1 ' -- token list
start_agent() {  # start_agent N: an agent joining with $join from the environment
  YARD_JOIN_TOKEN=$join "$bin/yard-agent" --master "$agents" --ca "$tmp/data/ca.pem" --name "node-$1" \
    --address 127.0.0.1 --data-dir "$tmp/agent$1" --port-range "3$1000-3$1099" --allow-host-tasks \
    --cgroup-parent "yard/auth$$-$1" >"$tmp/agent$1.out" 2>"$tmp/agent$1.err" &
  pids+=("$!")
}
start_agent 1
eventually 'node-1 .*ready' -- node list
start_agent 2
for _ in $(seq 100); do grep -q 'join token used up' "$tmp/agent2.err" && break; sleep 0.1; done
grep -q 'join token used up' "$tmp/agent2.err" || fail "a second agent joined with a one-use token: $(tail -3 "$tmp/agent2.err")"
expect 0 'join +- +used up' -- token list
expect 0 'node-1' -- node list
"$bin/yardctl" node list | grep -q node-2 && fail "node-2 joined with a used-up token"

# --- queue grants, host tasks
expect 0 'team-a' -- queue create team-a --cpu 4 --memory 4Gi
job() {  # job FILE NAME IMAGE COMMAND
  printf 'name: %s\nqueue: team-a\ntasks:\n  - name: main\n    kind: container-job\n    container: { image: %s, command: "%s", resources: { cpu: 100m, memory: 64Mi } }\n' \
    "$2" "$3" "$4" >"$1"
}
job "$tmp/alice.yaml" alice-job host "sh -c 'echo alice-was-here; sleep 120'"
job "$tmp/bob.yaml" bob-job host "sh -c 'echo bob; sleep 120'"
YARD_TOKEN=$alice expect 1 'user alice may not submit to queue team-a: not granted' -- job submit "$tmp/alice.yaml"
expect 0 'queue team-a granted to user alice' -- queue grant team-a alice
expect 0 'queue team-a granted to user bob' -- queue grant team-a bob
expect 0 'Granted to: alice,bob' -- queue show team-a
expect 0 '^Fair share: [0-9.]+% \(turn order\), past usage [0-9.]+% \(decayed\)$' -- queue show team-a
YARD_TOKEN=$alice expect 1 'queue team-a does not allow host tasks \(image: host\)' -- job submit "$tmp/alice.yaml"
expect 0 'Host tasks: allowed for users' -- queue update team-a --allow-host-tasks
YARD_TOKEN=$alice expect 0 'job alice-job submitted' -- job submit "$tmp/alice.yaml"
YARD_TOKEN=$bob expect 1 'user bob may not run host tasks \(image: host\)' -- job submit "$tmp/bob.yaml"
job "$tmp/bob.yaml" bob-job busybox "sleep 1"
YARD_TOKEN=$bob expect 0 'job bob-job submitted' -- job submit "$tmp/bob.yaml"
YARD_TOKEN=$alice eventually '"state": "Running"' -- job show alice-job -o json

# --- bob and alice's job
theirs='job alice-job: it belongs to alice'
YARD_TOKEN=$bob expect 1 "user bob may not see $theirs" -- job show alice-job
YARD_TOKEN=$bob expect 1 "user bob may not see the events of $theirs" -- job events alice-job
YARD_TOKEN=$bob expect 1 "user bob may not cancel $theirs" -- job cancel alice-job
YARD_TOKEN=$bob expect 1 "user bob may not delete $theirs" -- job delete alice-job
YARD_TOKEN=$bob expect 1 "user bob may not read the logs of $theirs" -- logs alice-job
YARD_TOKEN=$bob expect 1 "user bob may not exec into $theirs" -- exec alice-job -- id
YARD_TOKEN=$bob expect 1 "user bob may not see the usage of $theirs" -- job top alice-job
YARD_TOKEN=$bob expect 1 "may not list every user's jobs \(--all\): admins only" -- job list --all
out=$(YARD_TOKEN=$bob "$bin/yardctl" job list)
echo "$out" | grep -q '^bob-job  *team-a .* bob  *[0-9:-]*  *[0-9:-]*$' || fail "bob's job list: $out"
echo "$out" | grep -q alice-job && fail "bob's job list shows alice's job: $out"
# Alice and the admin may.
YARD_TOKEN=$alice eventually 'alice-was-here' -- logs alice-job
YARD_TOKEN=$alice expect 0 "^$me_uid\$" -- exec alice-job -- id -u
expect 0 'Owner: +alice' -- job show alice-job
expect 0 'alice-was-here' -- logs alice-job
expect 0 '^hi$' -- exec alice-job -- echo hi
expect 0 '^alice-job +team-a .* alice +[0-9:-]+ +[0-9:-]+$' -- job list --all
expect 0 '^bob-job +team-a .* bob +[0-9:-]+ +[0-9:-]+$' -- job list --owner bob
out=$("$bin/yardctl" job list)
echo "$out" | grep -q -- '-job' && fail "the admin's own job list shows others' jobs: $out"

# --- a revoked token stops at once
expect 0 "token $bob_id revoked" -- token revoke "$bob_id"
YARD_TOKEN=$bob expect 1 "$bad" -- job list
YARD_TOKEN=$bob expect 1 "$bad" -- whoami

# --- node delete: refused while it runs something or is ready
expect 1 'node node-1 still has 1 replica|node node-1 is ready: drain it first' -- node delete node-1
expect 0 'draining' -- node drain node-1
expect 1 'node node-1 still has 1 replica' -- node delete node-1
YARD_TOKEN=$alice expect 0 'alice-job' -- job cancel alice-job
YARD_TOKEN=$alice eventually '"state": "Cancelled"' -- job show alice-job -o json
expect 0 'node node-1 deleted' -- node delete node-1
# Its certificate went with it: its agent, still running, is refused and the node stays gone.
sleep 2
"$bin/yardctl" node list | grep -q '^node-1 ' && fail "node-1 came back with a revoked certificate"

# --- the audit trail
audit=$("$bin/yardctl" audit -o json)
check_audit() {  # check_audit USER REQUEST OUTCOME [TARGET]
  echo "$audit" | python3 -c '
import json, sys
user, request, outcome = sys.argv[1:4]
target = sys.argv[4] if len(sys.argv) > 4 else None
rows = json.load(sys.stdin)
ok = any(r["user"] == user and r["request"] == request and r["outcome"] == outcome and
         (target is None or r["target"] == target) and
         (r["source"].startswith("127.0.0.1:") or request == "node.join") for r in rows)
sys.exit(0 if ok else 1)' "$@" || fail "audit has no $* record"
}
check_audit "" queue.list refused
check_audit "" job.submit refused
check_audit bob queue.create refused q2
check_audit alice job.submit refused alice-job
check_audit alice job.submit ok alice-job
check_audit bob job.cancel refused alice-job
check_audit bob job.exec refused alice-job
check_audit admin job.exec ok alice-job
check_audit admin queue.grant ok "team-a to alice"
check_audit admin user.token.create ok bob
check_audit admin token.revoke ok "$bob_id"
check_audit bob job.list refused
check_audit "" node.join ok node-1
check_audit "" node.join refused node-2
check_audit admin node.delete failed node-1
check_audit admin node.delete ok node-1
expect 0 'bob ' -- audit --user bob
n=$("$bin/yardctl" audit --user bob -o json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(len(r) if all(x["user"]=="bob" for x in r) else -1)')
[ "$n" -gt 5 ] || fail "audit --user bob: $n records"
expect 0 '^\[\]$' -- audit --since 2030-01-01T00:00:00Z -o json
expect 2 '--since: "yesterday"' -- audit --since yesterday

# --- no secret anywhere it should not be
for secret in "$admin" "$alice" "$bob" "$join"; do
  body=${secret:14}
  for f in "$tmp"/err "$tmp"/out "$tmp"/agent*.err "$tmp"/agent*.out; do
    grep -qF -- "$body" "$f" && fail "a secret is in $f"
  done
  ps -eo args | grep -v grep | grep -qF -- "$body" && fail "a secret is in a process's arguments"
  "$bin/yardctl" audit -o json | grep -qF -- "$body" && fail "a secret is in the audit trail"
  "$bin/yardctl" job show alice-job --env 2>&1 | grep -qF -- "$body" && fail "a secret is in job show"
done

finish auth_test
