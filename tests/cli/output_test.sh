#!/usr/bin/env bash
# yardctl -o json, command by command, against a real master (docs/yardctl.md, "yardctl
# output"): stdout is one JSON document (JSON Lines for logs), stderr stays empty, errors
# are {"error": {"message", "path"?}} on stdout with the exit code of the text mode (1
# refused or failed, 2 usage), and -o json works before or after the subcommand.
set -u
bin=$1
src=$2
source "$(dirname "$0")/lib.sh"

# jexpect RC CHECK -- ARGS...: `yardctl -o json ARGS` exits RC, prints exactly one JSON
# document on stdout (bound to j) for which the Python expression CHECK holds, and nothing
# on stderr.
jexpect() {
  local want=$1 check=$2; shift 3
  "$bin/yardctl" -o json "$@" >"$tmp/j.out" 2>"$tmp/j.err"; local rc=$?
  [ "$rc" -eq "$want" ] || fail "yardctl -o json $*: exit $rc, want $want: $(cat "$tmp/j.out" "$tmp/j.err")"
  [ -s "$tmp/j.err" ] && fail "yardctl -o json $*: stderr is not empty: $(cat "$tmp/j.err")"
  /usr/bin/python3 - "$tmp/j.out" "$check" <<'PY' || fail "yardctl -o json $*: not JSON, or $check is false: $(cat "$tmp/j.out")"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}
# An error object and nothing else: {"error": {"message": ...}} (path only if given).
err() { echo "set(j) == {'error'} and j['error']['message'].find('$1') >= 0 and 'path' not in j['error']"; }

printf 'join_token = "s3cret"\ndataset_roots = ["/mnt"]\n' >"$tmp/master.toml"
start_master --config "$tmp/master.toml"
YARD_JOIN_TOKEN=s3cret "$bin/yard-synthetic-nodes" --master "$agents" --ca "$YARD_CA" --count 1 --cpu 1 --memory 1Gi --gpu 0 --once >/dev/null 2>&1 ||
  fail "synthetic node did not register"

# version, and --version
jexpect 0 "j == {'client': {'version': j['client']['version']}, 'master': {'version': j['client']['version'], 'address': '$addr'}}" -- version
jexpect 0 "j == {'client': {'version': j['client']['version']}}" -- --version
jexpect 1 "j['master'] is None and j['client']['version'] and 'cannot reach the master at 127.0.0.1:1' in j['error']['message']" -- version --master 127.0.0.1:1
YARD_MASTER= jexpect 1 "j['master'] is None and 'no master address' in j['error']['message']" -- version

# validate: the normalised spec; an invalid one with every error, the first as "error".
jexpect 0 "j['name'] == 'resnet-train'" -- validate "$src/configs/examples/dag.yaml"
printf 'name: ab\ntasks: []\n' >"$tmp/bad.yaml"
jexpect 1 "j['error']['path'] == 'name' and 'must be 4-25 characters' in j['error']['message'] and len(j['errors']) == 2 and j['file'].endswith('bad.yaml')" -- validate "$tmp/bad.yaml"
jexpect 2 "$(err 'nope.yaml: no such file')" -- validate "$tmp/nope.yaml"
jexpect 2 "$(err ': is a directory, not a spec file')" -- validate "$tmp"
jexpect 2 "$(err '/dev/null: is not a regular file (a spec is read from a file)')" -- validate /dev/null
# job submit: a missing file is a usage error too; a whole-file error (bad YAML) has no "path".
jexpect 2 "$(err 'nope.yaml: no such file')" -- job submit "$tmp/nope.yaml"
jexpect 2 "$(err 'nope.yaml: no such file')" -- job submit "$src/configs/examples/dag.yaml" "$tmp/nope.yaml"
printf 'name: [unclosed\n' >"$tmp/broken.yaml"
jexpect 1 "'path' not in j['error'] and all('path' not in e for e in j['errors']) and j['file'].endswith('broken.yaml')" -- job submit "$tmp/broken.yaml"

