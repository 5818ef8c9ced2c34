#!/usr/bin/python3
"""systemd's readiness protocol, end to end: a real yard-master and yard-agent started the way
a Type=notify unit starts them (NOTIFY_SOCKET, WATCHDOG_USEC), against a fake systemd: a unix
datagram socket this test reads.

- READY=1 comes once, and only when the API answers: the moment it arrives, the master's client
  port accepts and `yardctl node list` gets an answer; the agent's own API port accepts.
- A master that cannot start (its data directory is in use) never says READY.
- WATCHDOG=1 comes every half of WATCHDOG_USEC.
- SIGTERM: STOPPING=1, then a clean exit.
- Three masters on raft (docs/ha.md, "Stopping a master"): a follower says READY=1 once it
  follows (a joiner once it is a voter) and pings the watchdog while it waits for the lead; a
  leader that steps down (SIGSTOP past the election timeout) runs itself again and the new
  image still notifies and pings; SIGTERM of the leader hands its lead on, of a follower stops
  it, each with STOPPING=1 and exit 0.

usage: notify_test.py BIN_DIR
"""
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
failures = []


def fail(why):
    print("FAIL: " + why, flush=True)
    failures.append(why)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeSystemd:
    """The notification socket of one unit."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)

    def next(self, timeout):
        """The next message as a dict of its NAME=value lines, or None after `timeout` s."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        data = self.sock.recv(4096).decode()
        return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)

    def collect(self, seconds):
        out, end = [], time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            m = self.next(left)
            if m is not None:
                out.append(m)
        return out


class PumpedSystemd(FakeSystemd):
    """A notification socket read all the time, as systemd reads it: a master's messages never
    wait in (or are dropped from) the kernel's short queue while the test looks elsewhere."""

    def __init__(self, path):
        super().__init__(path)
        import queue
        import threading
        self.queue = queue.Queue()
        self.stopped = False
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        while not self.stopped:
            ready, _, _ = select.select([self.sock], [], [], 0.1)
            if ready:
                data = self.sock.recv(4096).decode()
                self.queue.put(dict(line.split("=", 1) for line in data.splitlines() if "=" in line))

    def next(self, timeout):
        import queue
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self):
        """Every message so far."""
        out = []
        while (m := self.next(0)) is not None:
            out.append(m)
        return out


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def metrics_off(binary):
    """`--metrics-listen ""` where the daemon has /metrics: its default port may be taken here."""
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    return ["--metrics-listen", ""] if "--metrics-listen" in help_text else []


def start(argv, systemd, log, watchdog_usec=None):
    env = dict(os.environ, NOTIFY_SOCKET=systemd.path)
    env.pop("WATCHDOG_USEC", None)
    env.pop("WATCHDOG_PID", None)
    if watchdog_usec:
        env["WATCHDOG_USEC"] = str(watchdog_usec)
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))


def wait_ready(name, systemd, proc, on_ready):
    """READY=1 within 20 s; `on_ready` runs at once when it arrives (the API must answer then)."""
    end = time.monotonic() + 20
    while time.monotonic() < end:
        m = systemd.next(0.2)
        if m is None:
            if proc.poll() is not None:
                fail(f"{name} exited {proc.returncode} before READY")
                return None
            continue
        if m.get("READY") == "1":
            on_ready()
            return m
        if "WATCHDOG" in m:
            fail(f"{name}: WATCHDOG=1 before READY=1")
    fail(f"{name}: no READY=1 within 20 s")
    return None


def check_watchdog(name, systemd):
    msgs = systemd.collect(2.2)  # WATCHDOG_USEC 1 s: a ping every 0.5 s
    pings = sum(1 for m in msgs if m.get("WATCHDOG") == "1")
    if pings < 3:
        fail(f"{name}: {pings} WATCHDOG=1 in 2.2 s with WATCHDOG_USEC=1000000, want >= 3")
    if any(m.get("READY") for m in msgs):
        fail(f"{name}: READY=1 sent more than once")
    print(f"{name}: {pings} watchdog pings in 2.2 s", flush=True)


def stop(name, systemd, proc):
    proc.send_signal(signal.SIGTERM)
    msgs = []
    end = time.monotonic() + 10
    while not any(m.get("STOPPING") == "1" for m in msgs) and time.monotonic() < end:
        m = systemd.next(0.2)
        if m is not None:
            msgs.append(m)
    if not any(m.get("STOPPING") == "1" for m in msgs):
        fail(f"{name}: no STOPPING=1 after SIGTERM")
    try:
        rc = proc.wait(15)
        if rc != 0:
            fail(f"{name} exited {rc} after SIGTERM")
    except subprocess.TimeoutExpired:
        fail(f"{name} still running 15 s after SIGTERM")


