# The chaos suite's checks (tests/chaos/chaos.py) of the promises of docs/reliability.md: the
# monitor sampling while the faults run (3: no node over-committed, no port given twice), and
# after them 1: every acknowledged job final, 2: no two processes of one rank alive at once,
# 4: nothing left behind; plus the times to re-place the ranks of a lost node. HA mode
# (CHAOS_MASTERS=3) adds failover times, one leader per term, every master's store, and no
# replica fenced across a failover.
import json, os, re, sqlite3, statistics, threading, time

import cluster
from cluster import AGENT_CPU, AGENT_MEM, DRAIN_S, TAG, alive, ctr, fail, records, say, tmp, yardctl, yjson

# ---------------------------------------------------------------------------------------------
# The monitor: no node over-committed, no port given twice, sampled while the faults run

class Monitor:
    def __init__(self, workload):
        self.workload = workload
        self.stop = threading.Event()
        self.samples = 0
        self.port_samples = 0
        self.violations = []
        self.peak = {}  # node -> (cpu, mem)

    def cgroup_use(self, n):
        cpu = mem = 0.0
        base = "yard/%s-%d" % (TAG, n)
        groups = set()
        for ctl in ("cpu", "memory"):
            d = os.path.join("/sys/fs/cgroup", ctl, base)
            try:
                groups |= set(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))
            except OSError:
                pass
        for g in groups:
            cg = os.path.join("/sys/fs/cgroup/cpu", base, g)
            mg = os.path.join("/sys/fs/cgroup/memory", base, g)
            if not self.has_procs(cg) and not self.has_procs(mg):
                continue
            try:
                q = int(open(cg + "/cpu.cfs_quota_us").read())
                p = int(open(cg + "/cpu.cfs_period_us").read())
                if q > 0:
                    cpu += q / p
            except (OSError, ValueError):
                pass
            try:
                m = int(open(mg + "/memory.limit_in_bytes").read())
                if m < (1 << 50):
                    mem += m
            except (OSError, ValueError):
                pass
        return cpu, mem

    def has_procs(self, d):
        for root, _, files in os.walk(d):
            try:
                if "cgroup.procs" in files and open(os.path.join(root, "cgroup.procs")).read().strip():
                    return True
            except OSError:
                pass
        return False

    @staticmethod
    def live_ports(names):
        """(node, port) -> [who] of the live replicas of these jobs, one `job show` each."""
        live = {}
        for name in names:
            j = yjson("job", "show", name)
            if not j or j["job"]["state"] in ("Succeeded", "Failed", "Cancelled"):
                continue
            for t in j["tasks"]:
                for r in t["replicas"]:
                    if r["state"] in ("Placed", "Starting", "Running", "Stopping") and r.get("port"):
                        who = "%s/%s/%s/%d#%d %s" % (name, t["name"], r["role"], r["index"], r["attempt"], r["state"])
                        live.setdefault((r["node"], r["port"]), []).append(who)
        return live

    def check_ports(self):
        # The jobs are read one after another, so a port freed and given again between two
        # reads looks doubled: a collision counts only if a second read of both jobs shows it.
        for key, whos in self.live_ports(list(self.workload.acked)).items():
            if len(whos) < 2:
                continue
            again = self.live_ports(sorted(set(w.split("/")[0] for w in whos))).get(key, [])
            if len(again) >= 2:
                self.violations.append("port %d on %s given to %s at once" % (key[1], key[0], " and ".join(again)))
        self.port_samples += 1

    def run(self):
        last_ports = 0
        while not self.stop.is_set():
            for n in (1, 2, 3):
                cpu, mem = self.cgroup_use(n)
                pc, pm = self.peak.get(n, (0, 0))
                self.peak[n] = (max(pc, cpu), max(pm, mem))
                if cpu > AGENT_CPU + 1e-6 or mem > AGENT_MEM:
                    self.violations.append("node-%d over-committed: cpu %.2f of %.1f, memory %d MiB of %d MiB"
                                           % (n, cpu, AGENT_CPU, mem / 2**20, AGENT_MEM / 2**20))
            self.samples += 1
            if time.monotonic() - last_ports >= 1.0:
                last_ports = time.monotonic()
                try:
                    self.check_ports()
                except Exception as e:  # a yardctl answer mid-restart; the next sample retries
                    say("port sample: %r" % e)
            self.stop.wait(0.5)


