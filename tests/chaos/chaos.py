# The chaos suite (docs/reliability.md, "Chaos suite"): a real cluster (one yard-master, three
# yard-agents, containerd when the machine has it) runs DAG jobs while a seeded RNG injects
# faults; then the promises of docs/reliability.md are checked. Run by tests/chaos/chaos_test.sh.
#
# Layout (servers listen only inside the namespaces made here): network namespace A holds the
# master (client API 127.0.0.1:7700, agent API 10.213.0.1:7701), agents 1 and 2 (127.0.0.2/3),
# the registry and containerd (this process joins A, so everything it starts is there); agent 3
# lives in namespace B (10.213.0.2), joined to A by a veth pair whose B end the faults take down.
#
# Environment: CHAOS_SEED (default: random; printed), CHAOS_DURATION (seconds of faults,
# default 100), CHAOS_MODE short|long (default: long above 300 s; only long mode also stops the
# master for longer than the fence timeout, which fences every replica of the cluster and
# costs the short run too much time; it leaves out nothing because of a known defect),
# CHAOS_CONTAINERS 0 to leave containers out, CHAOS_KEEP 1 to keep the temp directory.
# kill -9 hits any agent for short and long pauses: a dead agent's host replicas are fenced
# by their yard-shim, its containers by their yard-shim guard (docs/shim.md).
import ctypes, json, os, random, re, shutil, signal, socket, statistics, subprocess, sys
import tempfile, threading, time, traceback

BUILD_BIN = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 1 << 31))
DURATION = float(os.environ.get("CHAOS_DURATION", "100"))
MODE = os.environ.get("CHAOS_MODE", "long" if DURATION > 300 else "short")
TAG = "chaos%d" % os.getpid()
NS_A, NS_B = "ych%da" % (os.getpid() % 100000), "ych%db" % (os.getpid() % 100000)
VETH_A, VETH_B = NS_A + "v", NS_B + "v"
ADDR_A, ADDR_B = "10.213.0.1", "10.213.0.2"
CLIENT, AGENT_API = "127.0.0.1:7700", ADDR_A + ":7701"
HEARTBEAT_S = 6  # fence 4 s, grace 1 s (docs/reliability.md)
AGENT_CPU, AGENT_MEM = 2.0, 1 << 30
LONG_S = (8, 11)  # > heartbeat_timeout
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
env = dict(os.environ, YARD_MASTER=CLIENT)


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


def setup_master_disk():
    os.makedirs(mdata)
    sh("mount", "-t", "tmpfs", "-o", "size=48m", "chaos-master", mdata)
    with open(os.path.join(tmp, "master.toml"), "w") as f:
        f.write('join_token = "chaos-token"\nheartbeat_timeout = "%ds"\nstop_grace = "2s"\ndataset_roots = ["%s"]\n'
                % (HEARTBEAT_S, tmp))


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


containerd_sock = os.path.join(tmp, "containerd.sock")
use_containers = False


