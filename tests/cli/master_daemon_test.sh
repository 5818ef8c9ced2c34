#!/usr/bin/env bash
# yard-master as a daemon: starts without a config file, answers yardctl, refuses a second
# instance on the same data directory, rejects a bad config, and stops cleanly on SIGTERM.
set -u
bin=$1
src=$2
source "$(dirname "$0")/lib.sh"

start_master

out=$("$bin/yardctl" --master "$addr" version) || fail "yardctl version failed: $out"
echo "$out" | grep -q "^master: yard-master .* at $addr" || fail "version output: $out"
out=$(YARD_MASTER=$addr "$bin/yardctl" version) || fail "YARD_MASTER not used: $out"

# Bad frames (oversized, misaligned, garbage) behind TLS close only their own connection; so
# does plaintext where TLS is expected.
python3 - "$addr" "$YARD_CA" <<'PY' || fail "bad frames: the master did not close the connections"
import socket, ssl, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.check_hostname = False  # Yard checks the certificate's name (yard-master), not the address
def closed(s):
    try:
        while True:
            if s.recv(4096) == b"":
                return True
    except (ssl.SSLError, ConnectionResetError, OSError):
        return True
for frame in [struct.pack("<I", 0x7ffffff8), struct.pack("<I", 12) + b"x" * 12,
              struct.pack("<I", 16) + b"\x00\x00\x00\x00\x64\x00\x00\x00" + b"\xff" * 8]:
    s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=5))
    assert s.version() == "TLSv1.3", s.version()
    s.sendall(frame)
    assert closed(s), "connection left open after a bad frame"
    s.close()
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(struct.pack("<I", 8) + b"\x00" * 8)  # a frame in plaintext
assert closed(s), "connection left open after plaintext"
PY
out=$("$bin/yardctl" --master "$addr" queue list) || fail "master unusable after bad frames: $out"
kill -0 "$master" 2>/dev/null || fail "master died on a bad frame"

"$bin/yard-master" --data-dir "$tmp/data" --listen 127.0.0.1:0 >/dev/null 2>"$tmp/err2"
rc=$?
[ $rc -eq 1 ] || fail "second instance: exit $rc, want 1"
grep -q "another yard-master (pid $master) is using the data directory $tmp/data" "$tmp/err2" || fail "second instance message: $(cat "$tmp/err2")"

printf 'listen = 5\n' >"$tmp/bad.toml"
"$bin/yard-master" --config "$tmp/bad.toml" --data-dir "$tmp/other" >/dev/null 2>"$tmp/err3"
rc=$?
[ $rc -eq 2 ] || fail "bad config: exit $rc, want 2"
grep -q "bad.toml: listen: must be a string" "$tmp/err3" || fail "bad config message: $(cat "$tmp/err3")"

kill -TERM "$master"
for _ in $(seq 50); do kill -0 "$master" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$master" 2>/dev/null; then fail "master did not stop on SIGTERM"; else
  wait "$master"; rc=$?; [ $rc -eq 0 ] || fail "master exit status $rc after SIGTERM"; fi
grep -q "stopped" "$tmp/err" || fail "no clean stop logged"

"$bin/yardctl" --master "$addr" version >/dev/null 2>"$tmp/err4"
rc=$?
[ $rc -eq 1 ] || fail "version against a stopped master: exit $rc, want 1"
grep -q "cannot reach the master at $addr" "$tmp/err4" || fail "unreachable message: $(cat "$tmp/err4")"
env -u YARD_MASTER "$bin/yardctl" version >/dev/null 2>"$tmp/err5"
grep -q "no master address: pass --master HOST:PORT, set YARD_MASTER" "$tmp/err5" || fail "missing address message"

finish "master daemon"