# ---------------------------------------------------------------------------------------------
# The invariants

FINAL = ("Succeeded", "Failed", "Cancelled")


def check_final(workload):
    """1: every acknowledged job reaches a final state (or is gone after a delete), explained by an event."""
    deadline = time.monotonic() + DRAIN_S
    state = {}
    while time.monotonic() < deadline:
        open_jobs = []
        for name, w in workload.acked.items():
            j = yjson("job", "show", name)
            if j is None:
                r = yardctl("job", "show", name)
                gone = r.returncode != 0 and "does not exist" in r.stderr + r.stdout
                state[name] = "gone" if gone else "?"
                if not gone or not w["deleted"]:
                    open_jobs.append(name)
            else:
                state[name] = j["job"]["state"]
                if state[name] not in FINAL:
                    open_jobs.append(name)
        if not open_jobs:
            break
        time.sleep(1)
    took = DRAIN_S - (deadline - time.monotonic())
    say("drain: %d jobs final after %.0fs: %s" % (len(state), took, " ".join(
        "%s=%d" % (s, list(state.values()).count(s)) for s in sorted(set(state.values())))))
    for name, w in workload.acked.items():
        s = state.get(name)
        if s == "gone":
            if not w["deleted"]:
                fail("job %s was acknowledged and is gone though nobody deleted it" % name)
            continue
        if s not in FINAL:
            fail("job %s is %s %ds after the faults stopped: %s" % (name, s, DRAIN_S, yardctl("job", "show", name).stdout[-1500:]))
            continue
        ev = yjson("job", "events", name) or []
        job_ev = [e for e in ev if e["task"] == "" and e["replica"] == ""]
        if not job_ev or job_ev[-1]["type"] != s:  # the job's last event is its final state
            fail("job %s is %s but its last job event is %s: %s" % (
                name, s, job_ev[-1]["type"] if job_ev else "none", [(e["task"], e["type"], e["reason"]) for e in ev][-8:]))
    return state


def read_records():
    recs = []
    for fn in os.listdir(records):
        try:
            lines = open(os.path.join(records, fn)).read().split("\n")
        except OSError:
            continue
        head = lines[0].split()
        if len(head) != 9 or head[0] != "start":
            continue
        times = [int(l.split()[1]) for l in lines[1:] if l.startswith(("hb ", "end ")) and len(l.split()) >= 2]
        start_t = int(head[8])
        recs.append({"rank": tuple(head[1:5]), "attempt": head[5], "pid": head[6], "node": head[7],
                     "start": start_t, "last": max([start_t] + times), "ended": any(l.startswith("end ") for l in lines)})
    return recs


def overlaps(recs):
    """Pairs of processes of one rank alive at once, beyond the clocks' noise: (worst ms, pairs)."""
    by_rank = {}
    for r in recs:
        by_rank.setdefault(r["rank"], []).append(r)
    worst, bad = 0, []
    for rank, rs in by_rank.items():
        for i in range(len(rs)):
            for k in range(i + 1, len(rs)):
                a, b = rs[i], rs[k]
                ov = min(a["last"], b["last"]) - max(a["start"], b["start"])
                noise = 20 if a["pid"].startswith("c") or b["pid"].startswith("c") else 5
                if ov > noise:
                    bad.append((ov, rank, a, b))
                worst = max(worst, ov if ov > noise else 0)
    return worst, bad, by_rank


def selftest():
    """The overlap check can fail: two copies of a rank 100 ms together are caught, a gap is not."""
    a = {"rank": ("j", "t", "r", "0"), "attempt": "0", "pid": "1", "node": "n1", "start": 1000, "last": 2000}
    assert overlaps([a, dict(a, attempt="1", pid="2", start=1900, last=3000)])[0] == 100
    assert overlaps([a, dict(a, attempt="1", pid="2", start=2003, last=3000)])[0] == 0


def check_overlaps(recs):
    """2: no two processes of one rank alive at once."""
    worst, bad, by_rank = overlaps(recs)
    for ov, rank, a, b in sorted(bad, key=lambda x: x[0], reverse=True)[:10]:
        fail("rank %s ran twice for %d ms: attempt %s pid %s on %s [%d, %d] and attempt %s pid %s on %s [%d, %d]" % (
            "/".join(rank), ov, a["attempt"], a["pid"], a["node"], a["start"], a["last"],
            b["attempt"], b["pid"], b["node"], b["start"], b["last"]))
    if cluster.use_containers and not any(r["pid"].startswith("c") for r in recs):
        fail("no container rank left a record (containers were on)")
    say("invariant 2: %d processes (%d in containers) of %d ranks recorded; worst overlap %d ms%s" % (
        len(recs), sum(r["pid"].startswith("c") for r in recs), len(by_rank), worst, " (%d overlapping pairs)" % len(bad) if bad else ""))
    return worst


