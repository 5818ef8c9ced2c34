# Flood of the chaos suite (tests/chaos/chaos.py): garbage frames, oversized announcements that
# trickle, and idle connections against the given listeners at once, from several loopback
# sources, for SECONDS. Prints one line per target with what became of the connections.
#   flood.py SECONDS SEED HOST:PORT...
import random, socket, struct, sys, time

seconds, rng = float(sys.argv[1]), random.Random(sys.argv[2])
targets = [t.rsplit(":", 1) for t in sys.argv[3:]]
sources = ["127.0.0.%d" % i for i in range(20, 24)]


def dial(host, port, src):
    s = socket.socket()
    s.bind((src, 0))
    s.setblocking(False)
    s.connect_ex((host, int(port)))
    return s


stats = {h + ":" + p: {"garbage": 0, "garbage_answered": 0, "refused": 0} for h, p in targets}
idle, tricklers = [], []
for h, p in targets:
    for i in range(60):  # some over the per-address cap of 64 for two sources
        idle.append((h + ":" + p, dial(h, p, sources[i % 2])))
    for i in range(40):
        tricklers.append((h + ":" + p, dial(h, p, sources[2])))
time.sleep(0.2)
for _, s in tricklers:
    try:
        s.send(struct.pack("<I", rng.choice([8 << 20, 64 << 20, 0xFFFFFFF0])))
    except OSError:
        pass
end = time.time() + seconds
while time.time() < end:
    for h, p in targets:
        key = h + ":" + p
        for _ in range(10):  # short-lived connections with garbage frames
            try:
                s = socket.create_connection((h, int(p)), timeout=1, source_address=(sources[3], 0))
            except OSError:
                stats[key]["refused"] += 1
                continue
            try:
                kind = rng.randrange(3)
                if kind == 0:
                    body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 512)))
                    s.sendall(struct.pack("<I", len(body)) + body)
                elif kind == 1:
                    s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096))))
                else:
                    s.sendall(struct.pack("<I", 0) + b"\0" * 8)
                s.settimeout(0.2)
                try:
                    if s.recv(4096):
                        stats[key]["garbage_answered"] += 1
                except OSError:
                    pass
                stats[key]["garbage"] += 1
            except OSError:
                pass
            finally:
                s.close()
    for _, s in tricklers:
        try:
            s.send(b"x" * 512)
        except OSError:
            pass
    time.sleep(0.05)


def still_open(s):
    try:
        return s.recv(65536) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


for key, st in stats.items():
    i = sum(still_open(s) for k, s in idle if k == key)
    t = sum(still_open(s) for k, s in tricklers if k == key)
    print("%s: garbage connections %d (answered %d, refused %d); idle still open %d/60; "
          "oversized tricklers still open %d/40" % (key, st["garbage"], st["garbage_answered"], st["refused"], i, t))
for _, s in idle + tricklers:
    s.close()