# exec: stdout is the remote command's, so yardctl's own error goes to stderr: JSON with -o json.
"$bin/yardctl" exec no-such-job -o json -- true >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/o" ] &&
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert "no-such-job" in j["error"]["message"]' "$tmp/e" ||
  fail "exec -o json error: rc $rc: $(cat "$tmp/o" "$tmp/e")"
"$bin/yardctl" exec no-such-job -- true >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/o" ] && grep -q '^yardctl: .*no-such-job' "$tmp/e" || fail "exec text error: rc $rc: $(cat "$tmp/o" "$tmp/e")"

# Usage errors from the parser are JSON too, exit 2; without -o json they stay text.
jexpect 2 "$(err 'The following argument was not expected: --frobnicate')" -- queue list --frobnicate
jexpect 2 "$(err 'A subcommand is required')" -- job
# A top-level flag or command yardctl does not know is named (not "a subcommand is required").
jexpect 2 "$(err 'unknown flag --frobnicate')" -- --frobnicate
jexpect 2 "$(err 'unknown command \"frobnicate\"')" -- frobnicate
jexpect 2 "$(err 'name is required')" -- job show
"$bin/yardctl" job list --frobnicate -o json >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/e" ] && grep -q '"error"' "$tmp/o" || fail "-o json after a bad flag: rc $rc: $(cat "$tmp/o" "$tmp/e")"
"$bin/yardctl" job show >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$tmp/o" ] && grep -q '^yardctl: name is required' "$tmp/e" || fail "text usage error: rc $rc: $(cat "$tmp/o" "$tmp/e")"

# A malformed --master is a usage error naming the flag, the rule and the value, before any
# address is dialled; a list with one address that answers is fine.
jexpect 2 "$(err '--master: must be HOST:PORT or a comma-separated list of them, not \",\"')" -- --master , queue list
jexpect 2 "$(err '--master: \"127.0.0.1:1,,nohost\": \"nohost\" is not HOST:PORT (an IP address or a host name, and a port)')" -- --master 127.0.0.1:1,,nohost queue list
"$bin/yardctl" --master 127.0.0.1:99999 queue list >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q '^yardctl: --master: "127.0.0.1:99999": port must be 0-65535' "$tmp/e" || fail "text --master error: rc $rc: $(cat "$tmp/o" "$tmp/e")"
jexpect 0 "any(q['name'] == 'default' for q in j)" -- --master "127.0.0.1:1,$YARD_MASTER" queue list
# A malformed $YARD_MASTER is named as such when a command needs the master; the flag wins over
# it, and commands that need no master (validate) still run.
YARD_MASTER=, jexpect 1 "$(err 'YARD_MASTER: must be HOST:PORT or a comma-separated list of them')" -- queue list
YARD_MASTER=, jexpect 0 "any(q['name'] == 'default' for q in j)" -- --master "$YARD_MASTER" queue list
YARD_MASTER=, jexpect 0 "j['name'] == 'resnet-train'" -- validate "$src/configs/examples/dag.yaml"

# Queues: create/update/state/show print the queue, list an array, delete a result.
jexpect 0 "j['name'] == 'team-a' and j['quota']['cpuMillis'] == 16000 and j['state'] == 'running'" -- queue create team-a --cpu 16 --memory 16Gi
jexpect 1 "$(err 'queue team-a already exists')" -- queue create team-a --cpu 8 --memory 16Gi
jexpect 2 "$(err '--cpu: \"lots\" is not a cpu quantity')" -- queue create team-b --cpu lots --memory 1Gi
jexpect 2 "$(err 'nothing to change')" -- queue update team-a
jexpect 0 "j['name'] == 'team-a' and j['weight'] == 2" -- queue update team-a --weight 2
jexpect 0 "j['state'] == 'closed'" -- queue state team-a closed
jexpect 0 "j['state'] == 'running'" -- queue state team-a running
jexpect 0 "sorted(q['name'] for q in j) == ['default', 'team-a']" -- queue list
jexpect 0 "j['name'] == 'team-a'" -- queue show team-a
jexpect 1 "$(err 'queue team-z does not exist')" -- queue show team-z
"$bin/yardctl" queue create team-b --cpu 1 --memory 1Gi >/dev/null
jexpect 0 "j == {'result': 'queue team-b deleted', 'kind': 'queue', 'name': 'team-b'}" -- queue delete team-b