def replacement_times(recs, faults):
    """For each long agent kill or cut: the time from it to its ranks running elsewhere."""
    out = []
    for node, at, what in faults.kills:
        if not what:
            continue
        delays = []
        for r in recs:
            if r["node"] != "node-%d" % node or not (r["start"] <= at <= r["last"] + 150):
                continue
            later = [x["start"] for x in recs if x["rank"] == r["rank"] and x["start"] > at and x["node"] != r["node"]]
            if later:
                delays.append(min(later) - at)
        if delays:
            out.append((what, at, delays))
            say("%s of node-%d: %d ranks ran elsewhere after %d..%d ms (median %d)" % (
                what, node, len(delays), min(delays), max(delays), statistics.median(delays)))
    return out


def check_leftovers(recs):
    """4: nothing left once everything is stopped."""
    for name in [j["name"] for j in (yjson("job", "list") or [])]:
        yardctl("job", "delete", name)
    left = []
    for _ in range(60):
        left = []
        if (yjson("job", "list") or []) != []:
            left.append("jobs still listed")
        for r in recs:
            if not r["pid"].startswith("c") and alive(int(r["pid"])):
                with open("/proc/%s/cmdline" % r["pid"], "rb") as f:
                    if b"rank.py" in f.read():
                        left.append("replica process %s (%s) alive" % (r["pid"], "/".join(r["rank"])))
        for n in (1, 2, 3):
            for ctl in ("cpu", "memory", "pids"):
                d = "/sys/fs/cgroup/%s/yard/%s-%d" % (ctl, TAG, n)
                if os.path.isdir(d):
                    left += ["cgroup %s/%s" % (d, x) for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))]
            rd = os.path.join(tmp, "agent%d" % n, "replicas")
            for x in os.listdir(rd) if os.path.isdir(rd) else []:
                try:
                    spid = int(open(os.path.join(rd, x, "shim.pid")).read())
                    if alive(spid):
                        left.append("shim %d of replica %s on node-%d alive" % (spid, x, n))
                except (OSError, ValueError):
                    pass
        if cluster.use_containers:
            t = ctr("tasks", "ls", "-q").stdout.split()
            if t:
                left.append("containers running: %s" % " ".join(t))
        mounts = [l.split()[1] for l in open("/proc/mounts") if "/agent" in l.split()[1] and l.split()[1].startswith(tmp)]
        left += ["mount %s" % m for m in mounts]
        if not left:
            break
        time.sleep(1)
    for x in left[:20]:
        fail("left behind after every job was deleted: " + x)
    if not left:
        say("invariant 4: no processes, cgroups, shims, containers or mounts left")



# ---------------------------------------------------------------------------------------------
# HA mode (CHAOS_MASTERS=3, docs/ha.md): failover times, one leader per term, every master's
# store, and replicas fenced while only masters failed

class FenceWatch:
    """Timestamps each "(fenced" line of the agents' logs as it appears (the logs have no times)."""

    def __init__(self):
        self.stop = threading.Event()
        self.offsets = {n: 0 for n in (1, 2, 3)}
        self.seen = []  # (boottime ms, agent, line)

    def poll(self):
        for n in (1, 2, 3):
            try:
                with open(os.path.join(tmp, "agent%d.log" % n), "rb") as f:
                    f.seek(self.offsets[n])
                    data = f.read()
            except OSError:
                continue
            data = data[: data.rfind(b"\n") + 1]  # whole lines only
            self.offsets[n] += len(data)
            for line in data.decode(errors="replace").splitlines():
                self.seen.extend((cluster.now_ms(), n, line) for _ in range(line.count("(fenced")))

    def run(self):
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(0.25)
        self.poll()


def check_failovers(faults):
    """(a) every leader lost (kill -9, raft cut, full disk): writes accepted again within 5 s
    (leader_kill, leader_cut and master_disk_full fail each one over)."""
    f = faults.failovers
    if f:
        say("HA: %d leaders lost (kill -9, cut off, full disk); writes accepted again after %s ms (median %d, worst %d)" % (
            len(f), ", ".join("%d" % x for x in f), statistics.median(f), max(f)))
    else:
        say("HA: no leader kill measured")


