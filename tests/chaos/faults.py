# The chaos suite's faults (tests/chaos/chaos.py): kill -9 of the master and of agents, cuts of
# agent 3's link, a containerd restart, the master's disk full and a connection flood, drawn by a
# seeded RNG; whatever died on its own is restarted and noted as a finding. In HA mode
# (CHAOS_MASTERS=3) the master faults are the leader's kill -9, a follower's kill -9, the
# leader stopped past the election timeout (SIGSTOP), the leader cut off from the other masters
# (its raft traffic dropped), one master's disk full and a follower's data directory lost
# (removed, wiped, joined again) instead.
import os, shutil, signal, time, traceback

import cluster
from cluster import (AGENT_API, CLIENT, HA, HERE, LONG_S, MASTER_NAMES, MODE, PY, SHORT_S, disk_of, fail, findings, kill9,
                     leader, link, log_size, master_dir, mdata, now_ms, procs, raft_cut, rss, say, start, start_agent,
                     start_containerd, start_master, start_member, tail, wait_log, yardctl)

MASTER_KINDS = ("master_kill", "leader_kill", "follower_kill", "leader_stop", "leader_cut", "master_disk_full",
                "follower_wipe", "disk_full", "flood")
LEADER_STOP_S = 3  # > the election timeout (1 s): the others elect a leader meanwhile
CUT_S = (3, 5)  # the leader's raft cut: past its step-down and the others' election


