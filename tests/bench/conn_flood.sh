#!/usr/bin/env bash
# Connection flood against the dev cluster (`yard-master --dev`: a master and one agent on
# loopback), the probe of docs/reliability.md, "Bounded resources per peer":
#  - 100 connections that each send a frame header announcing 8 MiB and then trickle 1 KiB
#    every 100 ms (from 127.0.0.2), plus 100 idle connections (from 127.0.0.3), against the
#    master's client API and its agent API at once, for 15 s; then the same against the
#    agent's own API;
#  - resident memory (VmRSS) of the flooded daemon before, under the flood (after 8 s) and
#    2 s after it; whether `yardctl queue list` (the client API) and `yardctl logs` (the
#    master relaying from the agent's API) still answer during the flood, and how fast;
#  - what the flood met: connections refused over a cap, closed by the server, still open.
#   tests/bench/conn_flood.sh [BUILD_BIN]   (default build/bin)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
tmp=$(mktemp -d)
py=/usr/bin/python3
source "$(dirname "$0")/../../scripts/lib/dev_cluster.sh"
floods=()
cleanup() {
  for p in "${floods[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_dev_cluster
  rm -rf "$tmp"
}
trap cleanup EXIT
start_dev_cluster "$bin" "$tmp/dev"
master=$dev_master
agent=$dev_agent
agents=$(sed -n 's/^agents //p' "$tmp/dev/master.out")
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

# The agent's own API: the TCP port its process listens on (besides none other).
agent_api=$("$py" - "$agent" <<'PY'
import os, sys
pid = sys.argv[1]
inodes = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if link.startswith("socket:["):
        inodes.add(link[8:-1])
for line in open("/proc/net/tcp").read().splitlines()[1:]:
    f = line.split()
    if f[3] == "0A" and f[9] in inodes:
        ip, port = f[1].split(":")
        print("127.0.0.1:%d" % int(port, 16))
        break
PY
)

cat >"$tmp/flood.py" <<'PY'
# flood.py HOST:PORT SECONDS: 100 trickling 8 MiB frames from 127.0.0.2, 100 idle
# connections from 127.0.0.3; prints what became of them.
import socket, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
seconds = float(sys.argv[2])
def open_from(src):
    s = socket.socket()
    s.bind((src, 0))
    s.setblocking(False)
    s.connect_ex((host, int(port)))
    return s
big = [open_from("127.0.0.2") for _ in range(100)]
idle = [open_from("127.0.0.3") for _ in range(100)]
time.sleep(0.2)
alive = {id(s): True for s in big + idle}
for s in big:
    try:
        s.send(struct.pack("<I", 8 << 20))
    except OSError:
        alive[id(s)] = False
def gone(s):
    try:
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
end = time.time() + seconds
while time.time() < end:
    for s in big:
        if alive[id(s)]:
            try:
                s.send(b"x" * 1024)
            except BlockingIOError:
                pass
            except OSError:
                alive[id(s)] = False
    for s in idle:
        if alive[id(s)] and gone(s):
            alive[id(s)] = False
    time.sleep(0.1)
for s in big:
    if alive[id(s)] and gone(s):
        alive[id(s)] = False
n_big = sum(alive[id(s)] for s in big)
n_idle = sum(alive[id(s)] for s in idle)
print(f"{sys.argv[1]}: 8 MiB tricklers still open {n_big}/100, idle still open {n_idle}/100")
PY

# answers CMD...: "ok in N ms" or "FAILED"
answers() {
  local t0 t1
  t0=$(date +%s%N)
  if timeout 10 "$@" >/dev/null 2>&1; then t1=$(date +%s%N); echo "ok in $(((t1 - t0) / 1000000)) ms"; else echo "FAILED"; fi
}

# A replica with output, for `yardctl logs` through the agent's API.
cat >"$tmp/job.yaml" <<'YAML'
name: flood-logs
tasks:
  - name: talk
    kind: container-job
    container: { image: host, resources: { cpu: 100m, memory: 32Mi }, command: sh -c "echo hello from the replica; sleep 120" }
YAML
"$bin/yardctl" job submit "$tmp/job.yaml" >/dev/null
for _ in $(seq 100); do "$bin/yardctl" logs flood-logs 2>/dev/null | grep -q hello && break; sleep 0.1; done

# flood PID TARGETS...: floods every target for 15 s; prints the flooded daemon's RSS and
# whether the client API and the agent API answered meanwhile.
flood() {
  local pid=$1 before under after
  shift
  sleep 1
  before=$(rss "$pid")
  floods=()
  for target in "$@"; do
    "$py" "$tmp/flood.py" "$target" 15 >>"$tmp/flood.out" &
    floods+=($!)
  done
  sleep 4
  echo "  yardctl queue list during the flood: $(answers "$bin/yardctl" queue list)"
  echo "  yardctl logs (master -> agent API) during the flood: $(answers "$bin/yardctl" logs flood-logs)"
  sleep 4
  under=$(rss "$pid")
  wait "${floods[@]}"
  floods=()
  sleep 2
  after=$(rss "$pid")
  sed 's/^/  /' "$tmp/flood.out"
  : >"$tmp/flood.out"
  echo "  RSS before $(mib "$before"), under the flood $(mib "$under"), after $(mib "$after")"
}

echo "master (client API $YARD_MASTER, agent API $agents), 400 connections:"
flood "$master" "$YARD_MASTER" "$agents"
# Refusals are logged at most once per 10 s per listener.
grep 'refused a connection from' "$tmp/dev/master.log" | sed 's/^yard-master: /  master log: /' || true
echo "agent (its own API $agent_api), 200 connections:"
flood "$agent" "$agent_api"
echo "  yardctl queue list after both floods: $(answers "$bin/yardctl" queue list)"
echo "  open-file limit: $(grep -o 'open-file limit [0-9]*' "$tmp/dev/master.log" | head -1)"
"$bin/yardctl" job delete flood-logs >/dev/null
