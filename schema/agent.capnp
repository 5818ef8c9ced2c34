# The agent API (yard-agent <-> yard-master), framed like the client API (common/wire).
# One AgentRequest frame, one AgentResponse frame with the same id. Every request carries
# the join token; the master checks it before it looks at anything else and, when it does
# not match, answers `error` and closes the connection without changing any state.
#
# Convergence (DESIGN.md §3, "Agents converge"): each heartbeat reports what the agent runs
# (replica id + attempt + state + usage); the answer is what it should run. The agent
# starts and stops replicas to match the answer.
@0x93e51e183443bcbd;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::agentapi");

using Common = import "common.capnp";

struct AgentRequest {
  id @0 :UInt64;
  union {
    register @1 :Register;
    heartbeat @2 :Heartbeat;
  }
}

# Sent when the agent starts (and again whenever it wants to update what it advertises).
# Registering a name that is already known updates its address and capacity and keeps the
# admin's drain flag.
struct Register {
  token @0 :Text;
  # name, address, capacity, gpus, labels, portRange, drivers, agentVersion, vmRuntime.
  # `state` is ignored: the master decides a node's state.
  node @1 :Common.Node;
}

struct Heartbeat {
  token @0 :Text;
  node @1 :Text;                 # the name it registered under
  replicas @2 :List(ReplicaStatus);
}

# One replica attempt as the agent sees it.
struct ReplicaStatus {
  replicaId @0 :Int64;
  attempt @1 :Int32;
  state @2 :Text;                # Starting | Running | Exited | Killed | OOMKilled | Lost
  exitCode @3 :Int32;            # meaningful once Exited
  reason @4 :Text;
  cpuMillisUsed @5 :Int64;       # recent usage, millicores
  memoryBytesUsed @6 :Int64;
}

struct AgentResponse {
  id @0 :UInt64;
  union {
    error @1 :Text;              # one line written for the person reading the agent's log
    registered @2 :Registered;
    desired @3 :Desired;
  }
}

struct Registered {
  node @0 :Text;
  heartbeatIntervalMs @1 :UInt32;  # send a heartbeat this often
}

# What the agent should run: every replica attempt not listed is stopped.
struct Desired {
  replicas @0 :List(DesiredReplica);
}

struct DesiredReplica {
  replicaId @0 :Int64;
  attempt @1 :Int32;
  # The agent issue adds what the agent needs to start it (image, argv, env, resources,
  # GPU indexes, ports, mounts) as fields @2 onwards.
}
