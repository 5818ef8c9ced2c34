# The chaos suite's cluster (tests/chaos/chaos.py): the run's settings (from its command line
# and CHAOS_* variables), its temp directory and copy of the binaries, logging and the verdict's
# failures, commands, and the processes it starts and stops: the network namespaces, the
# master (or, with CHAOS_MASTERS=3, three masters on Raft: docs/ha.md), the agents, the
# registry and containerd.
import ctypes, json, os, random, re, shutil, signal, socket, subprocess, sys
import tempfile, threading, time

BUILD_BIN = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 1 << 31))
DURATION = float(os.environ.get("CHAOS_DURATION", "100"))
MODE = os.environ.get("CHAOS_MODE", "long" if DURATION > 300 else "short")
MASTERS = int(os.environ.get("CHAOS_MASTERS") or "1")
if MASTERS not in (1, 3):
    sys.exit("chaos: CHAOS_MASTERS must be 1 or 3, not %d" % MASTERS)
HA = MASTERS == 3
TAG = "chaos%d" % os.getpid()
NS_A, NS_B = "ych%da" % (os.getpid() % 100000), "ych%db" % (os.getpid() % 100000)
VETH_A, VETH_B = NS_A + "v", NS_B + "v"
ADDR_A, ADDR_B = "10.213.0.1", "10.213.0.2"
CLIENT, AGENT_API = "127.0.0.1:7700", ADDR_A + ":7701"
# HA mode: masters m1, m2, m3, all in namespace A; client API 127.0.0.1:77I0, agent API
# 10.213.0.1:77I1, raft 127.0.0.1:77I2 (I = 0, 1, 2). m1 bootstraps, m2 and m3 join it.
MASTER_NAMES = ["m1", "m2", "m3"] if HA else ["master"]
CLIENTS = {"m%d" % (i + 1): "127.0.0.1:77%d0" % i for i in range(3)}
AGENT_APIS = {"m%d" % (i + 1): "%s:77%d1" % (ADDR_A, i) for i in range(3)}
RAFTS = {"m%d" % (i + 1): "127.0.0.1:77%d2" % i for i in range(3)}
ELECTION_MS = 1000
# The fence is derived from heartbeat_timeout T: fence_timeout 2T/3, fence_grace T/6. One master:
# T = 6 s (fence 4 s, grace 1 s; docs/reliability.md). HA mode: a failover (an election of 1-2
# election timeouts, the new leader's load, the agents finding it) has to fit in the fence, and
# docs/ha.md asks for a fence of at least 5 election timeouts; 4 s is too tight for that, so HA
# mode (only) runs with T = 12 s: fence 8 s, grace 2 s.
HEARTBEAT_S = 12 if HA else 6
FENCE_S, GRACE_S = HEARTBEAT_S * 2 / 3, HEARTBEAT_S / 6
AGENT_CPU, AGENT_MEM = 2.0, 1 << 30
LONG_S = (13, 15) if HA else (8, 11)  # > heartbeat_timeout
SHORT_S = (0.8, 2.5)  # < fence_timeout
DRAIN_S = 100  # every acknowledged job must be final this long after the faults stop

T0 = time.monotonic()
tmp = tempfile.mkdtemp(prefix="yard-chaos.")
records = os.path.join(tmp, "records")
os.makedirs(records)
# A copy of the binaries: other work may relink build/bin while a long run goes on.
BIN = os.path.join(tmp, "bin")
os.makedirs(BIN)
for b in ("yard-master", "yard-agent", "yard-shim", "yard-rsh", "yardctl"):
    if os.path.exists(os.path.join(BUILD_BIN, b)):
        shutil.copy2(os.path.join(BUILD_BIN, b), BIN)
os.chmod(records, 0o777)
log_lock = threading.Lock()
fails, findings = [], []
procs = {}  # name -> Popen of every daemon and helper started here
env = dict(os.environ, YARD_MASTER=",".join(CLIENTS[m] for m in MASTER_NAMES) if HA else CLIENT)


def now_ms():
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * 1000)


def say(msg):
    with log_lock:
        print("[%6.1f] %s" % (time.monotonic() - T0, msg), flush=True)


