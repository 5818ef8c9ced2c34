#!/usr/bin/env bash
# The HTTP API end to end (docs/http_api.md): a real master serving HTTPS on loopback with one
# agent running host replicas; tests/http/http_api_test.py drives every endpoint as a browser
# or script would, with the admin's token and a user's.
bin=${1:?usage: http_api_test.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../e2e/cluster.sh"

# A console folder of the test's own: the static routes are checked without needing npm.
mkdir -p "$tmp/console/assets"
echo '<!doctype html><title>Yard</title><div id=root></div>' >"$tmp/console/index.html"
echo 'console.log("app")' >"$tmp/console/assets/app-1234.js"

# On an address of its own (127.0.0.9): the certificate must name it, or TLS clients refuse.
start_master --http-listen 127.0.0.9:0 --console-dir "$tmp/console"
for _ in $(seq 50); do grep -q '^http ' "$tmp/master.out" && break; sleep 0.1; done
http=$(sed -n 's/^http //p' "$tmp/master.out")
[ -n "$http" ] || { fail "the master printed no http address"; finish http.api; }
start_agent 1
wait_nodes 1

"$bin/yardctl" user create alice --uid 65534 --gid 65534 >/dev/null || fail "user create alice"
alice=$("$bin/yardctl" user token create alice -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
"$bin/yardctl" queue grant default alice >/dev/null || fail "queue grant"
"$bin/yardctl" queue create team --cpu 2 --memory 2Gi --allow-host-tasks >/dev/null || fail "queue create team"
"$bin/yardctl" queue grant team alice >/dev/null || fail "queue grant team"
mkdir -p "$tmp/data/sample"
"$bin/yardctl" dataset create sample --path "$tmp/data/sample" >/dev/null || fail "dataset create"

CONSOLE_NODE_MODULES="$here/../../console/node_modules" \
YARD_HTTP="$http" YARD_CA="$tmp/master/ca.pem" YARD_TOKEN="$YARD_TOKEN" ALICE_TOKEN="$alice" YARDCTL="$bin/yardctl" \
  /usr/bin/python3 "$here/http_api_test.py" || fail "http_api_test.py"
# The audit trail says the requests came over HTTP, from the browser's address.
"$bin/yardctl" audit -o json | grep -q '(http)' || fail "no audit record with an (http) source"
finish http.api
