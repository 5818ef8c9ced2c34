#!/usr/bin/python3
"""systemd's readiness protocol, end to end: a real yard-master and yard-agent started the way
a Type=notify unit starts them (NOTIFY_SOCKET, WATCHDOG_USEC), against a fake systemd: a unix
datagram socket this test reads.

- READY=1 comes once, and only when the API answers: the moment it arrives, the master's client
  port accepts and `yardctl node list` gets an answer; the agent's own API port accepts.
- A master that cannot start (its data directory is in use) never says READY.
- WATCHDOG=1 comes every half of WATCHDOG_USEC.
- SIGTERM: STOPPING=1, then a clean exit.

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
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures:
            for log in ("master.err", "second.err", "agent.err"):
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
