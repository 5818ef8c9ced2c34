#!/usr/bin/env bash
# Cluster levels end to end (docs/topology.md, "Cluster levels"): a master with
# [scheduler] topology_levels = ["block", "rack", "host"] and four agents labelled
#   node-1: rack r2, block b1     node-2, node-3: rack r1, block b1     node-4: rack r3, block b2
# each with 2 CPUs. Gangs of 1-CPU host replicas:
# - a level the master does not have is refused naming the field, the levels and the value;
# - required rack, 5 replicas: no rack can ever hold it; skipped with the reason, not blocking;
# - required rack, 3 replicas: only r1 holds it; its replicas run on node-2 and node-3 only
#   (without the constraint binpack would take node-1 first);
#   job show says "Topology:   train required rack, in r1";
# - required rack, 2 replicas: one host holds it (the lowest level): both on one node;
# - required rack, 3 replicas when no rack has 3 CPUs free: waits, "no rack fits 3 replicas of
#   cpu 1, memory 64Mi: best r3 fits 2", and runs within one rack once r1 is free again;
# - preferred rack, 4 replicas when no rack or block has room: placed across racks.
bin=$1
source "$(dirname "$0")/cluster.sh"

printf '[scheduler]\ntopology_levels = ["block", "rack", "host"]\n' >>"$tmp/master.toml"
start_master --metrics-listen 127.0.0.1:0
start_agent 1 --cpu 2 --memory 1Gi --label rack=r2 --label block=b1
start_agent 2 --cpu 2 --memory 1Gi --label rack=r1 --label block=b1
start_agent 3 --cpu 2 --memory 1Gi --label rack=r1 --label block=b1
start_agent 4 --cpu 2 --memory 1Gi --label rack=r3 --label block=b2
wait_nodes 4

