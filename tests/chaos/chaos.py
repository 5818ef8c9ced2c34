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
# CHAOS_CONTAINERS 0 to leave containers out, CHAOS_KEEP 1 to keep the temp directory,
# CHAOS_MASTERS 3 for HA mode (default 1).
#
# HA mode (docs/ha.md): three masters m1, m2, m3 on Raft in namespace A (client APIs
# 127.0.0.1:7700/7710/7720, agent APIs 10.213.0.1:7701/7711/7721, raft 127.0.0.1:7702/7712/7722,
# election_timeout_ms 1000, heartbeat_timeout 12 s so a fence of 8 s); m1 bootstraps, m2 and m3
# join it. yardctl and the agents list all three. The master faults are the leader's kill -9
# (restarted as a follower once writes are accepted again), a follower's kill -9, the leader
# SIGSTOPped for 3 s (it must step down), the leader's raft traffic cut both ways for 3-5 s
# (packet filter rules in namespace A: it must step down and acknowledge nothing, the others
# accept writes within 5 s, and it follows again once the cut ends), a full disk on one master
# (each master has its own tmpfs: it stops, naming the disk, and is started again once there is
# room), and a follower's data directory lost (cluster remove,
# wiped, joined again: it must get the store and every archived log the leader held); the
# agent faults are today's. Added checks: writes
# accepted again within 5 s of every leader kill; no two masters led in one term; every
# master's store holds every acknowledged job, once; no replica fenced while only masters failed.
# kill -9 hits any agent for short and long pauses: a dead agent's host replicas are fenced
# by their yard-shim, its containers by their yard-shim guard (docs/shim.md).
#
# The parts: cluster.py (settings, temp directory, processes), workload.py (the jobs), faults.py
# (the fault injectors) and checks.py (the monitor and the invariants).
import os, random, signal, sys, threading, time, traceback

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402 (first: it reads the command line and makes the temp directory)
from checks import (FenceWatch, Monitor, check_failovers, check_fences, check_final, check_leftovers,  # noqa: E402
                    check_overlaps, check_stores, check_terms, read_records, replacement_times, selftest)
from cluster import (DURATION, HA, MASTER_NAMES, MODE, SEED, cleanup, dump_logs, fail, fails, findings, leader, link,  # noqa: E402
                     procs, records, rss, say, setup_containers, setup_master_disk, setup_network, start_agent,
                     start_master, start_masters, tmp, yardctl, yjson)
from faults import Faults  # noqa: E402
from workload import Workload  # noqa: E402


def main():
    say("chaos suite: seed %d, %s mode, %.0f s of faults (CHAOS_SEED=%d CHAOS_DURATION=%.0f%s reproduces it); temp %s"
        % (SEED, MODE, DURATION, SEED, DURATION, " CHAOS_MASTERS=3" if HA else "", tmp))
    selftest()
    setup_network()
    setup_master_disk()
    cluster.raft_cuts = cluster.setup_raft_cut()
    cluster.use_containers = setup_containers()
    if HA:
        if not start_masters():
            fail("the three masters did not start")
            return
    elif not start_master():
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
    if cluster.use_containers:
        r = yardctl("dataset", "create", "chaosrec", "--path", records, "--read-write")
        if r.returncode != 0:
            fail("dataset create: " + r.stderr)
    say("cluster up: %s, 3 agents (agent 3 behind the veth)%s" % (
        "masters m1 m2 m3 (%s leads)" % leader() if HA else "master", ", containerd" if cluster.use_containers else ""))

    rng = random.Random(SEED)
    workload = Workload(random.Random(rng.random()))
    faults = Faults(random.Random(rng.random()))
    monitor = Monitor(workload)
    threads = [threading.Thread(target=workload.run, daemon=True), threading.Thread(target=monitor.run, daemon=True)]
    watch = FenceWatch()
    if HA:
        threads.append(threading.Thread(target=watch.run, daemon=True))
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
    if HA:
        check_stores(workload)
        say("masters' RSS after the drain: %s" % ", ".join("%s %.1f MiB" % (m, rss(procs[m].pid) / 1024) for m in MASTER_NAMES))
    else:
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
    if HA:
        watch.stop.set()
        threads[2].join()
        check_fences(watch, faults)
        check_failovers(faults)
        check_terms()
    fl = ["RSS %.1f -> %.1f MiB" % (b / 1024, u / 1024) for b, u, _ in faults.flood_numbers]
    say("summary: seed %d, %d faults (%s), %d jobs, worst overlap %d ms, re-placed after %s, flood %s%s" % (
        SEED, len(faults.log), ", ".join(sorted(set(k for k, *_ in faults.log))), len(workload.acked), worst,
        "; ".join("%s max %d ms" % (w, max(d)) for w, _, d in times) or "-", "; ".join(fl) or "-",
        ", writes accepted again %s ms after losing a leader" % "/".join("%d" % x for x in faults.failovers) if HA else ""))
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
