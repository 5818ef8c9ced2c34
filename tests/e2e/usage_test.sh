#!/usr/bin/env bash
# Host replicas run as their owner, and usage accounting (docs/security.md), end to end: a
# master and an agent with host replicas. A user mapped to uid/gid 65534 runs a host task in a
# queue that allows them: `id -u` in its log is 65534, it can write its own directory and
# read its hostfile, and cannot read another replica's files. A job that burns CPU shows
# non-zero core-seconds in `yardctl usage` by job, user and queue, still after it is deleted;
# users see only their own rows; --since/--until select jobs by when they ran.
bin=$1
source "$(dirname "$0")/cluster.sh"
# The test's directory is mktemp's 0700: the mapped user must be able to pass through to its
# replica's directory, as through /var/lib/yard (0755) to /var/lib/yard/agent (0711).
chmod 0711 "$tmp"

start_master
start_agent 1 --cpu 2 --memory 2Gi
wait_nodes 1
usage() { "$bin/yardctl" usage "$@"; }

say "a job that burns CPU is charged core-seconds"
cat >"$tmp/burn.yaml" <<YAML
name: burn
tasks:
  - name: spin
    kind: container-job
    container:
      image: host
      resources: { cpu: 1, memory: 64Mi }
      command: sh -c
      args: "'end=\$((\$(date +%s) + 6)); while [ \$(date +%s) -lt \$end ]; do :; done; echo burnt'"
YAML
submit "$tmp/burn.yaml"
wait_job burn Succeeded 40
core=""
for _ in $(seq 50); do
  core=$(usage --by job -o json | python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin) if x["job"]=="burn"]; print(r[0]["coreSeconds"] if r else "")')
  [ -n "$core" ] && break
  sleep 0.2
done
python3 -c "import sys; c=float('${core:-0}'); sys.exit(0 if 1.5 <= c <= 8 else 1)" \
  || fail "burn: core-seconds '$core', want 1.5-8 (6 s at up to 1 core, sampled): $(usage --by job)"
row=$(usage --by job -o json | python3 -c 'import json,sys; print([x for x in json.load(sys.stdin) if x["job"]=="burn"][0])')
echo "$row" | python3 -c "import ast,sys; r=ast.literal_eval(sys.stdin.read()); assert r['user']=='admin' and r['queue']=='default' and r['jobs']==1 and 5 <= r['wallSeconds'] <= 20 and r['memoryGibSeconds'] >= 0 and r['gpuSeconds'] == 0, r" \
  || fail "burn's row: $row"
