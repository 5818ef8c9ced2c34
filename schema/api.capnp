# The client API (yardctl <-> yard-master). One Request frame, one Response frame with the
# same id. Every refusal is an Error whose message is one line written for the user.
@0x8ddc5e6e38ca1e04;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::api");

using Common = import "common.capnp";
using Job = import "job.capnp";

enum QueueState {
  running @0;    # accepts and dispatches
  closed @1;     # rejects new jobs; queued and running work continues
  stopped @2;    # rejects new jobs and dispatches nothing; running work continues
}

enum Placement {
  binpack @0;
  spread @1;
}

struct Queue {
  name @0 :Text;
  state @1 :QueueState;
  quota @2 :Common.Resources;
  maxRunningJobs @3 :Int64;    # 0 = no limit
  weight @4 :Float64 = 1.0;
  placement @5 :Placement;
  # Read-only, filled by the master:
  used @6 :Common.Resources;
  runningJobs @7 :Int64;
  queuedJobs @8 :Int64;
  createdAt @9 :Int64;         # unix ms
}

# Which fields of a queue update to apply.
struct QueueUpdate {
  name @0 :Text;
  setQuotaCpu @1 :Bool;
  setQuotaMemory @2 :Bool;
  setQuotaGpu @3 :Bool;
  setMaxRunningJobs @4 :Bool;
  setWeight @5 :Bool;
  setPlacement @6 :Bool;
  setState @7 :Bool;
  values @8 :Queue;
}

struct Dataset {
  name @0 :Text;
  path @1 :Text;
  readOnly @2 :Bool = true;
  createdAt @3 :Int64;
}

struct Error {
  message @0 :Text;
}

struct Request {
  id @0 :UInt64;
  union {
    ping @1 :Void;
    queueCreate @2 :Queue;
    queueUpdate @3 :QueueUpdate;
    queueDelete @4 :Text;
    queueList @5 :Void;
    queueShow @6 :Text;
    datasetCreate @7 :Dataset;
    datasetDelete @8 :Text;
    datasetList @9 :Void;
    datasetShow @10 :Text;
  }
}

struct Response {
  id @0 :UInt64;
  union {
    error @1 :Error;
    pong @2 :Text;               # the master's version
    queue @3 :Queue;
    queues @4 :List(Queue);
    dataset @5 :Dataset;
    datasets @6 :List(Dataset);
    done @7 :Text;               # a one-line confirmation
  }
}
