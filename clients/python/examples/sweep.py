#!/usr/bin/env python3
"""A hyper-parameter sweep on Yard: one job array, a member per learning rate.

Each member runs a host process (image: host) that reads its index from YARD_ARRAY_INDEX,
picks its learning rate and prints `loss=...`. The script waits for every member, reads each
one's loss from its log, and prints a table and the best rate.

    python3 clients/python/examples/sweep.py [NAME]

Settings come from the client's defaults (docs/python.md, "Configuration"); on a
`yard-master --dev` cluster nothing else is needed. Exit status 0 when every run succeeded.
"""

import sys
import uuid

import yard

RATES = [0.3, 0.1, 0.03, 0.01, 0.003, 0.001]

# What each member runs: a stand-in for training, with its best rate near 0.01.
TRAIN = """
import math, os
rates = [float(r) for r in os.environ["RATES"].split(",")]
lr = rates[int(os.environ["YARD_ARRAY_INDEX"])]
loss = (math.log10(lr) + 2) ** 2 + 0.05
print(f"lr={lr} loss={loss:.4f}")
"""


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "lr-sweep-" + uuid.uuid4().hex[:6]
    client = yard.Client()
    job = (
        yard.Job(name)
        .array(count=len(RATES), max_running=3)
        .task(
            "train",
            "container-job",
            container={
                "image": "host",
                "resources": {"cpu": "100m", "memory": "64Mi"},
                "command": ["python3", "-c", TRAIN],
                "env": {"RATES": ",".join(map(str, RATES))},
            },
        )
    )
    members = client.submit(job)["jobs"]
    print(f"submitted job array {name}: {len(members)} jobs")

    rows = []
    for index, member in enumerate(members):
        state = client.wait(member, timeout=600)["job"]["state"]
        loss = None
        for line in client.logs(member):
            for word in line.text.split():
                if word.startswith("loss="):
                    loss = float(word[len("loss="):])
        rows.append((member, RATES[index], state, loss))

    print(f"{'JOB':<20} {'LR':>8} {'STATE':<10} {'LOSS':>8}")
    for member, lr, state, loss in rows:
        print(f"{member:<20} {lr:>8g} {state:<10} {'-' if loss is None else f'{loss:.4f}':>8}")
    done = [r for r in rows if r[3] is not None]
    if done:
        best = min(done, key=lambda r: r[3])
        print(f"best: lr={best[1]:g} loss={best[3]:.4f} ({best[0]})")
    return 0 if all(r[2] == "Succeeded" and r[3] is not None for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
