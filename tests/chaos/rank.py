# A rank of the chaos workload (tests/chaos/chaos.py): records who it is and when it started,
# then a heartbeat every 100 ms, into its own file in the shared records directory, so a
# SIGKILLed process still leaves its last-alive time; exits after a random short time, with
# code 1 now and then (to trigger retries).
#   rank.py RECORDS_DIR SEED MIN_S MAX_S FAIL_PERCENT
# Times are CLOCK_BOOTTIME milliseconds (container ranks read the same clock from /proc/uptime).
import os, random, sys, time

records, seed, lo, hi, fail_pct = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
e = os.environ
ident = [e.get("YARD_JOB", "?"), e.get("YARD_TASK", "?"), e.get("YARD_ROLE", "?"),
         e.get("YARD_REPLICA_INDEX", "?"), e.get("YARD_ATTEMPT", "?")]
pid = os.getpid()
now = lambda: int(time.clock_gettime(time.CLOCK_BOOTTIME) * 1000)
rng = random.Random("-".join([seed] + ident))
f = open(os.path.join(records, ".".join(ident + [str(pid)])), "a", buffering=1)
f.write("start %s %d %s %d\n" % (" ".join(ident), pid, e.get("YARD_NODE", "?"), now()))
end = time.monotonic() + rng.uniform(lo, hi)
code = 1 if rng.randrange(100) < fail_pct else 0
while time.monotonic() < end:
    f.write("hb %d\n" % now())
    time.sleep(0.1)
f.write("end %d %d\n" % (now(), code))
sys.exit(code)
