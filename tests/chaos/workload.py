# The chaos suite's workload (tests/chaos/chaos.py): DAG jobs of host and container gangs whose
# processes record themselves (rank.py, or CONTAINER_SH in a container), submitted, cancelled
# and deleted at random while the faults run.
import json, os, threading, time, traceback

import cluster
from cluster import HERE, PY, SEED, fail, records, say, tmp, yardctl, yjson

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
        with_containers = cluster.use_containers and r.random() < 0.5
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
