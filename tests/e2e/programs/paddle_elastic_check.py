"""Stands in for Paddle's elastic launcher (Paddle is not packaged in Debian): reads the
variables `python -m paddle.distributed.launch --elastic_server ... --np min:max` reads,
registers this trainer in etcd the way Paddle's elastic manager does (a key under
/paddle/<job id>/nodes/, etcd's v3 API through its JSON gateway), then works like a trainer:
burns CPU or idles on a control file, printing how many trainers are registered whenever
that changes. Usage: paddle_elastic_check.py CONTROL_FILE
"""
import base64
import json
import os
import sys
import time
import urllib.request

NEED = ["PADDLE_ELASTIC_SERVER", "PADDLE_ELASTIC_JOB_ID", "PADDLE_ELASTIC_NP", "PADDLE_ELASTIC_TIMEOUT",
        "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT"]


def b64(s):
    return base64.b64encode(s.encode()).decode()


def etcd(server, path, body):
    req = urllib.request.Request(f"http://{server}/v3/{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def main():
    missing = [k for k in NEED if not os.environ.get(k)]
    if missing:
        print("paddle-elastic: missing " + ",".join(missing), flush=True)
        sys.exit(2)
    lo, hi = (int(x) for x in os.environ["PADDLE_ELASTIC_NP"].split(":"))
    assert 1 <= lo <= hi, os.environ["PADDLE_ELASTIC_NP"]
    server = os.environ["PADDLE_ELASTIC_SERVER"].split(",")[0]
    me = os.environ["PADDLE_CURRENT_ENDPOINT"]
    prefix = f"/paddle/{os.environ['PADDLE_ELASTIC_JOB_ID']}/nodes/"
    lease = etcd(server, "lease/grant", {"TTL": 10})["ID"]
    etcd(server, "kv/put", {"key": b64(prefix + me), "value": b64(me), "lease": lease})
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    control, seen = sys.argv[1], -1
    print(f"paddle-elastic np={lo}:{hi} endpoint={me} id={os.environ['PADDLE_TRAINER_ID']}", flush=True)
    last_keepalive = 0.0
    while True:
        now = time.monotonic()
        if now - last_keepalive > 3:
            etcd(server, "lease/keepalive", {"ID": lease})
            last_keepalive = now
        count = int(etcd(server, "kv/range", {"key": b64(prefix), "range_end": b64(end), "count_only": True})
                    .get("count", 0))
        if count != seen:
            print(f"paddle-elastic registered={count}", flush=True)
            seen = count
        try:
            word = open(control).read().strip()
        except OSError:
            word = "low"
        if word == "stop":
            break
        start = time.monotonic()
        if word == "high":
            while time.monotonic() - start < 0.45:
                sum(i * i for i in range(2000))
            time.sleep(0.05)
        else:
            time.sleep(0.5)
    etcd(server, "kv/deleterange", {"key": b64(prefix + me)})
    print("paddle-elastic finished", flush=True)


if __name__ == "__main__":
    main()
