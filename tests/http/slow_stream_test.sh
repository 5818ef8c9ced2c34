#!/usr/bin/env bash
# A browser that stops reading its event stream cannot hold the master (docs/http_api.md,
# "Live updates"): a master without agents (jobs stay queued), one event stream whose reader
# never reads (a 4 KiB receive buffer), and 6,000 submissions, ~7 MB of events. The master
# keeps answering, ends the stuck stream once its backlog passes 256 KiB, and the reader,
# resuming from the last id it got, is told to start afresh (reset) or gets what it missed.
bin=${1:?usage: slow_stream_test.sh BIN_DIR}
bin=$(cd "$bin" && pwd)
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && { kill -9 "$master"; wait "$master"; } 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$bin/yard-master" --data-dir "$tmp/m" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --metrics-listen "" >"$tmp/m.out" 2>"$tmp/m.err" &
master=$!
for _ in $(seq 100); do grep -q '^http ' "$tmp/m.out" 2>/dev/null && break; sleep 0.1; done
HTTP=$(sed -n 's/^http //p' "$tmp/m.out") ADDR=$(sed -n 's/^listening //p' "$tmp/m.out") CA="$tmp/m/ca.pem" \
  YARD_TOKEN=$(cat "$tmp/m/admin.token") STORM="$bin/yard-submit-storm" MASTER_PID=$master /usr/bin/python3 - <<'PY'
import http.client, os, socket, ssl, subprocess, sys, threading, time
host, port = os.environ["HTTP"].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["CA"])
tok = os.environ["YARD_TOKEN"]
fails = []
def check(c, what):
    if not c:
        fails.append(what); print("FAIL:", what, flush=True)

# The stuck reader: a tiny receive buffer, reads the response head and then nothing.
raw = socket.socket()
raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect((host, int(port)))
s = ctx.wrap_socket(raw, server_hostname=host)
s.sendall(f"GET /api/v1/events/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {tok}\r\n\r\n".encode())
head = s.recv(4096)
check(b"200" in head.split(b"\r\n")[0], f"stream head: {head[:80]!r}")

def rss():
    return int([l for l in open(f"/proc/{os.environ['MASTER_PID']}/status") if l.startswith("VmRSS")][0].split()[1])
rss0 = rss()
storm = subprocess.Popen([os.environ["STORM"], "--master", os.environ["ADDR"], "--ca", os.environ["CA"], "--clients", "4",
                          "--jobs", "1500", "--prefix", "flood"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
# Meanwhile the master answers others at once.
worst = 0
c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
while storm.poll() is None:
    t = time.perf_counter()
    c.request("GET", "/api/v1/whoami", headers={"Authorization": "Bearer " + tok})
    check(c.getresponse().read() != b"", "whoami during the flood")
    worst = max(worst, time.perf_counter() - t)
    time.sleep(0.05)
print(f"worst whoami during the flood: {worst * 1000:.0f} ms; storm: {storm.stderr.read().decode().strip()}")
check(worst < 2.0, f"the master stalled {worst:.1f} s while a stream was stuck")
grow = (rss() - rss0) / 1024
print(f"master RSS grew {grow:.1f} MiB during the flood")
# Now read what the stuck stream has: it must end (the master closed it), not go on forever.
s.settimeout(20)
data, last = b"", None
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except (socket.timeout, ssl.SSLError, OSError) as e:
    check(False, f"the stuck stream was not ended by the master: {e}")
ids = [l[4:] for l in data.split(b"\n") if l.startswith(b"id: ")]
check(len(ids) > 0, "the stuck stream got no event at all")
last = ids[-1].decode() if ids else "0"
print(f"the stuck stream got {len(data)} bytes, last id {last}, then ended")
check(len(data) < 8_000_000, "the stuck stream got everything: nothing was dropped")
# Resuming from there: a reset (too far behind) or the rest, never an error.
c2 = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
c2.request("GET", "/api/v1/events/stream", headers={"Authorization": "Bearer " + tok, "Last-Event-ID": last})
r = c2.getresponse()
check(r.status == 200, f"resume status {r.status}")
first = b""
while b"event: " not in first or b"event: retry" in first:
    line = r.fp.readline()
    if not line:
        break
    first += line
    if line.startswith(b"event: "):
        break
check(first.strip().endswith((b"event: reset", b"event: job", b"event: task", b"event: event")), f"resume: {first!r}")
print("slow_stream_test:", "all checks passed" if not fails else f"{len(fails)} failed")
sys.exit(1 if fails else 0)
PY