# Datasets.
jexpect 0 "j['name'] == 'imagenet' and j['readOnly'] is True" -- dataset create imagenet --path /mnt/imagenet
jexpect 1 "$(err 'must be an absolute path')" -- dataset create bad-one --path rel/path
jexpect 0 "[d['name'] for d in j] == ['imagenet']" -- dataset list
jexpect 0 "j['path'] == '/mnt/imagenet'" -- dataset show imagenet

# Jobs. Submit answers with what the master recorded: the default queue for a spec that
# names none, the tasks and their roles.
cat >"$tmp/job.yaml" <<'YAML'
name: out-train
tasks:
  - name: prep
    kind: container-job
    completions: 3
    parallelism: 2
    container: { image: host, command: "true", resources: { cpu: 4, memory: 1Gi } }
  - name: train
    kind: pytorch
    dependsOn: [ prep ]
    roles:
      master: { replicas: 1, container: &c { image: host, command: "true", resources: { cpu: 4, memory: 1Gi } } }
      worker: { replicas: 2, container: *c }
YAML
jexpect 0 "j['result'] == 'job out-train submitted to queue default (2 tasks)' and j['kind'] == 'job' and j['name'] == 'out-train' and j['queue'] == 'default' and j['state'] == 'Queued' and
  j['tasks'] == [{'name': 'prep', 'kind': 'container-job', 'state': 'Queued', 'completions': 3, 'roles': [{'name': 'run', 'replicas': 2}]},
                 {'name': 'train', 'kind': 'pytorch', 'mode': 'master-worker', 'state': 'Waiting', 'roles': [{'name': 'master', 'replicas': 1}, {'name': 'worker', 'replicas': 2}]}]" -- job submit "$tmp/job.yaml"
sed 's/^name: out-train/name: out-team\nqueue: team-a/' "$tmp/job.yaml" >"$tmp/team.yaml"
jexpect 0 "j['queue'] == 'team-a' and [t['name'] for t in j['tasks']] == ['prep', 'train']" -- job submit "$tmp/team.yaml"
# Refusals: the master's, with the spec field's path when it names one; the local validator's,
# every error with its path.
jexpect 1 "$(err 'job name out-train is already used')" -- job submit "$tmp/job.yaml"
sed 's/^name: out-train/name: out-noq\nqueue: team-z/' "$tmp/job.yaml" >"$tmp/noq.yaml"
jexpect 1 "$(err 'queue team-z does not exist')" -- job submit "$tmp/noq.yaml"
sed 's/^name: out-train/name: out-mount/; s/memory: 1Gi } }/memory: 1Gi }, mounts: [ { dataset: nope, path: \/data } ] }/' "$tmp/job.yaml" >"$tmp/mount.yaml"
jexpect 1 "j['error'] == {'message': 'dataset nope does not exist (yardctl dataset list)', 'path': 'tasks[0].container.mounts[0].dataset'}" -- job submit "$tmp/mount.yaml"
jexpect 1 "j['error']['path'] == 'name' and len(j['errors']) == 2 and j['errors'][1]['path'] == 'tasks' and j['file'].endswith('bad.yaml')" -- job submit "$tmp/bad.yaml"
"$bin/yardctl" job submit "$tmp/bad.yaml" >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && grep -q "^INVALID .*bad.yaml" "$tmp/e" && grep -q '^  name: "ab" must be 4-25' "$tmp/e" || fail "text invalid spec: rc $rc: $(cat "$tmp/o" "$tmp/e")"
"$bin/yardctl" job submit "$tmp/mount.yaml" >"$tmp/o" 2>"$tmp/e"
grep -qx 'yardctl: tasks\[0\].container.mounts\[0\].dataset: dataset nope does not exist (yardctl dataset list)' "$tmp/e" || fail "text refusal with a path: $(cat "$tmp/e")"