# gang FILE NAME REPLICAS TOPOLOGY: a TensorFlow task of REPLICAS 1-CPU host workers that run
# until told to stop.
gang() {
  cat >"$1" <<YAML
name: $2
tasks:
  - name: train
    kind: tensorflow
    topology: $4
    roles:
      worker:
        replicas: $3
        container:
          image: host
          command: [sh, -c, 'while [ ! -e $tmp/stop-$2 ]; do sleep 0.2; done']
          resources: { cpu: 1, memory: 64Mi }
YAML
}
nodes_of() { jshow "$1" '",".join(sorted(set(r["node"] for r in j["tasks"][0]["replicas"] if r["state"] == "Running")))'; }
reason_of() { jshow "$1" 'j["tasks"][0]["reason"]'; }
wait_reason() {  # wait_reason JOB TEXT
  for _ in $(seq 100); do [ "$(reason_of "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "$1 reason: '$(reason_of "$1")', want '$2'"
}
wait_running() {  # wait_running JOB COUNT: COUNT replicas running
  for _ in $(seq 150); do
    [ "$(jshow "$1" 'sum(r["state"] == "Running" for r in j["tasks"][0]["replicas"])')" = "$2" ] && return 0
    sleep 0.2
  done
  fail "$1: fewer than $2 replicas running: $("$bin/yardctl" job show "$1")"
}

say "a level this master does not have is refused, naming the field, the levels and the value"
gang "$tmp/zone.yaml" topo-zone 2 '{ required: zone }'
out=$("$bin/yardctl" job submit "$tmp/zone.yaml" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q 'tasks\[0\].topology.required: level zone is not one of this master'"'"'s topology levels (block, rack, host)' ||
  fail "zone: rc $rc: $out"
gang "$tmp/both.yaml" topo-both 2 '{ required: rack, preferred: rack }'
out=$("$bin/yardctl" job submit "$tmp/both.yaml" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q 'tasks\[0\].topology: give one of required or preferred, not both' || fail "both: rc $rc: $out"

say "a gang no rack can ever hold is skipped with its reason, and blocks nothing"
gang "$tmp/never.yaml" topo-never 5 '{ required: rack }'
submit "$tmp/never.yaml"
wait_reason topo-never "no rack can ever fit 5 replicas of cpu 1, memory 64Mi: the largest, r1, has cpu 4, memory 2Gi, gpu 0"

say "required rack: 3 replicas go to the one rack that holds them"
gang "$tmp/r3.yaml" topo-three 3 '{ required: rack }'
submit "$tmp/r3.yaml"
wait_running topo-three 3
[ "$(nodes_of topo-three)" = node-2,node-3 ] || fail "topo-three runs on $(nodes_of topo-three), want node-2,node-3 (rack r1)"
"$bin/yardctl" job show topo-three | grep -q '^Topology:   train required rack, in r1$' || fail "job show: $("$bin/yardctl" job show topo-three)"
[ "$(jshow topo-three 'j["tasks"][0]["topology"]')" = "{'required': 'rack', 'domains': ['r1']}" ] ||
  fail "topology JSON: $(jshow topo-three 'j["tasks"][0]["topology"]')"

say "required rack: 2 replicas that one host holds go to one host"
gang "$tmp/h2.yaml" topo-host 2 '{ required: rack }'
submit "$tmp/h2.yaml"
wait_running topo-host 2
case "$(nodes_of topo-host)" in node-1|node-4) ;; *) fail "topo-host runs on $(nodes_of topo-host), want one node (node-1 or node-4)" ;; esac
free_rack=r3; [ "$(nodes_of topo-host)" = node-4 ] && free_rack=r2

say "required rack: waits while no rack has room, with the closest rack in its reason"
gang "$tmp/w3.yaml" topo-wait 3 '{ required: rack }'
submit "$tmp/w3.yaml"
wait_reason topo-wait "no rack fits 3 replicas of cpu 1, memory 64Mi: best $free_rack fits 2"
[ "$(jshow topo-wait 'len([r for r in j["tasks"][0]["replicas"] if r["state"] == "Running"])')" = 0 ] || fail "topo-wait started in part"
touch "$tmp/stop-topo-three"
wait_job topo-three Succeeded 30
wait_running topo-wait 3
[ "$(nodes_of topo-wait)" = node-2,node-3 ] || fail "topo-wait runs on $(nodes_of topo-wait), want node-2,node-3 (rack r1)"

say "preferred rack: no rack or block has room for 4, so it goes across racks"
"$bin/yardctl" job cancel topo-never >/dev/null
touch "$tmp/stop-topo-host"
wait_job topo-host Succeeded 30
touch "$tmp/stop-topo-wait"
wait_job topo-wait Succeeded 30
gang "$tmp/fill.yaml" topo-fill 3 '{ required: rack }'  # r1 (2 nodes, 4 CPUs): 3 of them
submit "$tmp/fill.yaml"
wait_running topo-fill 3
[ "$(nodes_of topo-fill)" = node-2,node-3 ] || fail "topo-fill runs on $(nodes_of topo-fill)"
gang "$tmp/p4.yaml" topo-pref 4 '{ preferred: rack }'  # free: 1 in r1, 2 in r2, 2 in r3
submit "$tmp/p4.yaml"
wait_running topo-pref 4
racks=$(jshow topo-pref '",".join(j["tasks"][0]["topology"]["domains"])')
case "$racks" in r1,r2,r3|r2,r3|r1,r2|r1,r3) ;; *) fail "topo-pref is in racks '$racks', want more than one" ;; esac
"$bin/yardctl" job show topo-pref | grep -q '^Topology:   train preferred rack, in r' || fail "job show: $("$bin/yardctl" job show topo-pref)"

for j in topo-fill topo-pref; do touch "$tmp/stop-$j"; done
for j in topo-fill topo-pref; do wait_job "$j" Succeeded 30; done
for j in topo-three topo-host topo-wait topo-fill topo-pref topo-never; do "$bin/yardctl" job delete $j >/dev/null; done
for _ in $(seq 100); do [ -z "$(find "$tmp"/agent[1-4]/replicas -mindepth 1 -maxdepth 1 2>/dev/null)" ] && break; sleep 0.1; done
no_leftovers
finish e2e.topology_levels
