"""The measuring half of tests/bench/http_bench.sh (PHASE=list or streams)."""
import http.client, json, os, ssl, statistics, subprocess, threading, time

host, port = os.environ["HTTP"].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["CA"])
H = {"Authorization": "Bearer " + os.environ["YARD_TOKEN"]}
pid = os.environ["MASTER_PID"]


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


def cpu_ms():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def rss_kib():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])


def stream(stop, counts, i):
    c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=120)
    c.request("GET", "/api/v1/events/stream", headers=dict(H, Accept="text/event-stream"))
    r = c.getresponse()
    while not stop.is_set():
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b"event: job"):
            counts[i] += 1
    c.close()


def one_round(streams, tag):
    stop = threading.Event()
    counts = [0] * streams
    threads = [threading.Thread(target=stream, args=(stop, counts, i), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    time.sleep(2)
    cpu0, t0 = cpu_ms(), time.time()
    for k in range(20):  # 10 jobs/s for 20 s, one client, paced
        subprocess.run([os.environ["STORM"], "--master", os.environ["ADDR"], "--ca", os.environ["CA"], "--clients", "1",
                        "--jobs", "10", "--prefix", f"{tag}-{k}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        time.sleep(max(0, t0 + k + 1 - time.time()))
    cpu = (cpu_ms() - cpu0) / (time.time() - t0) / 10  # percent of one core
    rss = rss_kib()
    time.sleep(1)
    stop.set()
    return cpu, rss, min(counts) if counts else 0


if os.environ["PHASE"] == "list":
    base, _ = timed("/api/v1/whoami")
    lst, body = timed("/api/v1/jobs?limit=50")
    deep, _ = timed("/api/v1/jobs?limit=50&cursor=9900", 20)
    print(f"jobs in the master: {json.loads(body)['total']}")
    print(f"GET /api/v1/jobs?limit=50: median {lst:.1f} ms (last page {deep:.1f} ms); "
          f"GET /api/v1/whoami: median {base:.1f} ms; ratio {lst / base:.1f}")
else:
    res = {0: [], 50: []}
    order = [0, 50, 50, 0] * int(os.environ["CYCLES"])
    for r, n in enumerate(order):
        cpu, rss, got = one_round(n, f"r{r}")
        res[n].append((cpu, rss))
        print(f"round {r + 1}, {n:2d} streams: master CPU {cpu:.1f}% of a core, RSS {rss / 1024:.1f} MiB"
              + (f", every stream got >= {got} job events" if n else ""), flush=True)
    c0 = statistics.median(x[0] for x in res[0])
    c50 = statistics.median(x[0] for x in res[50])
    m0 = statistics.median(x[1] for x in res[0])
    m50 = statistics.median(x[1] for x in res[50])
    print(f"median CPU: 0 streams {c0:.1f}%, 50 streams {c50:.1f}% (+{c50 - c0:.1f} points, ratio {c50 / max(c0, 0.01):.2f})")
    print(f"median RSS: 0 streams {m0 / 1024:.1f} MiB, 50 streams {m50 / 1024:.1f} MiB (+{(m50 - m0) / 1024:.1f} MiB)")
