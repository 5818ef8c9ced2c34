"""Prints a normalised job spec (yardctl validate -o json) as a readable DAG summary."""
import json
import sys

job = json.load(sys.stdin)
print(f"job {job['name']}  queue={job['queue']}  type={job['type']}  priority={job['priority']}")
for t in job["tasks"]:
    deps = ", ".join(t["dependsOn"]) or "-"
    if t["kind"] == "container-job":
        shape = f"{t['completions']} runs, {t['parallelism']} at a time"
        roles = [("run", t["parallelism"], t["container"])]
    else:
        roles = [(r["name"], r["replicas"], r["container"]) for r in t["roles"]]
        shape = " + ".join(f"{n} x{k}" for n, k, _ in roles)
    print(f"  {t['name']:<10} {t['kind']:<13} after: {deps:<10} {shape}")
    for n, k, c in roles:
        res = c.get("resources")
        if res:
            size = f"cpu={res['cpuMillis']}m mem={res['memoryBytes'] >> 20}Mi gpu={res['gpu']}"
        else:
            size = "flavor=" + c["flavor"]
        print(f"      {n:<9} image={c['image']:<6} {size}  argv={' '.join(c['argv'])[:40]!r}")
