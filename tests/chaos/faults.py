# The chaos suite's faults (tests/chaos/chaos.py): kill -9 of the master and of agents, cuts of
# agent 3's link, a containerd restart, the master's disk full and a connection flood, drawn by a
# seeded RNG; whatever died on its own is restarted and noted as a finding.
import os, time, traceback

import cluster
from cluster import (AGENT_API, CLIENT, HERE, LONG_S, MODE, PY, SHORT_S, fail, findings, kill9, link, mdata, now_ms,
                     procs, rss, say, start, start_agent, start_containerd, start_master, tail, yardctl)

class Faults:
    KINDS = ["master_kill", "agent_kill_short", "agent_kill_long", "link_cut_short", "link_cut_long",
             "containerd_restart", "disk_full", "flood"]

    def __init__(self, rng):
        self.rng = rng
        self.log = []  # (kind, detail, start boottime ms, end boottime ms)
        self.kills = []  # (node, boottime ms of the kill or cut, what)
        self.flood_numbers = []

    def ensure_up(self, why):
        """Restart whatever died on its own (a supervisor's job), and say so."""
        if procs["master"].poll() is not None:
            findings.append("the master exited with %s during %s: %s" % (procs["master"].returncode, why, tail("master", 4).strip()))
            say("master exited (%s) during %s; restarting it" % (procs["master"].returncode, why))
            start_master()
        for n in (1, 2, 3):
            p = procs["agent%d" % n]
            if p.poll() is not None:
                findings.append("agent %d exited with %s during %s: %s" % (n, p.returncode, why, tail("agent%d" % n, 4).strip()))
                start_agent(n)

    def master_kill(self):
        pause = self.rng.uniform(0.3, 2.5) if MODE == "short" or self.rng.random() < 0.7 else self.rng.uniform(5, 8)
        kill9("master")
        time.sleep(pause)
        start_master()
        return "down %.1fs" % pause

    def agent_kill(self, long_pause):
        # Any agent, for any pause: a dead agent's containers are fenced by their yard-shim
        # guard (docs/shim.md), its host replicas by their yard-shim.
        n = self.rng.randint(1, 3)
        pause = self.rng.uniform(*LONG_S) if long_pause else self.rng.uniform(*SHORT_S)
        self.kills.append((n, now_ms(), "kill -9" if long_pause else None))
        kill9("agent%d" % n)
        time.sleep(pause)
        start_agent(n)
        return "agent %d down %.1fs" % (n, pause)

    def agent_kill_short(self):
        return self.agent_kill(False)

    def agent_kill_long(self):
        return self.agent_kill(True)

    def link_cut(self, long_cut):
        pause = self.rng.uniform(*LONG_S) if long_cut else self.rng.uniform(*SHORT_S)
        self.kills.append((3, now_ms(), "link cut" if long_cut else None))
        link(False)
        try:
            time.sleep(pause)
        finally:
            link(True)
        return "agent 3's link down %.1fs" % pause

    def link_cut_short(self):
        return self.link_cut(False)

    def link_cut_long(self):
        return self.link_cut(True)

    def containerd_restart(self):
        if not cluster.use_containers:
            return None
        p = procs["containerd"]
        p.terminate()
        p.wait()
        time.sleep(self.rng.uniform(0.5, 2))
        if not start_containerd():
            fail("containerd did not come back: " + tail("containerd", 5))
        return "containerd restarted"

    def disk_full(self):
        free = os.statvfs(mdata)
        path = os.path.join(mdata, "fill")
        with open(path, "wb") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, free.f_bavail * free.f_frsize)
            except OSError:
                pass
        hold = self.rng.uniform(1.5, 3.5)
        time.sleep(hold)
        left = os.statvfs(mdata).f_bavail * free.f_frsize
        os.unlink(path)
        return "master's data dir full (%d KiB left) for %.1fs" % (left // 1024, hold)

    def flood(self):
        secs = self.rng.uniform(6, 12) if MODE == "short" else self.rng.uniform(10, 30)
        pid = procs["master"].pid
        before = rss(pid)
        p = start("flood", [PY, os.path.join(HERE, "flood.py"), str(secs), str(self.rng.random()), CLIENT, AGENT_API])
        time.sleep(secs * 0.6)
        under = rss(pid)
        t = time.monotonic()
        ok = yardctl("queue", "list", timeout=10).returncode == 0
        answered = time.monotonic() - t
        p.wait()
        out = tail("flood", 2).strip().replace("\n", "; ")
        self.flood_numbers.append((before, under, answered))
        if not ok:
            fail("the master's client API did not answer during the flood")
        return "flood %.0fs: master RSS %.1f -> %.1f MiB, queue list %s in %d ms; %s" % (
            secs, before / 1024, under / 1024, "answered" if ok else "FAILED", answered * 1000, out)

    def run(self, until):
        plan = list(self.KINDS)
        self.rng.shuffle(plan)  # every kind once first, then at random
        while time.monotonic() < until:
            kind = plan.pop(0) if plan else self.rng.choice(self.KINDS)
            start_ms = now_ms()
            try:
                detail = getattr(self, kind)()
            except Exception as e:
                fail("fault %s: %s" % (kind, traceback.format_exc()))
                detail = repr(e)
            if detail is None:
                continue
            self.log.append((kind, detail, start_ms, now_ms()))
            say("fault %-18s %s" % (kind, detail))
            time.sleep(0.5)
            self.ensure_up(kind)
            time.sleep(self.rng.uniform(2, 6))
