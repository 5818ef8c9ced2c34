"""Applies TensorFlow's TF_CONFIG rules without TensorFlow: the replica finds its own
address at cluster[type][index] (and can listen on it), there is at most one chief, and the
evaluator is outside the training cluster. ps replicas then serve until they are stopped
(as TensorFlow parameter servers do); the others exit 0."""
import json
import os
import socket
import time

cfg = json.loads(os.environ["TF_CONFIG"])
cluster, task = cfg["cluster"], cfg["task"]
kind, index = task["type"], task["index"]
me = f'{os.environ["YARD_NODE_ADDR"]}:{os.environ["YARD_PORT"]}'
assert cfg["environment"] == "cloud", cfg
assert kind == os.environ["YARD_ROLE"] and index == int(os.environ["YARD_REPLICA_INDEX"]), (kind, index)
assert len(cluster.get("chief", [])) <= 1, cluster
assert "evaluator" not in cluster, "the evaluator must not be in the training cluster"
for role, members in cluster.items():
    assert members == os.environ[f"YARD_HOSTS_{role.upper()}"].split(","), (role, members)
if kind == "evaluator":
    assert me not in sum(cluster.values(), []), me
else:
    assert cluster[kind][index] == me, (cluster[kind][index], me)
    host, port = me.rsplit(":", 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen()
chief = "chief" if "chief" in cluster else "worker"
print(f"{kind} {index} at {me} ok; chief role is {chief}", flush=True)
# With TF_CHECK_DIR set, each replica leaves a mark and the one whose exit decides the task
# waits for every other's, so all of them are checked before cleanup stops the rest.
marks = os.environ.get("TF_CHECK_DIR")
if marks:
    os.makedirs(marks, exist_ok=True)
    open(os.path.join(marks, f"{kind}-{index}"), "w").close()
    if kind == chief and index == 0:
        roles = {k[len("YARD_HOSTS_"):].lower(): v.split(",") for k, v in os.environ.items() if k.startswith("YARD_HOSTS_")}
        want = {f"{r}-{i}" for r, members in roles.items() for i in range(len(members))}
        deadline = time.time() + 60
        while not want <= set(os.listdir(marks)) and time.time() < deadline:
            time.sleep(0.1)
        assert want <= set(os.listdir(marks)), (want, os.listdir(marks))
if kind == "ps":
    while True:
        time.sleep(1)