def leader_of(clients, env):
    """The index in `clients` of the master that leads, from yardctl cluster status; None if none."""
    try:
        r = subprocess.run([BIN + "/yardctl", "--master", ",".join(clients), "cluster", "status", "-o", "json"],
                           env=env, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:  # a redirect to the stopped leader, say
        return None
    if r.returncode != 0:
        return None
    import json
    for m in json.loads(r.stdout)["members"]:
        if m["role"] == "leader" and m["clientAddress"] in clients:
            return clients.index(m["clientAddress"])
    return None


def wait_for(pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = pred()
        if got is not None and got is not False:
            return got
        time.sleep(0.1)
    return None


def log_has(path, text):
    with open(path) as f:
        return text in f.read()


def ha_checks(tmp, procs):
    n = 3
    client = [free_port() for _ in range(n)]
    agents = [free_port() for _ in range(n)]
    raft = [free_port() for _ in range(n)]
    notify = [PumpedSystemd(f"{tmp}/ha{i}.notify") for i in range(n)]
    logs = [f"{tmp}/ha{i}.err" for i in range(n)]
    addrs = [f"127.0.0.1:{c}" for c in client]

    def argv(i, extra):
        return [BIN + "/yard-master", "--name", f"ha{i}", "--data-dir", f"{tmp}/ha{i}", "--listen", addrs[i],
                "--agent-listen", f"127.0.0.1:{agents[i]}", "--raft-listen", f"127.0.0.1:{raft[i]}",
                "--join-token", "notify-token"] + metrics_off(BIN + "/yard-master") + extra

    masters = [None] * n
    masters[0] = start(argv(0, []), notify[0], logs[0], watchdog_usec=1000000)
    procs.append(masters[0])
    m = wait_ready("ha0", notify[0], masters[0], lambda: None)
    if m is None:
        return
    # It follows until it has elected itself, then says it leads (a new status, not READY again).
    end = time.monotonic() + 10
    while "(leading)" not in m.get("STATUS", "") and time.monotonic() < end:
        m = notify[0].next(0.2) or m
        if m.get("READY") and "(leading)" in m.get("STATUS", ""):
            fail(f"ha0 said READY=1 twice: {m}")
    if "(leading)" not in m.get("STATUS", ""):
        fail(f"the first master never said it leads: {m}")
    fp = wait_for(lambda: next((w for w in open(logs[0]).read().split() if w.startswith("sha256:")), None), 5)
    for i in (1, 2):
        masters[i] = start(argv(i, ["--join", f"127.0.0.1:{raft[0]}", "--ca-fingerprint", fp]), notify[i], logs[i],
                           watchdog_usec=1000000)
        procs.append(masters[i])
        voter = {}
        m = wait_ready(f"ha{i}", notify[i], masters[i],
                       lambda: voter.update(yes=log_has(logs[i], "this master is a voter")))
        if m is None:
            return
        if not voter["yes"]:
            fail(f"ha{i} said READY=1 before it was a voter")
        if "following the leader" not in m.get("STATUS", ""):
            fail(f"ha{i}: a follower's READY STATUS does not say it follows: {m}")
        print(f"ha{i}: READY with", m.get("STATUS"), flush=True)
    notify[1].drain()
    check_watchdog("ha1 (following)", notify[1])

    token = open(f"{tmp}/ha0/admin.token").read().strip()
    env = dict(os.environ, YARD_CA=f"{tmp}/ha0/ca.pem", YARD_TOKEN=token)
    env.pop("YARD_MASTER", None)

    # The leader stopped past the election timeout steps down when it wakes and runs itself
    # again: the new image (same pid) still says READY and pings the watchdog.
    notify[0].drain()  # what the leader said so far
    masters[0].send_signal(signal.SIGSTOP)
    other = wait_for(lambda: leader_of(addrs[1:], env), 30)
    masters[0].send_signal(signal.SIGCONT)
    if other is None:
        fail("no other master led while the leader was stopped")
        return
    if not wait_for(lambda: log_has(logs[0], "running again as a follower"), 15):
        fail("ha0 did not step down after SIGCONT")
        return
    end, again = time.monotonic() + 10, None
    while again is None and time.monotonic() < end:
        msg = notify[0].next(0.2)
        if msg is not None and "following the leader" in msg.get("STATUS", ""):
            again = msg
    if again is None:
        fail("ha0, run again as a follower, did not notify systemd")
    else:
        print("ha0 (run again): READY with", again.get("STATUS"), flush=True)
        check_watchdog("ha0 (run again, following)", notify[0])

    # SIGTERM of the leader: STOPPING=1, the lead handed on, exit 0.
    lead = wait_for(lambda: leader_of(addrs, env), 30)
    if lead is None:
        fail("no leader before the SIGTERM")
        return
    stop(f"ha{lead} (leading)", notify[lead], masters[lead])
    if not log_has(logs[lead], "raft: handed the lead to master"):
        fail(f"ha{lead} stopped without handing its lead on")
    rest = [i for i in range(n) if i != lead]
    new = wait_for(lambda: leader_of([addrs[i] for i in rest], env), 30)
    if new is None:
        fail("no leader after the leader's SIGTERM")
        return
    follower = rest[1 - new]
    stop(f"ha{follower} (following)", notify[follower], masters[follower])
    if not log_has(logs[follower], "while following the leader"):
        fail(f"ha{follower} did not say it stopped while following")
    # The last one leads a cluster with no majority left; it stops in order all the same.
    stop(f"ha{rest[new]} (alone)", notify[rest[new]], masters[rest[new]])


def main():
    tmp = tempfile.mkdtemp(prefix="yard-notify-")
    procs = []
    try:
        client, agents, agent_api = free_port(), free_port(), free_port()
        master_systemd = FakeSystemd(tmp + "/master.notify")
        agent_systemd = FakeSystemd(tmp + "/agent.notify")
        master_argv = [BIN + "/yard-master", "--data-dir", tmp + "/master", "--listen", f"127.0.0.1:{client}",
                       "--agent-listen", f"127.0.0.1:{agents}", "--join-token", "notify-token"] + metrics_off(BIN + "/yard-master")
        master = start(master_argv, master_systemd, tmp + "/master.err", watchdog_usec=1000000)
        procs.append(master)

        answered = {}

        def master_ready():
            answered["port"] = accepts(client)
            token = open(tmp + "/master/admin.token").read().strip()  # made before READY
            env = dict(os.environ, YARD_MASTER=f"127.0.0.1:{client}", YARD_CA=tmp + "/master/ca.pem", YARD_TOKEN=token)
            r = subprocess.run([BIN + "/yardctl", "node", "list"], env=env, capture_output=True, text=True, timeout=10)
            answered["yardctl"] = (r.returncode, r.stdout + r.stderr)

        m = wait_ready("yard-master", master_systemd, master, master_ready)
        if m is not None:
            if not answered["port"]:
                fail("yard-master said READY=1 before its client port accepted")
            if answered["yardctl"][0] != 0:
                fail(f"yard-master said READY=1 but yardctl node list failed: {answered['yardctl']}")
            if f"127.0.0.1:{client}" not in m.get("STATUS", ""):
                fail(f"yard-master READY STATUS does not name the client API: {m}")
            print("yard-master: READY with", m.get("STATUS"), flush=True)
        check_watchdog("yard-master", master_systemd)

        # A second master on the same data directory fails to start: it must never say READY.
        second_systemd = FakeSystemd(tmp + "/second.notify")
        second = start(master_argv[:3] + ["--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0"] +
                       metrics_off(BIN + "/yard-master"),
                       second_systemd, tmp + "/second.err", watchdog_usec=1000000)
        procs.append(second)
        try:
            rc = second.wait(15)
        except subprocess.TimeoutExpired:
            rc = None
            fail("a second master on a data directory in use did not exit")
        if rc == 0:
            fail("a second master on a data directory in use exited 0")
        left = second_systemd.collect(0.1)
        if any(m.get("READY") for m in left):
            fail(f"a master that failed to start (exit {rc}) said READY=1: {left}")

        with open(tmp + "/join-token", "w") as f:
            f.write("notify-token\n")
        agent_argv = [BIN + "/yard-agent", "--master", f"127.0.0.1:{agents}", "--token-file", tmp + "/join-token",
                      "--ca", tmp + "/master/ca.pem",
                      "--name", "notify-node", "--address", "127.0.0.1", "--api-port", str(agent_api),
                      "--data-dir", tmp + "/agent", "--port-range", "32100-32199",
                      "--cgroup-parent", f"yard/notify{os.getpid()}"] + metrics_off(BIN + "/yard-agent")
        agent = start(agent_argv, agent_systemd, tmp + "/agent.err", watchdog_usec=1000000)
        procs.append(agent)
        agent_answered = {}
        m = wait_ready("yard-agent", agent_systemd, agent, lambda: agent_answered.update(port=accepts(agent_api)))
        if m is not None:
            if not agent_answered["port"]:
                fail("yard-agent said READY=1 before its API port accepted")
            if "node notify-node" not in m.get("STATUS", ""):
                fail(f"yard-agent READY STATUS does not name the node: {m}")
            print("yard-agent: READY with", m.get("STATUS"), flush=True)
        check_watchdog("yard-agent", agent_systemd)

        stop("yard-agent", agent_systemd, agent)
        stop("yard-master", master_systemd, master)

        ha_checks(tmp, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures:
            for log in ("master.err", "second.err", "agent.err", "ha0.err", "ha1.err", "ha2.err"):
                path = os.path.join(tmp, log)
                if os.path.exists(path):
                    print(f"=== {log}\n" + "".join(open(path).readlines()[-20:]))
        subprocess.run(["rm", "-rf", tmp])
        # The agent removes its parent cgroup when it exits cleanly; not when it was killed.
        for mount in os.listdir("/sys/fs/cgroup"):
            group = f"/sys/fs/cgroup/{mount}/yard/notify{os.getpid()}"
            if os.path.isdir(group):
                subprocess.run(["find", group, "-depth", "-type", "d", "-exec", "rmdir", "{}", "+"],
                               stderr=subprocess.DEVNULL)
    if failures:
        sys.exit(1)
    print("notify: all checks passed")


main()
