#!/usr/bin/env bash
# The HTTP API's costs (docs/benchmarks.md, "HTTP API and console"), on a plain master with no
# agents (jobs stay queued, so the numbers are the API's, not the workload's):
#  - GET /api/v1/jobs?limit=50 with 10,000 jobs in the master: median latency, against
#    GET /api/v1/whoami (a request that does nothing) in the same run;
#  - the master's CPU and memory while 50 event streams are open and 20 jobs/s are submitted
#    for 30 s, against the same submissions with no stream open (rounds alternated).
#   tests/bench/http_bench.sh [BIN] [ROUNDS]    (BIN default build/bin, ROUNDS 3)
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
rounds=${2:-3}
tmp=$(mktemp -d)
master=
cleanup() { [ -n "$master" ] && kill -9 "$master" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
py=/usr/bin/python3

"$bin/yard-master" --data-dir "$tmp/m" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
  --metrics-listen "" >"$tmp/m.out" 2>"$tmp/m.err" &
master=$!
for _ in $(seq 100); do grep -q '^http ' "$tmp/m.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^listening //p' "$tmp/m.out")
http=$(sed -n 's/^http //p' "$tmp/m.out")
export YARD_TOKEN
YARD_TOKEN=$(cat "$tmp/m/admin.token")
echo "submitting 10000 jobs"
"$bin/yard-submit-storm" --master "$addr" --ca "$tmp/m/ca.pem" --clients 8 --jobs 10000 --prefix list >/dev/null 2>"$tmp/storm.err"
tail -1 "$tmp/storm.err"

MASTER_PID=$master HTTP=$http CA="$tmp/m/ca.pem" ROUNDS=$rounds STORM="$bin/yard-submit-storm" ADDR=$addr \
  "$py" - <<'PY'
import http.client, json, os, ssl, statistics, subprocess, threading, time
host, port = os.environ["HTTP"].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["CA"])
tok = os.environ["YARD_TOKEN"]
pid = os.environ["MASTER_PID"]
H = {"Authorization": "Bearer " + tok}

def timed(path, n=50):
    c = http.client.HTTPSConnection(host, int(port), context=ctx)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", path, headers=H)
        body = c.getresponse().read()
        out.append((time.perf_counter() - t) * 1000)
    c.close()
    return statistics.median(out), body

base, _ = timed("/api/v1/whoami")
lst, body = timed("/api/v1/jobs?limit=50")
total = json.loads(body)["total"]
print(f"jobs in the master: {total}")
print(f"GET /api/v1/jobs?limit=50: median {lst:.1f} ms; GET /api/v1/whoami: median {base:.1f} ms; ratio {lst/base:.1f}")

def cpu_ms():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")

def rss_kib():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

def stream(stop, counts, i):
    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=60)
    c.request("GET", "/api/v1/events/stream", headers=dict(H, Accept="text/event-stream"))
    r = c.getresponse()
    while not stop.is_set():
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b"event: job"):
            counts[i] += 1
    c.close()

def round_(streams, tag):
    stop = threading.Event()
    counts = [0] * streams
    threads = [threading.Thread(target=stream, args=(stop, counts, i), daemon=True) for i in range(streams)]
    for t in threads: t.start()
    time.sleep(2)
    rss0, cpu0, t0 = rss_kib(), cpu_ms(), time.time()
    # 20 jobs/s for 30 s: 600 jobs, one client, paced.
    for k in range(30):
        subprocess.run([os.environ["STORM"], "--master", os.environ["ADDR"], "--ca", os.environ["CA"], "--clients", "1",
                        "--jobs", "20", "--prefix", f"{tag}-{k}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        time.sleep(max(0, t0 + k + 1 - time.time()))
    cpu = cpu_ms() - cpu0
    secs = time.time() - t0
    rss1 = rss_kib()
    stop.set()
    return cpu / secs / 10, rss1, rss1 - rss0, min(counts) if counts else 0

res = {0: [], 50: []}
for r in range(int(os.environ["ROUNDS"])):
    for n in (0, 50):
        cpu, rss, grow, got = round_(n, f"r{r}s{n}")
        res[n].append((cpu, rss))
        print(f"round {r+1}, {n:2d} streams: master CPU {cpu:.1f}% of a core, RSS {rss/1024:.1f} MiB"
              + (f", each stream got >= {got} job events" if n else ""))
c0 = statistics.median(x[0] for x in res[0]); c50 = statistics.median(x[0] for x in res[50])
m0 = statistics.median(x[1] for x in res[0]); m50 = statistics.median(x[1] for x in res[50])
print(f"median CPU: 0 streams {c0:.1f}%, 50 streams {c50:.1f}% (+{c50-c0:.1f} points, ratio {c50/max(c0,0.01):.2f})")
print(f"median RSS: 0 streams {m0/1024:.1f} MiB, 50 streams {m50/1024:.1f} MiB (+{(m50-m0)/1024:.1f} MiB)")
PY