jexpect 0 "[x['name'] for x in j] == ['out-train', 'out-team'] and j[0]['state'] == 'Queued'" -- job list
jexpect 0 "[x['name'] for x in j] == ['out-team']" -- job list --queue team-a
jexpect 0 "j['job']['name'] == 'out-train' and [t['name'] for t in j['tasks']] == ['prep', 'train']" -- job show out-train
jexpect 1 "$(err 'job nope-job does not exist')" -- job show nope-job
jexpect 0 "j[0]['type'] == 'Submitted' and set(j[0]) == {'at', 'task', 'replica', 'attempt', 'type', 'reason'}" -- job events out-train
jexpect 0 "j == []" -- job top out-train
jexpect 1 "$(err 'not elastic')" -- job scale out-train --task train --replicas 2
jexpect 2 "$(err 'replicas is required')" -- job scale out-train --task train
jexpect 0 "j == {'result': 'job out-train cancelled', 'kind': 'job', 'name': 'out-train'}" -- job cancel out-train
jexpect 1 "$(err 'job out-train already finished (Cancelled)')" -- job cancel out-train
jexpect 0 "j == {'result': 'job out-train Cancelled: every replica has stopped', 'kind': 'job', 'name': 'out-train', 'state': 'Cancelled'}" -- job cancel out-train --wait
jexpect 0 "j == {'result': 'job out-train deleted', 'kind': 'job', 'name': 'out-train'}" -- job delete out-train
jexpect 0 "j == {'result': 'job out-team deleted: every replica has stopped', 'kind': 'job', 'name': 'out-team'}" -- job delete out-team --wait --timeout 10
jexpect 1 "$(err 'job out-train does not exist')" -- job delete out-train
jexpect 0 "j == {'result': 'dataset imagenet deleted', 'kind': 'dataset', 'name': 'imagenet'}" -- dataset delete imagenet

# Nodes.
jexpect 0 "[n['name'] for n in j] == ['node-1']" -- node list
jexpect 0 "j['name'] == 'node-1' and j['drained'] is False" -- node show node-1
jexpect 0 "j['name'] == 'node-1' and j['drained'] is True" -- node drain node-1
jexpect 0 "j['drained'] is True" -- node show node-1
jexpect 0 "j['name'] == 'node-1' and j['drained'] is False" -- node undrain node-1
jexpect 1 "$(err 'node-9')" -- node drain node-9
jexpect 0 "[n['name'] for n in j] == ['node-1']" -- node top

# logs: JSON Lines; an error is one more line.
"$bin/yardctl" logs nope-job -o json >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/e" ] && [ "$(cat "$tmp/o")" = '{"error":{"message":"job nope-job does not exist"}}' ] ||
  fail "logs -o json error: rc $rc: $(cat "$tmp/o" "$tmp/e")"

# completion and the hidden name lister.
jexpect 0 "j['shell'] == 'bash' and 'complete -F _yardctl yardctl' in j['script']" -- completion bash
jexpect 0 "sorted(j) == ['default', 'team-a']" -- __complete queues
jexpect 2 "$(err 'shell is required')" -- completion

# The master gone: refusals are JSON, exit 1.
kill -TERM "$master"; wait "$master" 2>/dev/null
jexpect 1 "$(err "cannot reach the master at $addr")" -- job list
jexpect 1 "$(err "cannot reach the master at $addr")" -- queue create team-c --cpu 1 --memory 1Gi
jexpect 1 "$(err "cannot reach the master at $addr")" -- job submit "$tmp/job.yaml"
jexpect 1 "$(err "cannot reach the master at $addr")" -- job events out-train --follow
jexpect 1 "$(err "cannot reach the master at $addr")" -- job list --watch
YARD_MASTER= jexpect 1 "$(err 'no master address')" -- node list

finish "cli.output"
