# Resource and node types shared by the job model, the scheduler and the agent protocol.
@0x95c2999ade15efc4;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::schema");

struct Resources {
  cpuMillis @0 :Int64;     # 1 core = 1000
  memoryBytes @1 :Int64;
  gpu @2 :Int64;           # whole GPUs
}

enum NodeState {
  ready @0;
  draining @1;             # runs what it has, takes nothing new
  down @2;                 # missed heartbeats
}

struct PortRange {
  lo @0 :UInt16;
  hi @1 :UInt16;
}

struct Gpu {
  index @0 :UInt32;
  uuid @1 :Text;
  model @2 :Text;
  memoryBytes @3 :UInt64;
}

struct Label {
  key @0 :Text;
  value @1 :Text;
}

struct Node {
  name @0 :Text;
  address @1 :Text;        # advertised address; what replicas bind and peers dial
  capacity @2 :Resources;
  gpus @3 :List(Gpu);
  labels @4 :List(Label);
  portRange @5 :PortRange;
  drivers @6 :List(Text);  # "host", "containerd"
  state @7 :NodeState;
  agentVersion @8 :Text;
  vmRuntime @9 :Text;      # containerd runtime for VM-isolated replicas (e.g. Kata); "" = none
  agentPort @10 :UInt16;   # the agent's own API (logs, exec) on `address`; 0 = none
  # How its GPUs are linked (docs/topology.md): the matrix as `nvidia-smi topo -m` prints it;
  # "" = not known. Simulated: from the agent's --gpu-topology-file, not from the hardware.
  gpuTopology @11 :Text;
  topologySimulated @12 :Bool;
}