def check_terms():
    """(b) no two masters led in one term: each logs `raft: leader in term N; raft on ...`."""
    terms = {}
    for name in cluster.MASTER_NAMES:
        try:
            text = open(os.path.join(tmp, name + ".log"), errors="replace").read()
        except OSError:
            continue
        for m in re.finditer(r"raft: leader in term (\d+); raft on ", text):
            terms.setdefault(int(m.group(1)), set()).add(name)
    for term, who in sorted(terms.items()):
        if len(who) > 1:
            fail("masters %s all led in term %d" % (" and ".join(sorted(who)), term))
    say("HA: leaders by term: %s" % (", ".join("%d %s" % (t, "+".join(sorted(w))) for t, w in sorted(terms.items())) or "none"))


def store_jobs(name):
    """name -> [deleted, ...] of the jobs table of master NAME's state.db, read-only."""
    path = os.path.join(cluster.master_dir(name), "state.db")
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=5)
    try:
        rows = db.execute("SELECT name, deleted FROM jobs").fetchall()
    finally:
        db.close()
    out = {}
    for n, d in rows:
        out.setdefault(n, []).append(d)
    return out


def check_stores(workload):
    """(c) every master's store holds every acknowledged job (a deleted one as deleted = 1, or live
    if its delete was never made), one live row per name, and the same rows as the others'."""
    problems = {}
    for _ in range(10):  # followers apply what the leader committed a moment later
        problems, held = {}, {}
        for name in cluster.MASTER_NAMES:
            try:
                jobs = store_jobs(name)
            except sqlite3.Error as e:
                problems[name] = ["cannot read its state.db: %s" % e]
                continue
            held[name] = {n: sorted(d) for n, d in jobs.items()}
            p = []
            for job, w in workload.acked.items():
                rows = jobs.get(job)
                if not rows:
                    p.append("acknowledged job %s is missing" % job)
                elif not w["deleted"] and 0 not in rows:
                    p.append("job %s is deleted there though nobody deleted it" % job)
            p += ["job name %s held by %d live rows" % (n, d.count(0)) for n, d in jobs.items() if d.count(0) > 1]
            if p:
                problems[name] = p
        if len(held) == len(cluster.MASTER_NAMES) and len(set(json.dumps(h, sort_keys=True) for h in held.values())) > 1:
            first = cluster.MASTER_NAMES[0]
            for name in cluster.MASTER_NAMES[1:]:
                diff = sorted(n for n in set(held[name]) | set(held[first]) if held[name].get(n) != held[first].get(n))
                if diff:
                    problems.setdefault(name, []).append("jobs that differ from %s's: %s" % (
                        first, ", ".join("%s %s/%s" % (n, held[first].get(n), held[name].get(n)) for n in diff[:10])))
        if not problems:
            break
        time.sleep(0.5)
    for name, p in sorted(problems.items()):
        for x in p[:10]:
            fail("HA: %s's store: %s" % (name, x))
    if not problems:
        say("HA: every master's store holds the %d acknowledged jobs, one live row per name, the same rows on all three" % len(workload.acked))


def check_fences(watch, faults):
    """(d) replicas fenced across a failover: each "(fenced" line of an agent's log is reported;
    one that appeared while only masters failed fails the run. Agent faults (kills, cuts, and
    containerd restarts) fence their own replicas: a line within one of them, or up to
    fence_timeout + fence_grace + 5 s after its end, is theirs."""
    slack = (cluster.FENCE_S + cluster.GRACE_S + 5) * 1000
    from faults import MASTER_KINDS
    masters = [(s, e) for k, _, s, e in faults.log if k in MASTER_KINDS]
    others = [(s, e) for k, _, s, e in faults.log if k not in MASTER_KINDS]
    bad = []
    for t, n, line in watch.seen:
        if any(s <= t <= e + slack for s, e in others):
            continue
        if any(s <= t <= e + slack for s, e in masters):
            bad.append((t, n, line))
    say("HA: %d fenced lines seen in the agents' logs, %d while only masters failed" % (len(watch.seen), len(bad)))
    for t, n, line in bad[:10]:
        fail("HA: agent %d fenced a replica across a master failover (at %d ms): %s" % (n, t, line.strip()[:300]))