usage --by user | grep -qE '^admin +1 +[0-9]+ ' || fail "usage by user: $(usage --by user)"
usage --by queue | grep -qE '^default +1 +[0-9]+ ' || fail "usage by queue: $(usage --by queue)"
usage | head -1 | grep -q '^USER  *JOBS  *CORE-SECONDS  *MEM-GIB-SECONDS  *GPU-SECONDS  *WALL$' || fail "usage table: $(usage)"
[ "$(usage --since 1h -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] || fail "usage --since 1h: $(usage --since 1h)"
[ "$(usage --until 2001-01-01T00:00:00Z -o json)" = "[]" ] || fail "usage --until 2001: $(usage --until 2001-01-01T00:00:00Z -o json)"
out=$(usage --since yesterday 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q -- '--since: "yesterday" must be an RFC 3339 time' || fail "bad --since: exit $rc: $out"
out=$(usage --since 2001-01-01T00:00:00 2>&1); rc=$?
[ "$rc" -eq 2 ] && echo "$out" | grep -q 'must end with a time zone' || fail "--since without a zone: exit $rc: $out"
"$bin/yardctl" job delete burn >/dev/null || fail "delete burn"
for _ in $(seq 50); do "$bin/yardctl" job show burn >/dev/null 2>&1 || break; sleep 0.1; done
usage --by job | grep -qE '^burn +admin +default +[1-9]' || fail "usage kept after the job is deleted: $(usage --by job)"

say "a user's host task runs as their uid/gid and sees only its own files"
"$bin/yardctl" user create alice --uid 65534 --gid 65534 >/dev/null || fail "user create alice"
"$bin/yardctl" queue create team-a --cpu 2 --memory 2Gi --allow-host-tasks >/dev/null || fail "queue create team-a"
"$bin/yardctl" queue grant team-a alice >/dev/null || fail "queue grant"
alice=$("$bin/yardctl" user token create alice 2>/dev/null) || fail "alice's token"
# A replica of the admin's (root) that holds a secret in its environment.
cat >"$tmp/other.yaml" <<YAML
name: other
tasks:
  - name: hold
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sleep, args: "600", env: [ { name: SECRET, value: other-secret } ] }
YAML
for _ in $(seq 100); do  # burn's directory gone, so the one found next is other's
  [ -z "$(find "$tmp"/agent1/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break
  sleep 0.1
done
submit "$tmp/other.yaml"
for _ in $(seq 100); do ls "$tmp"/agent1/replicas/*/pid >/dev/null 2>&1 && break; sleep 0.1; done
other_dir=$(dirname "$(ls "$tmp"/agent1/replicas/*/pid | head -1)")
cat >"$tmp/mine.yaml" <<YAML
name: mine
queue: team-a
tasks:
  - name: whoami
    kind: container-job
    container:
      image: host
      resources: { cpu: 100m, memory: 32Mi }
      command: sh -c
      args: "'echo uid=\$(id -u) gid=\$(id -g) groups=\$(id -G); echo home=\$HOME; echo x > mine.txt && echo wrote; cat $other_dir/env 2>/dev/null || echo no-other-env; ls $other_dir 2>/dev/null || echo no-other-list; cat \$YARD_REPLICA_DIR/env 2>/dev/null || echo no-own-env'"
YAML
YARD_TOKEN=$alice "$bin/yardctl" job submit "$tmp/mine.yaml" >/dev/null 2>"$tmp/submit.err" || fail "alice submits: $(cat "$tmp/submit.err")"
wait_job mine Succeeded 30
log=$(YARD_TOKEN=$alice "$bin/yardctl" logs mine)
echo "$log" | grep -q 'uid=65534 gid=65534 groups=65534$' || fail "the host task does not run as alice's uid: $log"
echo "$log" | grep -qE 'home=.*/replicas/[0-9]+-0/work$' || fail "HOME: $log"
for want in wrote no-other-env no-other-list no-own-env; do
  echo "$log" | grep -q "$want\$" || fail "alice's task: no '$want' in: $log"
done
echo "$log" | grep -q other-secret && fail "alice's task read another replica's env: $log"

say "users see their own usage, admins everyone's"
for _ in $(seq 50); do usage --by job | grep -q '^mine ' && break; sleep 0.2; done
usage --by job | grep -qE '^mine +alice +team-a ' || fail "admin's view of alice's job: $(usage --by job)"
mine=$(YARD_TOKEN=$alice "$bin/yardctl" usage --by job -o json | python3 -c 'import json,sys; print(sorted(x["job"] for x in json.load(sys.stdin)))')
[ "$mine" = "['mine']" ] || fail "alice sees jobs $mine, want only ['mine']"
out=$(YARD_TOKEN=$alice "$bin/yardctl" usage --user admin 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q 'user alice may not see the usage of user admin' || fail "alice asks for admin's usage: exit $rc: $out"
[ "$(usage --user alice --by user -o json | python3 -c 'import json,sys; print([x["user"] for x in json.load(sys.stdin)])')" = "['alice']" ] \
  || fail "admin's usage --user alice: $(usage --user alice --by user)"

"$bin/yardctl" job delete other >/dev/null
"$bin/yardctl" job delete mine >/dev/null
for _ in $(seq 100); do
  [ -z "$(find "$tmp"/agent*/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break
  sleep 0.1
done
no_leftovers
finish e2e.usage
