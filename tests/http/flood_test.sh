#!/usr/bin/env bash
# Strangers cannot lock the HTTP API (docs/reliability.md, "Bounded resources per peer"): the
# probe's 512 slowloris connections from one address (request headers one line a second) and
# peers that connect and never start TLS. Before, they took every place for as long as they
# trickled and the admin waited in the listen backlog. Now one address holds 32 places, a
# request's head must arrive within 10 s and a handshake finish within 10 s; the admin, from
# another address, is answered at once, and from the flood's address once its peers are cut.
# Also: a body over 2 MiB gets the JSON 413 that docs/http_api.md promises. A master without
# agents; ~15 s.
bin=${1:?usage: flood_test.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && { kill -9 "$master"; wait "$master"; } 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$bin/yard-master" --data-dir "$tmp/m" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --metrics-listen "" >"$tmp/m.out" 2>"$tmp/m.err" &
master=$!
for _ in $(seq 100); do grep -q '^http ' "$tmp/m.out" 2>/dev/null && break; sleep 0.1; done
YARD_HTTP=$(sed -n 's/^http //p' "$tmp/m.out") YARD_CA="$tmp/m/ca.pem" YARD_TOKEN=$(cat "$tmp/m/admin.token") \
  /usr/bin/python3 "$here/flood_test.py"
rc=$?
[ $rc -eq 0 ] || { echo "--- master log"; tail -20 "$tmp/m.err"; }
exit $rc