def fail(msg):
    fails.append(msg)
    say("FAIL: " + msg)


def sh(*cmd, check=True, timeout=60, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), (r.stderr or r.stdout).strip()))
    return r


def yardctl(*args, timeout=20):
    try:
        return subprocess.run([BIN + "/yardctl", *args], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", "timed out")
    except OSError as e:
        return subprocess.CompletedProcess(args, 126, "", "yardctl: %s" % e)


def yjson(*args):
    r = yardctl("-o", "json", *args)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def start(name, cmd, ns=None, **kw):
    out = open(os.path.join(tmp, name + ".log"), "ab")
    if ns:
        cmd = ["nsenter", "--net=/run/netns/" + ns] + cmd
    procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kw)
    return procs[name]


def kill9(name):
    p = procs.get(name)
    if p and p.poll() is None:
        p.kill()
        p.wait()


def tail(name, n=15):
    try:
        with open(os.path.join(tmp, name + ".log"), errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# The cluster

def setup_network():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", VETH_A, "netns", NS_A, "type", "veth", "peer", "name", VETH_B, "netns", NS_B)
    sh("ip", "-n", NS_A, "addr", "add", ADDR_A + "/24", "dev", VETH_A)
    sh("ip", "-n", NS_B, "addr", "add", ADDR_B + "/24", "dev", VETH_B)
    sh("ip", "-n", NS_A, "link", "set", VETH_A, "up")
    sh("ip", "-n", NS_B, "link", "set", VETH_B, "up")
    # This process (and so everything it starts) moves into A; agent 3 is started in B.
    fd = os.open("/run/netns/" + NS_A, os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
        raise RuntimeError("setns: errno %d" % ctypes.get_errno())
    os.close(fd)


def link(up):
    sh("ip", "-n", NS_B, "link", "set", VETH_B, "up" if up else "down")


mdata = os.path.join(tmp, "mdata")


HA_DISK_MB = 192  # each master's own tmpfs in HA mode: its raft log, snapshots and store


def setup_master_disk():
    os.makedirs(mdata)
    if HA:  # a tmpfs per master, so that the master_disk_full fault fills one master's disk only
        for name in MASTER_NAMES:
            os.makedirs(os.path.join(mdata, name))
            sh("mount", "-t", "tmpfs", "-o", "size=%dm" % HA_DISK_MB, "chaos-" + name, os.path.join(mdata, name))
        with open(os.path.join(tmp, "master.toml"), "w") as f:
            f.write('join_token = "chaos-token"\nheartbeat_timeout = "%ds"\nstop_grace = "2s"\ndataset_roots = ["%s"]\n'
                    'election_timeout_ms = %d\n' % (HEARTBEAT_S, tmp, ELECTION_MS))
        return
    sh("mount", "-t", "tmpfs", "-o", "size=48m", "chaos-master", mdata)
    with open(os.path.join(tmp, "master.toml"), "w") as f:
        f.write('join_token = "chaos-token"\nheartbeat_timeout = "%ds"\nstop_grace = "2s"\ndataset_roots = ["%s"]\n'
                % (HEARTBEAT_S, tmp))


def master_dir(name):
    """A master's data directory; in HA mode inside its own tmpfs (mount point: disk_of)."""
    return os.path.join(mdata, name, "data") if HA else os.path.join(mdata, name)


def disk_of(name):
    return os.path.join(mdata, name) if HA else mdata


CA = os.path.join(master_dir(MASTER_NAMES[0]), "ca.pem")  # the cluster CA: m1's, the same on every master


def start_master():
    start("master", [BIN + "/yard-master", "--config", os.path.join(tmp, "master.toml"),
                     "--data-dir", os.path.join(mdata, "master"), "--listen", CLIENT, "--agent-listen", AGENT_API])
    # TLS and tokens (docs/security.md): the cluster CA and the admin's token, made at the first start.
    env["YARD_CA"] = os.path.join(mdata, "master", "ca.pem")
    token_file = os.path.join(mdata, "master", "admin.token")
    for _ in range(100):
        if os.path.exists(token_file) and os.path.getsize(token_file) > 0:
            env["YARD_TOKEN"] = open(token_file).read().strip()
            break
        time.sleep(0.1)
    for _ in range(100):
        if yardctl("queue", "list", timeout=5).returncode == 0:
            return True
        if procs["master"].poll() is not None:
            break
        time.sleep(0.1)
    say("master did not come up: " + tail("master"))
    return False


# ---------------------------------------------------------------------------------------------
# HA mode: three masters on Raft (docs/ha.md)

master_cmds = {}  # name -> the command line it was first started with (a restart uses it again)


def log_size(name):
    try:
        return os.path.getsize(os.path.join(tmp, name + ".log"))
    except OSError:
        return 0


def wait_log(name, texts, secs, since=0):
    """Whether one of TEXTS (a string or a tuple) shows in NAME's log after byte SINCE within SECS seconds."""
    deadline = time.monotonic() + secs
    while True:
        try:
            with open(os.path.join(tmp, name + ".log"), "rb") as f:
                f.seek(since)
                got = f.read()
                if any(t.encode() in got for t in ((texts,) if isinstance(texts, str) else texts)):
                    return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


# The raft cut (HA mode): a master's raft traffic dropped both ways by packet filter rules in
# namespace A, where every master runs. Its own dials are told apart from the others' by the
# cgroup (v2) it runs in, one per master (iptables' cgroup match), since all of them dial from
# 127.0.0.1. Left out (said so) where iptables, a cgroup2 mount or the match is missing.
CGROUP2 = next((l.split()[1] for l in open("/proc/mounts") if l.split()[2] == "cgroup2"), None)


def master_cgroup(name):
    return "yard-%s-%s" % (TAG, name)  # relative to the cgroup2 root, as iptables' --path takes it


def cut_rules(name):
    port = RAFTS[name].rsplit(":", 1)[1]
    others = ",".join(RAFTS[m].rsplit(":", 1)[1] for m in MASTER_NAMES)
    return [["OUTPUT", "-p", "tcp", "--dport", port, "-j", "DROP"],   # anyone to its raft port
            ["OUTPUT", "-p", "tcp", "--sport", port, "-j", "DROP"],   # its raft port's answers
            ["OUTPUT", "-m", "cgroup", "--path", master_cgroup(name), "-p", "tcp", "-m", "multiport",
             "--dports", others, "-j", "DROP"]]                      # its own dials


def raft_cut(name, cut):
    for rule in cut_rules(name):
        sh("iptables", "-w", "-A" if cut else "-D", *rule, check=cut)


def setup_raft_cut():
    """Whether the raft cut can be made here: each master's cgroup made, a rule tried."""
    if not HA:
        return False
    if not shutil.which("iptables") or not CGROUP2:
        say("the leader's raft cut is left out: %s" % ("no iptables" if not shutil.which("iptables") else "no cgroup2 mount"))
        return False
    for name in MASTER_NAMES:
        os.makedirs(os.path.join(CGROUP2, master_cgroup(name)), exist_ok=True)
    rule = ["OUTPUT", "-m", "cgroup", "--path", master_cgroup("m1"), "-p", "tcp", "--dport", "9", "-j", "DROP"]
    r = sh("iptables", "-w", "-A", *rule, check=False)
    if r.returncode != 0:
        say("the leader's raft cut is left out: iptables' cgroup match: " + (r.stderr or r.stdout).strip()[-200:])
        return False
    sh("iptables", "-w", "-D", *rule, check=False)
    return True


raft_cuts = False  # set by chaos.py from setup_raft_cut()


def start_member(name, join=None):
    """Starts master NAME: the first time with its own command line (JOIN: the raft address and
    CA fingerprint of the cluster to join), later again with the same one."""
    if name not in master_cmds:
        cmd = [BIN + "/yard-master", "--config", os.path.join(tmp, "master.toml"), "--name", name,
               "--data-dir", master_dir(name), "--listen", CLIENTS[name], "--agent-listen", AGENT_APIS[name],
               "--raft-listen", RAFTS[name], "--metrics-listen", ""]
        if join:  # the join token is the config file's join_token (not argv: docs/security.md)
            cmd += ["--join", join[0], "--ca-fingerprint", join[1]]
        master_cmds[name] = cmd
    cmd = master_cmds[name]
    if raft_cuts:  # into its own cgroup before it runs, so that every socket it makes is counted there
        cmd = ["sh", "-c", 'echo $$ >"$0/cgroup.procs" && exec "$@"', os.path.join(CGROUP2, master_cgroup(name))] + cmd
    return start(name, cmd)


def start_masters():
    """m1 bootstraps as the single master starts; m2 and m3 join it as voters."""
    start_member("m1")
    token_file = os.path.join(master_dir("m1"), "admin.token")
    for _ in range(150):
        if os.path.exists(token_file) and os.path.getsize(token_file) > 0:
            env["YARD_TOKEN"] = open(token_file).read().strip()
            break
        time.sleep(0.1)
    env["YARD_CA"] = CA
    for _ in range(150):
        if yardctl("queue", "list", timeout=5).returncode == 0:
            break
        if procs["m1"].poll() is not None:
            break
        time.sleep(0.1)
    else:
        say("m1 did not come up: " + tail("m1"))
        return False
    m = re.search(r"fingerprint (sha256:[0-9a-f]+)", open(os.path.join(tmp, "m1.log"), errors="replace").read())
    if not m:
        say("no CA fingerprint in m1's log: " + tail("m1"))
        return False
    for name in ("m2", "m3"):
        start_member(name, join=(RAFTS["m1"], m.group(1)))
        if not wait_log(name, "this master is a voter", 30):
            say("%s did not become a voter: %s" % (name, tail(name)))
            return False
    return True


def leader(secs=15):
    """The name of the master that leads (yardctl cluster status), or None."""
    deadline = time.monotonic() + secs
    by_client = {v: k for k, v in CLIENTS.items()}
    while time.monotonic() < deadline:
        st = yjson("cluster", "status")
        for m in (st or {}).get("members", []):
            if m.get("role") == "leader":
                name = m.get("name") if m.get("name") in CLIENTS else by_client.get(m.get("clientAddress"))
                if name:
                    return name
        time.sleep(0.2)
    return None


containerd_sock = os.path.join(tmp, "containerd.sock")
use_containers = False


def agent_cmd(n):
    with open(os.path.join(tmp, "join-token"), "w") as f:  # a file, not argv: docs/security.md
        f.write("chaos-token\n")
    masters = ",".join(AGENT_APIS[m] for m in MASTER_NAMES) if HA else AGENT_API
    cmd = [BIN + "/yard-agent", "--master", masters, "--token-file", os.path.join(tmp, "join-token"),
           "--ca", CA, "--name", "node-%d" % n,
           "--address", ADDR_B if n == 3 else "127.0.0.%d" % (n + 1), "--data-dir", os.path.join(tmp, "agent%d" % n),
           "--port-range", "3%d000-3%d099" % (n, n), "--cgroup-parent", "yard/%s-%d" % (TAG, n),
           "--allow-host-tasks", "--cpu", str(AGENT_CPU), "--memory", "1Gi"]
    if use_containers and n != 3:
        cmd += ["--containerd-socket", containerd_sock, "--insecure-registry", "127.0.0.1:7750"]
    return cmd


def start_agent(n):
    start("agent%d" % n, agent_cmd(n), ns=NS_B if n == 3 else None)


def start_containerd():
    with open(os.path.join(tmp, "containerd.toml"), "w") as f:
        f.write('version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
    start("containerd", ["containerd", "--config", os.path.join(tmp, "containerd.toml"), "--address", containerd_sock,
                         "--root", os.path.join(tmp, "containerd-root"), "--state", os.path.join(tmp, "containerd-state")])
    for _ in range(100):
        if os.path.exists(containerd_sock) and sh("ctr", "--address", containerd_sock, "version", check=False).returncode == 0:
            return True
        time.sleep(0.1)
    return False


def ctr(*args):
    return sh("ctr", "--address", containerd_sock, "-n", "yard", *args, check=False)


def setup_containers():
    """Containers when the machine has containerd and the image tools; False otherwise."""
    if os.environ.get("CHAOS_CONTAINERS") == "0":
        return False
    need = ["containerd", "ctr", "runc", "umoci", "skopeo", "docker-registry", "busybox"]
    missing = [t for t in need if not shutil.which(t)]
    if missing:
        say("containers left out: missing " + " ".join(missing))
        return False
    oci = os.path.join(tmp, "oci")
    r = sh("bash", "-c", 'tmp=%s; source %s/../e2e/images.sh; build_busybox_image %s bb' % (tmp, HERE, oci), check=False)
    if r.returncode != 0:
        say("containers left out: image build failed: " + r.stderr[-300:])
        return False
    with open(os.path.join(tmp, "registry.yml"), "w") as f:
        f.write("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/registry\nhttp:\n  addr: 127.0.0.1:7750\n" % tmp)
    start("registry", ["docker-registry", "serve", os.path.join(tmp, "registry.yml")])
    for _ in range(50):
        try:
            socket.create_connection(("127.0.0.1", 7750), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    r = sh("skopeo", "copy", "--quiet", "--dest-tls-verify=false", "oci:%s:bb" % oci,
           "docker://127.0.0.1:7750/yard/busybox:1", check=False)
    if r.returncode != 0 or not start_containerd():
        say("containers left out: registry or containerd failed: " + r.stderr[-300:] + tail("containerd", 5))
        return False
    return True



def rss(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# ---------------------------------------------------------------------------------------------
# Stopping everything

def cleanup():
    for name in ["flood"] + MASTER_NAMES + ["agent1", "agent2", "agent3", "registry"]:
        kill9(name)
    for n in (1, 2, 3):
        rd = os.path.join(tmp, "agent%d" % n, "replicas")
        for x in os.listdir(rd) if os.path.isdir(rd) else []:
            for f, group in (("pid", True), ("shim.pid", False)):
                try:
                    pid = int(open(os.path.join(rd, x, f)).read())
                    os.kill(-pid if group else pid, signal.SIGKILL)
                except (OSError, ValueError):
                    pass
    for fn in os.listdir(records):
        pid = fn.rsplit(".", 1)[-1]
        if pid.isdigit() and alive(int(pid)):
            try:
                if b"rank.py" in open("/proc/%s/cmdline" % pid, "rb").read():
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    if "containerd" in procs:
        # Containers and their shims (as tests/e2e/images.sh's stop_containerd does).
        for line in sh("pgrep", "-af", "containerd-shim-runc-v2 .*-address %s$" % containerd_sock, check=False).stdout.splitlines():
            pid = line.split()[0]
            m = re.search(r" -namespace (\S+) .* -id (\S+) ", line + " ")
            if m:
                sh("runc", "--root", "/run/containerd/runc/" + m.group(1), "kill", "--all", m.group(2), "KILL", check=False)
                sh("runc", "--root", "/run/containerd/runc/" + m.group(1), "delete", "--force", m.group(2), check=False)
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        p = procs["containerd"]
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    time.sleep(0.3)
    for m in sorted((l.split()[1] for l in open("/proc/mounts") if l.split()[1].startswith(tmp)), reverse=True):
        sh("umount", "-l", m, check=False)
    for ctl in os.listdir("/sys/fs/cgroup"):
        for n in (1, 2, 3):
            d = "/sys/fs/cgroup/%s/yard/%s-%d" % (ctl, TAG, n)
            for root, dirs, _ in sorted(os.walk(d, topdown=False), key=lambda x: -len(x[0])) if os.path.isdir(d) else []:
                try:
                    os.rmdir(root)
                except OSError:
                    pass
    for name in MASTER_NAMES if HA and CGROUP2 else ():
        try:
            os.rmdir(os.path.join(CGROUP2, master_cgroup(name)))
        except OSError:
            pass
    for ns in (NS_A, NS_B):  # the raft cut's rules go with namespace A
        sh("ip", "netns", "del", ns, check=False)
    if os.environ.get("CHAOS_KEEP") == "1" or fails:
        say("kept %s" % tmp) if os.environ.get("CHAOS_KEEP") == "1" else None
    if os.environ.get("CHAOS_KEEP") != "1":
        shutil.rmtree(tmp, ignore_errors=True)


def dump_logs():
    for name in MASTER_NAMES + ["agent1", "agent2", "agent3"]:
        print("=== %s (last lines)" % name)
        print(tail(name, int(os.environ.get("CHAOS_LOG_LINES", "25"))))

