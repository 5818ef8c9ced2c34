#pragma once
// The environment Yard injects into a replica (docs/wiring.md), fixed when its gang is placed
// so that a restarted agent or master hands the replica exactly what its peers were told.
// This file has the variables every replica gets; each framework kind adds its own
// (master/frameworks/<kind>.cpp).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "master/store/records.h"
#include "schema/job.capnp.h"

namespace yard::master {

using Env = std::vector<std::pair<std::string, std::string>>;  // in order; names unique

// What wiring needs to know about the node a replica was placed on.
struct NodeWiring {
  std::string address;                     // advertised address
  std::map<uint32_t, std::string> gpuUuid;  // index -> UUID, when the agent reported them
};
using NodeWiringLookup = std::function<NodeWiring(const std::string& node)>;

// The injected variables of every replica of one placed gang (`gang`: the gang's records,
// all of one task attempt, with node, port, gpus and declaredPorts set), in gang order.
// `etcd`: the master's etcd endpoints (elastic rendezvous); `execEndpoint`: the client API
// address replicas reach the exec channel at (an OpenMPI launcher's yard-rsh), and `execCa` the
// cluster CA's fingerprint ("sha256:...") yard-rsh verifies the master with (one line, as an
// environment variable must be).
std::vector<Env> gangEnv(const std::string& job, schema::Task::Reader task,
                         const std::vector<const store::ReplicaRecord*>& gang, const NodeWiringLookup& nodes,
                         const std::vector<std::string>& etcd = {}, const std::string& execEndpoint = "",
                         const std::string& execCa = "");

// The OpenMPI hostfile of a launcher: one `<addr> slots=N` line per worker node, in worker
// index order (workers sharing a node add up their slots), from the worker list fixed in its
// environment (YARD_HOSTS_WORKER).
std::string mpiHostfile(const Env& launcherEnv, int64_t slotsPerWorker);

// YARD_PORT_<NAME>: upper case, '-' becomes '_'.
std::string portVariable(const std::string& portName);

// The store keeps the injected env as `NAME=value` lines (values never hold a newline:
// they are addresses, ports, lists and one-line JSON).
std::string encodeEnv(const Env& env);
Env decodeEnv(const std::string& text);
// What a replica is started with: Yard's variables fixed at placement, then the container's
// `env` (a user value of the same name wins).
Env replicaEnv(const store::ReplicaRecord& replica, schema::Container::Reader container);
// Sets `name` in `env` (replacing an earlier value).
void setEnv(Env& env, const std::string& name, const std::string& value);

}  // namespace yard::master