class Faults:
    KINDS = ["master_kill", "agent_kill_short", "agent_kill_long", "link_cut_short", "link_cut_long",
             "containerd_restart", "disk_full", "flood"]
    if HA:
        # master_kill, disk_full and flood target the single master and are left out (a full
        # disk with three masters is master_disk_full). The leader's kill is listed twice (two
        # in the first round, twice as likely later) for more than one failover time per run.
        KINDS = ["leader_kill", "leader_kill", "follower_kill", "leader_stop", "leader_cut", "master_disk_full",
                 "follower_wipe", "agent_kill_short", "agent_kill_long", "link_cut_short", "link_cut_long",
                 "containerd_restart"]

    def __init__(self, rng):
        self.rng = rng
        self.log = []  # (kind, detail, start boottime ms, end boottime ms)
        self.kills = []  # (node, boottime ms of the kill or cut, what)
        self.flood_numbers = []
        self.failovers = []  # HA: ms from each leader lost (kill -9, raft cut, full disk) to the next write accepted
        self.probes = 0

    def ensure_up(self, why):
        """Restart whatever died on its own (a supervisor's job), and say so."""
        for name in MASTER_NAMES if HA else ():
            p = procs[name]
            if p.poll() is not None:
                findings.append("master %s exited with %s during %s: %s" % (name, p.returncode, why, tail(name, 4).strip()))
                say("master %s exited (%s) during %s; restarting it" % (name, p.returncode, why))
                start_member(name)
        if not HA and procs["master"].poll() is not None:
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

    # HA mode (docs/ha.md): the masters m1, m2, m3 on Raft.

    def write_accepted(self, secs=20):
        """Creates a queue of a new name until it is accepted (every 50 ms): the ms it took, or None."""
        t = time.monotonic()
        self.probes += 1
        name = "failover-%d" % self.probes
        while time.monotonic() - t < secs:
            r = yardctl("queue", "create", name, "--cpu", "1", "--memory", "1Gi", timeout=15)
            # "already exists": an earlier try was made though its answer was lost with its connection
            if r.returncode == 0 or "already exists" in r.stderr + r.stdout:
                return (time.monotonic() - t) * 1000
            time.sleep(0.05)
        return None

    def restart_member(self, name, why):
        """Starts NAME again with its command line; it must come back as a follower."""
        since = log_size(name)
        start_member(name)
        if not wait_log(name, ("following the leader", "raft: leader in term"), 30, since):
            fail("%s did not come back as a follower after %s: %s" % (name, why, tail(name, 5).strip()))
            return False
        return True

    def leader_kill(self):
        old = leader()
        if not old:
            fail("leader_kill: no master leads: " + yardctl("cluster", "status").stderr.strip())
            return "no leader"
        kill9(old)
        ms = self.write_accepted()
        if ms is None:
            fail("leader_kill: no write was accepted within 20 s of %s's kill -9" % old)
        else:
            self.failovers.append(ms)
            if ms > 5000:
                fail("leader_kill: writes accepted again only %d ms after %s's kill -9 (more than 5 s)" % (ms, old))
        new = leader(5)
        self.restart_member(old, "its kill -9")
        return "leader %s killed; writes accepted again after %s ms; %s leads" % (
            old, "%d" % ms if ms is not None else "NO", new or "nobody")

    def follower_kill(self):
        ldr = leader()
        if not ldr:
            fail("follower_kill: no master leads: " + yardctl("cluster", "status").stderr.strip())
            return "no leader"
        name = self.rng.choice([m for m in MASTER_NAMES if m != ldr])
        pause = self.rng.uniform(0.5, 3)
        kill9(name)
        time.sleep(pause)
        self.restart_member(name, "its kill -9")
        return "follower %s down %.1fs" % (name, pause)

    def follower_wipe(self):
        """A follower's host loses its disk: kill -9, `cluster remove`, its data directory
        deleted, started again with its join flags. It must join as a voter, and be caught up on
        the store (a snapshot) and on the archived logs the leader holds (server/log_sync.h)."""
        ldr = leader()
        if not ldr:
            fail("follower_wipe: no master leads: " + yardctl("cluster", "status").stderr.strip())
            return "no leader"
        # m1's directory holds the CA file yardctl is given; the others joined (--join) at start.
        name = self.rng.choice([m for m in MASTER_NAMES if m not in (ldr, MASTER_NAMES[0])])
        logs = lambda m: {os.path.relpath(os.path.join(d, f), master_dir(m))
                          for d, _, fs in os.walk(os.path.join(master_dir(m), "logs")) for f in fs if f.endswith(".log")}
        kill9(name)
        r = yardctl("cluster", "remove", name)
        if r.returncode != 0:
            fail("follower_wipe: cluster remove %s: %s" % (name, (r.stderr + r.stdout).strip()))
            self.restart_member(name, "a failed remove")
            return "remove failed"
        held = logs(ldr)
        shutil.rmtree(master_dir(name))
        since = log_size(name)
        start_member(name)
        if not wait_log(name, "this master is a voter", 60, since):
            fail("follower_wipe: %s did not join again from an empty data directory: %s" % (name, tail(name, 5).strip()))
            return "no rejoin"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not held <= logs(name):
            time.sleep(0.2)
        missing = held - logs(name)
        if missing:
            fail("follower_wipe: %s lacks %d of the %d archived logs the leader held: %s" % (
                name, len(missing), len(held), sorted(missing)[:3]))
        return "follower %s wiped and joined again; %d archived logs copied to it" % (name, len(held) - len(missing))

    def leader_stop(self):
        name = leader()
        if not name:
            fail("leader_stop: no master leads: " + yardctl("cluster", "status").stderr.strip())
            return "no leader"
        since = log_size(name)
        p = procs[name]
        os.kill(p.pid, signal.SIGSTOP)
        try:
            time.sleep(LEADER_STOP_S)
        finally:
            os.kill(p.pid, signal.SIGCONT)
        # It sees the higher term and runs itself again (execve: the same pid) as a follower.
        if not wait_log(name, "running again as a follower", 20, since):
            fail("leader_stop: %s did not step down after %d s stopped: %s" % (name, LEADER_STOP_S, tail(name, 5).strip()))
        elif not wait_log(name, ("following the leader", "raft: leader in term"), 20, since):
            fail("leader_stop: %s stepped down but does not follow: %s" % (name, tail(name, 5).strip()))
        return "leader %s stopped %ds; %s leads" % (name, LEADER_STOP_S, leader(5) or "nobody")

    def leader_cut(self):
        """The leader cut off from the other masters (its raft traffic dropped both ways; clients
        and agents still reach it). It must step down, the others must accept writes within 5 s,
        and once the cut ends it must follow. Anything it acknowledged while cut off would be
        missing from the others' stores (check_stores)."""
        if not cluster.raft_cuts:
            return None
        name = leader()
        if not name:
            fail("leader_cut: no master leads: " + yardctl("cluster", "status").stderr.strip())
            return "no leader"
        since = log_size(name)
        hold = self.rng.uniform(*CUT_S)
        t = time.monotonic()
        raft_cut(name, True)
        try:
            ms = self.write_accepted()
            if ms is None:
                fail("leader_cut: no write was accepted within 20 s of cutting %s off" % name)
            elif ms > 5000:
                fail("leader_cut: writes accepted again only %d ms after %s was cut off (more than 5 s)" % (ms, name))
            if ms is not None:
                self.failovers.append(ms)
            if not wait_log(name, "running again as a follower", 10, since):
                fail("leader_cut: %s did not step down while cut off: %s" % (name, tail(name, 5).strip()))
            new = leader(5)
            if new == name:
                fail("leader_cut: %s still leads while cut off" % name)
            time.sleep(max(0.0, hold - (time.monotonic() - t)))
        finally:
            raft_cut(name, False)
        since = log_size(name)
        if not wait_log(name, ("following the leader", "raft: leader in term"), 20, since):
            fail("leader_cut: %s does not follow once the cut ended: %s" % (name, tail(name, 5).strip()))
        return "leader %s cut off %.1fs; writes accepted again after %s ms; %s led meanwhile" % (
            name, hold, "%d" % ms if ms is not None else "NO", new or "nobody")

    def master_disk_full(self):
        """One master's disk (its own tmpfs) filled for a while, under the workload. A master
        whose store cannot commit stops, naming the disk (docs/ha.md, "Failure cases"); if it led,
        the others must accept writes within 5 s of its stop. Given room again it is started
        again and must follow."""
        name = self.rng.choice(MASTER_NAMES)
        was_leader = leader(5) == name
        since = log_size(name)
        path = os.path.join(disk_of(name), "fill")
        with open(path, "wb") as f:
            free = os.statvfs(disk_of(name))
            try:
                os.posix_fallocate(f.fileno(), 0, free.f_bavail * free.f_frsize)
            except OSError:
                pass
        ms = None
        hold = self.rng.uniform(2, 4)
        try:
            deadline = time.monotonic() + hold
            while time.monotonic() < deadline and procs[name].poll() is None:
                time.sleep(0.05)
            stopped = procs[name].poll() is not None
            if stopped and was_leader:  # a leader lost as to a kill: writes again within 5 s
                ms = self.write_accepted()
                if ms is None or ms > 5000:
                    fail("master_disk_full: writes accepted again only after %s ms once the leader %s stopped on "
                         "its full disk" % ("%d" % ms if ms is not None else "more than 20000", name))
                else:
                    self.failovers.append(ms)
            time.sleep(max(0.0, deadline - time.monotonic()))
        finally:
            os.unlink(path)
        if stopped:
            # A follower's store, or a leader's (the entry a majority holds), names its disk.
            if not wait_log(name, ("disk is full", "is held by a majority but not by"), 1, since):
                fail("master_disk_full: %s stopped without naming its full disk: %s" % (name, tail(name, 5).strip()))
            self.restart_member(name, "its full disk")
        return "%s %s's disk full %.1fs: %s%s" % (
            "leader" if was_leader else "follower", name, hold, "stopped, started again" if stopped else "went on",
            "; writes accepted again %d ms after it stopped" % ms if ms is not None else "")

    def run(self, until):
        plan = list(self.KINDS)
        self.rng.shuffle(plan)  # every kind once first, then at random
        # HA mode finishes the first round even past `until`: each kind, master faults included, at least once.
        while time.monotonic() < until or (HA and plan):
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
