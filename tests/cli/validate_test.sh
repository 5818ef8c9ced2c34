#!/usr/bin/env bash
# yardctl validate: output and exit codes (0 all valid, 1 some invalid, 2 usage).
set -u
yardctl=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_rc() {  # expect_rc RC DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$what: exit $rc, want $want; stdout: $(cat "$tmp/out"); stderr: $(cat "$tmp/err")"
}

# Every example validates, in one call.
expect_rc 0 "examples" -- "$yardctl" validate "$src"/configs/examples/*.yaml
n=$(grep -c '^OK ' "$tmp/out")
[ "$n" -eq "$(ls "$src"/configs/examples/*.yaml | wc -l)" ] || fail "expected one OK line per example, got $n"

# An invalid spec: exit 1, every error with its path.
cat >"$tmp/bad.yaml" <<'YAML'
name: ab
tasks:
  - name: train
    kind: pytorch
    roles:
      master: { replicas: 1, container: { image: host, command: ls, resources: { cpu: 1, memory: 1Gi } } }
      worker:
        replicas: 2
        container:
          image: host
          command: ls
          resources: { cpu: 1, memory: 1Gi }
          ports: [ { name: ab, port: 9100 } ]
YAML
expect_rc 1 "invalid spec" -- "$yardctl" validate "$tmp/bad.yaml"
grep -q '^INVALID .*bad.yaml (2 errors)' "$tmp/out" || fail "missing INVALID header: $(cat "$tmp/out")"
grep -q 'name: "ab" must be 4-25 characters' "$tmp/out" || fail "missing job name error"
grep -q 'tasks\[0\].roles.worker.container.ports\[0\].name: "ab" must be 4-32 characters' "$tmp/out" || fail "missing port name error"

# A valid and an invalid file together: exit 1, both reported.
expect_rc 1 "mixed" -- "$yardctl" validate "$src/configs/examples/dag.yaml" "$tmp/bad.yaml"
grep -q '^OK .*dag.yaml' "$tmp/out" || fail "mixed: no OK line"

# -o json prints the normalised spec.
expect_rc 0 "json" -- "$yardctl" validate -o json "$src/configs/examples/dag.yaml"
python3 - "$tmp/out" <<'PY' || fail "json output wrong"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["name"] == "resnet-train", j["name"]
prep = j["tasks"][0]
assert prep["container"]["argv"][:2] == ["sh", "-c"], prep["container"]["argv"]
assert prep["container"]["resources"] == {"cpuMillis": 500, "memoryBytes": 268435456, "gpu": 0}
assert prep["timeoutSeconds"] == 600
train = j["tasks"][1]
assert train["dependsOn"] == ["prep-data"]
assert [r["name"] for r in train["roles"]] == ["master", "worker"]
assert train["advanced"]["maxLifetimeSeconds"] == 7200
PY
# Global flags go before or after the subcommand.
expect_rc 0 "json after" -- "$yardctl" validate "$src/configs/examples/dag.yaml" -o json
expect_rc 1 "json invalid" -- "$yardctl" -o json validate "$tmp/bad.yaml"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert len(j["errors"]) == 2' "$tmp/out" || fail "json errors"

# Usage errors: exit 2.
expect_rc 2 "missing file" -- "$yardctl" validate "$tmp/nope.yaml"
grep -q 'no such file' "$tmp/err" || fail "missing file message"
expect_rc 2 "no file" -- "$yardctl" validate
expect_rc 2 "bad flag" -- "$yardctl" validate --frobnicate "$tmp/bad.yaml"
expect_rc 2 "bad output" -- "$yardctl" -o yaml validate "$tmp/bad.yaml"
expect_rc 2 "no command" -- "$yardctl"
expect_rc 0 "help" -- "$yardctl" --help
expect_rc 0 "version" -- "$yardctl" --version

[ "$fails" -eq 0 ] && echo "cli.validate: all checks passed"
exit $((fails > 0))