def agent_cmd(n):
    with open(os.path.join(tmp, "join-token"), "w") as f:  # a file, not argv: docs/security.md
        f.write("chaos-token\n")
    cmd = [BIN + "/yard-agent", "--master", AGENT_API, "--token-file", os.path.join(tmp, "join-token"),
           "--ca", os.path.join(mdata, "master", "ca.pem"), "--name", "node-%d" % n,
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


# ---------------------------------------------------------------------------------------------
# The workload: DAG jobs of host and container gangs whose processes record themselves

CONTAINER_SH = r'''r=/rec; id="$YARD_JOB $YARD_TASK $YARD_ROLE $YARD_REPLICA_INDEX $YARD_ATTEMPT"
u=c$(head -c 8 /proc/sys/kernel/random/uuid)
f=$r/$YARD_JOB.$YARD_TASK.$YARD_ROLE.$YARD_REPLICA_INDEX.$YARD_ATTEMPT.$u
ms() { read t _ </proc/uptime; echo $(( ${t%.*}${t#*.} * 10 )); }
echo "start $id $u $YARD_NODE $(ms)" >>$f
set -- $CHAOS_PLAN; shift $(( (YARD_ATTEMPT * 3 + YARD_REPLICA_INDEX) % $# )); n=${1%:*}; code=${1#*:}
i=0; while [ $i -lt $n ]; do echo "hb $(ms)" >>$f; sleep 0.1; i=$((i + 1)); done
echo "end $(ms) $code" >>$f; exit $code'''


class Workload:
    def __init__(self, rng):
        self.rng = rng
        self.acked = {}  # name -> {"deleted": bool, "cancelled": bool, "containers": bool}
        self.seq = 0
        self.pending = []  # (monotonic time, action, name)
        self.stop = threading.Event()

    def host_container(self, cpu):
        lo, hi = (1.5, 6) if self.rng.random() < 0.8 else (6, 15)
        return {"image": "host", "resources": {"cpu": cpu, "memory": "64Mi"}, "command": PY,
                "args": [os.path.join(HERE, "rank.py"), records, str(SEED), str(lo), str(hi), "12"]}

    def image_container(self, cpu):
        plan = " ".join("%d:%d" % (self.rng.randint(15, 60), 1 if self.rng.random() < 0.12 else 0) for _ in range(7))
        return {"image": "127.0.0.1:7750/yard/busybox:1", "resources": {"cpu": cpu, "memory": "32Mi"},
                "command": ["sh", "-c", CONTAINER_SH], "env": [{"name": "CHAOS_PLAN", "value": plan}],
                "mounts": [{"dataset": "chaosrec", "path": "/rec", "readOnly": False}]}

    def task(self, name, deps, with_containers):
        r = self.rng
        kind = r.choice(["pytorch", "tensorflow", "container-job"] + (["container-image"] * 2 if with_containers else []))
        cpu = r.choice(["250m", "500m"])
        t = {"name": name}
        if deps:
            t["dependsOn"] = deps
        if kind == "pytorch":
            t.update(kind="pytorch", roles={"master": {"replicas": 1, "container": self.host_container(cpu)}},
                     advanced={"retries": 2})
            if r.random() < 0.7:
                t["roles"]["worker"] = {"replicas": r.randint(1, 2), "container": self.host_container(cpu)}
        elif kind == "tensorflow":
            t.update(kind="tensorflow", roles={"worker": {"replicas": r.randint(1, 2), "container": self.host_container(cpu)}},
                     advanced={"retries": 2})
            if r.random() < 0.5:
                t["roles"]["ps"] = {"replicas": 1, "container": self.host_container(cpu)}
        else:
            c = self.image_container(cpu) if kind == "container-image" else self.host_container(cpu)
            t.update(kind="container-job", completions=r.randint(1, 3), parallelism=2, retries=2, container=c)
        return t

    def spec(self, name):
        r = self.rng
        names = ["prep", "train", "eval"][: r.randint(2, 3)]
        with_containers = use_containers and r.random() < 0.5
        tasks = []
        for i, n in enumerate(names):
            deps = [] if i == 0 else ([names[i - 1]] if r.random() < 0.7 or i == 1 else names[:i])
            tasks.append(self.task(n, deps, with_containers))
        return {"name": name, "tasks": tasks}

    def submit(self):
        self.seq += 1
        name = "ch%03d" % self.seq
        spec = self.spec(name)
        path = os.path.join(tmp, "jobs", name + ".json")  # JSON is YAML
        with open(path, "w") as f:
            json.dump(spec, f)
        r = yardctl("job", "submit", path)
        if r.returncode != 0:
            say("submit %s not acknowledged: %s" % (name, (r.stderr or r.stdout).strip()[:200]))
            return
        self.acked[name] = {"deleted": False, "cancelled": False}
        roll = self.rng.random()
        if roll < 0.12:
            self.pending.append((time.monotonic() + self.rng.uniform(1, 8), "cancel", name))
        elif roll < 0.22:
            self.pending.append((time.monotonic() + self.rng.uniform(1, 8), "delete", name))

    def act(self):
        due = [p for p in self.pending if p[0] <= time.monotonic()]
        self.pending = [p for p in self.pending if p[0] > time.monotonic()]
        for _, action, name in due:
            r = yardctl("job", action, name)
            # A delete the master may have committed without answering still makes the job go.
            self.acked[name]["deleted" if action == "delete" else "cancelled"] = True
            say("%s %s: %s" % (action, name, "ok" if r.returncode == 0 else (r.stderr or r.stdout).strip()[:120]))

    def active(self):
        j = yjson("job", "list")
        if j is None:
            return None
        items = j if isinstance(j, list) else j.get("jobs", [])
        return sum(1 for x in items if x.get("state") not in ("Succeeded", "Failed", "Cancelled"))

    def run(self):
        os.makedirs(os.path.join(tmp, "jobs"), exist_ok=True)
        while not self.stop.is_set():
            try:
                self.act()
                a = self.active()
                if a is not None and a < 7:
                    self.submit()
            except Exception:
                fail("the workload broke: " + traceback.format_exc())
            self.stop.wait(self.rng.uniform(1.0, 2.5))


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
# Faults

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
        if not use_containers:
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


def rss(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


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
    if use_containers and not any(r["pid"].startswith("c") for r in recs):
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
        if use_containers:
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

def cleanup():
    for name in ("flood", "master", "agent1", "agent2", "agent3", "registry"):
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
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)
    if os.environ.get("CHAOS_KEEP") == "1" or fails:
        say("kept %s" % tmp) if os.environ.get("CHAOS_KEEP") == "1" else None
    if os.environ.get("CHAOS_KEEP") != "1":
        shutil.rmtree(tmp, ignore_errors=True)


def dump_logs():
    for name in ("master", "agent1", "agent2", "agent3"):
        print("=== %s (last lines)" % name)
        print(tail(name, int(os.environ.get("CHAOS_LOG_LINES", "25"))))


def main():
    global use_containers
    say("chaos suite: seed %d, %s mode, %.0f s of faults (CHAOS_SEED=%d CHAOS_DURATION=%.0f reproduces it); temp %s"
        % (SEED, MODE, DURATION, SEED, DURATION, tmp))
    selftest()
    setup_network()
    setup_master_disk()
    use_containers = setup_containers()
    if not start_master():
        fail("the master did not start")
        return
    for n in (1, 2, 3):
        start_agent(n)
    for _ in range(150):
        nodes = yjson("node", "list") or []
        if sum(1 for x in nodes if x.get("state") == "ready") >= 3:
            break
        time.sleep(0.1)
    else:
        fail("the three agents did not become ready: %s" % yardctl("node", "list").stdout)
        return
    if use_containers:
        r = yardctl("dataset", "create", "chaosrec", "--path", records, "--read-write")
        if r.returncode != 0:
            fail("dataset create: " + r.stderr)
    say("cluster up: master, 3 agents (agent 3 behind the veth)%s" % (", containerd" if use_containers else ""))

    rng = random.Random(SEED)
    workload = Workload(random.Random(rng.random()))
    faults = Faults(random.Random(rng.random()))
    monitor = Monitor(workload)
    threads = [threading.Thread(target=workload.run, daemon=True), threading.Thread(target=monitor.run, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(3)
    faults.run(time.monotonic() + DURATION)
    say("faults over; %d faults, %d jobs acknowledged; draining" % (len(faults.log), len(workload.acked)))
    workload.stop.set()
    threads[0].join()
    link(True)
    faults.ensure_up("the drain")
    for _, action, name in workload.pending:  # what was scheduled still happens
        yardctl("job", action, name)
        workload.acked[name]["deleted" if action == "delete" else "cancelled"] = True
    check_final(workload)
    say("master RSS after the drain: %.1f MiB" % (rss(procs["master"].pid) / 1024))
    monitor.stop.set()
    threads[1].join()
    for v in sorted(set(monitor.violations))[:20]:
        fail("invariant 3: " + v)
    say("invariant 3: %d cgroup samples, %d port samples, %d violations; peak use %s" % (
        monitor.samples, monitor.port_samples, len(monitor.violations),
        ", ".join("node-%d cpu %.2f mem %d MiB" % (n, c, m / 2**20) for n, (c, m) in sorted(monitor.peak.items()))))
    time.sleep(2)
    recs = read_records()
    worst = check_overlaps(recs)
    times = replacement_times(recs, faults)
    check_leftovers(recs)
    fenced = sum(open(os.path.join(tmp, "agent%d.log" % n), errors="replace").read().count("(fenced") for n in (1, 2, 3))
    say("fences: %d replica attempts reported fenced by the agents or their shims" % fenced)
    fl = ["RSS %.1f -> %.1f MiB" % (b / 1024, u / 1024) for b, u, _ in faults.flood_numbers]
    say("summary: seed %d, %d faults (%s), %d jobs, worst overlap %d ms, re-placed after %s, flood %s" % (
        SEED, len(faults.log), ", ".join(sorted(set(k for k, *_ in faults.log))), len(workload.acked), worst,
        "; ".join("%s max %d ms" % (w, max(d)) for w, _, d in times) or "-", "; ".join(fl) or "-"))
    for f in findings:
        say("finding: " + f)


if __name__ == "__main__":
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(130))
    try:
        main()
    except SystemExit:
        fail("interrupted")
    except Exception:
        fail("the suite itself broke: " + traceback.format_exc())
    finally:
        if fails:
            dump_logs()
        try:
            cleanup()
        except Exception:
            traceback.print_exc()
    if fails:
        print("chaos: %d checks failed (seed %d: CHAOS_SEED=%d CHAOS_DURATION=%.0f %s reproduces it)" % (
            len(fails), SEED, SEED, DURATION, sys.argv[0]))
        sys.exit(1)
    print("chaos: all checks passed (seed %d)" % SEED)
