#!/usr/bin/env bash
# The master holds its own limits (docs/reliability.md, "Bounded resources per peer"):
#  - a spec sent over the wire, past yardctl's checks, is refused with the limit and the size,
#    and nothing is stored: 6 MiB (refused from the frame's header) and just over 2 MiB
#    once normalised (refused by the submission check);
#  - a job whose stored rows cannot be read (a damaged spec, a state the store never wrote) is
#    quarantined at load: the master starts, logs which job and why, and the job is Failed
#    with the reason, also after the next restart.
set -u
bin=$1
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3  # Debian's, with sqlite3

# submit_raw BYTES: sends a jobSubmit whose argv holds a BYTES-long word, framed by hand (the
# capnp tool encodes the text form), and prints the answer's error message.
submit_raw() {
  "$py" -c '
import sys
n = int(sys.argv[1])
print("(id = 1, token = \"" + sys.argv[2] + "\", jobSubmit = (name = \"huge-job\", queue = \"default\", tasks = [(name = \"only-task\", "
      "kind = containerJob, containerJob = (container = (image = \"host\", sizing = (resources = "
      "(cpuMillis = 1000, memoryBytes = 1073741824)), argv = [\"ls\", \"" + "a" * n + "\"])))]))")
' "$1" "$YARD_TOKEN" >"$tmp/req.txt"
  capnp encode "$src/schema/api.capnp" Request <"$tmp/req.txt" >"$tmp/req.bin" || { echo "capnp encode failed"; return; }
  "$py" - "$addr" "$tmp/req.bin" "$tmp/resp.bin" "$YARD_CA" <<'PY'
import socket, ssl, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
body = open(sys.argv[2], "rb").read()
ctx = ssl.create_default_context(cafile=sys.argv[4])  # every connection is TLS (docs/security.md)
ctx.check_hostname = False  # Yard checks the certificate's name, yard-master, not the address
s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=20))
s.sendall(struct.pack("<I", len(body)) + body)   # the whole request first, as yardctl does
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
    if len(data) >= 4 and len(data) >= 4 + struct.unpack("<I", data[:4])[0]:
        break
open(sys.argv[3], "wb").write(data[4:])
PY
  capnp decode "$src/schema/api.capnp" Response <"$tmp/resp.bin" 2>&1 | sed -n 's/.*message = "\(.*\)".*/\1/p'
}
src=$(cd "$(dirname "$0")/../.." && pwd)

start_master
out=$(submit_raw $((6 << 20)))
echo "$out" | grep -qE 'frame of 629[0-9]{4} bytes is over the limit of 2162688 bytes' ||
  fail "6 MiB spec over the wire: answer does not name the size and the limit: $out"
out=$(submit_raw $(((2 << 20) + 1000)))
echo "$out" | grep -qE '^spec is 2[0-9]{6} bytes once normalised, more than the limit of 2 MiB \(2097152 bytes\)$' ||
  fail "2 MiB spec over the wire: answer does not name the size and the limit: $out"
expect 0 '^No jobs|^NAME' -- job list
"$bin/yardctl" job list | grep -q huge-job && fail "a refused spec was stored"
# The master still serves after both refusals.
expect 0 'default' -- queue list

# Quarantine: two jobs, then damage each one's row while the master is down.
cat >"$tmp/job.yaml" <<'EOF'
name: NAME
tasks:
  - name: main
    kind: container-job
    container: { image: host, resources: { cpu: 1, memory: 1Gi }, command: "true" }
EOF
for name in m4long odd-state fine-job; do
  sed "s/NAME/$name/" "$tmp/job.yaml" >"$tmp/$name.yaml"
  expect 0 "job $name submitted" -- job submit "$tmp/$name.yaml"
done
kill "$master"; wait "$master" 2>/dev/null
"$py" - "$tmp/data/state.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE jobs SET spec = x'0000000005000000deadbeef' WHERE name = 'm4long'")
db.execute("UPDATE jobs SET state = 'Sleeping' WHERE name = 'odd-state'")
db.commit()
PY
: >"$tmp/err"
start_master
grep -qE 'job m4long \(id [0-9]+\) quarantined at load: its spec is unreadable: .*; marking it Failed' "$tmp/err" ||
  fail "the log does not say m4long was quarantined: $(cat "$tmp/err")"
grep -qE 'job odd-state \(id [0-9]+\) quarantined at load: its row: unknown job state "Sleeping"; marking it Failed' "$tmp/err" ||
  fail "the log does not say odd-state was quarantined: $(cat "$tmp/err")"
expect 0 'Failed' -- job show m4long
expect 0 'quarantined at load: its spec is unreadable' -- job show m4long
expect 0 'Failed' -- job show odd-state
expect 0 'Queued' -- job show fine-job
# Stored: after another restart both are still Failed, and m4long (still unreadable) is
# reported again without a new write.
sleep 0.5
kill "$master"; wait "$master" 2>/dev/null
: >"$tmp/err"
start_master
grep -qE 'job m4long \(id [0-9]+\) quarantined at load: .*; it stays Failed' "$tmp/err" ||
  fail "second start: m4long not reported as staying Failed: $(cat "$tmp/err")"
grep -q 'odd-state' "$tmp/err" && fail "second start: odd-state's row was stored Failed and reads fine now: $(cat "$tmp/err")"
expect 0 'Failed' -- job show m4long
expect 0 'Failed' -- job show odd-state
expect 0 'quarantined at load: its row: unknown job state' -- job show odd-state
# A quarantined job can be deleted like any finished one.
expect 0 'job m4long deleted' -- job delete m4long

finish "limits test"
