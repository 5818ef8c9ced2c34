#!/usr/bin/env python3
"""Idle-peer lockout probe (issue 27, item 3), as the hostile probe ran it: N TLS connections
from 18 loopback addresses that finish their handshake (or not) and then send nothing, held
open against the master's client API, while an admin runs `yardctl queue list` every second.
Prints how long each admin call took during the flood, and how many flood connections the
master had closed by the end.
  idle_flood.py HOST:PORT CA_FILE YARDCTL SECONDS CONNECTIONS [handshake|raw]
"""
import socket, ssl, subprocess, sys, time

addr, ca, yardctl, secs, count = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
mode = sys.argv[6] if len(sys.argv) > 6 else "handshake"
host, port = addr.rsplit(":", 1)
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
socks = []
opened = 0
for i in range(count):
    src = "127.0.0.%d" % (10 + i % 18)
    try:
        s = socket.create_connection((host, int(port)), timeout=5, source_address=(src, 0))
        if mode == "handshake":
            s = ctx.wrap_socket(s)
        s.setblocking(False)
        socks.append(s)
        opened += 1
    except OSError:
        pass
print("flood_opened=%d of %d (%s)" % (opened, count, mode), flush=True)
times = []
failures = 0
end = time.time() + secs
while time.time() < end:
    t0 = time.time()
    r = subprocess.run([yardctl, "--master", addr, "queue", "list"], capture_output=True, text=True, timeout=60)
    dt = time.time() - t0
    if r.returncode == 0:
        times.append(dt)
    else:
        failures += 1
    time.sleep(1)
alive = 0
for s in socks:
    try:
        data = s.recv(1)
        if data:
            alive += 1
    except (BlockingIOError, ssl.SSLWantReadError):
        alive += 1
    except OSError:
        pass
times.sort()
med = times[len(times) // 2] if times else float("nan")
print("admin_calls_ok=%d admin_calls_failed=%d admin_median_s=%.3f admin_max_s=%.3f flood_still_open=%d" %
      (len(times), failures, med, max(times) if times else float("nan"), alive), flush=True)
