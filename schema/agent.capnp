# The agent API (yard-agent <-> yard-master), framed like the client API (common/wire).
# One AgentRequest frame, one AgentResponse frame with the same id. Every request carries
# the join token; the master checks it before it looks at anything else and, when it does
# not match, answers `error` and closes the connection without changing any state.
#
# Convergence (docs/design.md §3, "Agents converge"): each heartbeat reports what the agent runs
# (replica id + attempt + state + usage); the answer is what it should run. The agent
# starts and stops replicas to match the answer.
@0x93e51e183443bcbd;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::agentapi");

using Common = import "common.capnp";
using Job = import "job.capnp";
using Lifecycle = import "lifecycle.capnp";

struct AgentRequest {
  id @0 :UInt64;
  union {
    register @1 :Register;
    heartbeat @2 :Heartbeat;
    archiveLog @3 :ArchiveLog;
    join @4 :Join;
  }
}

# TLS bootstrap (docs/security.md, "Agent bootstrap"): an agent without a node certificate
# connects (verifying the master against its --ca or --ca-fingerprint), proves it holds a join
# token and sends a CSR for a key it generated; the master answers `joined` with a node
# certificate (CN "node:NAME") signed by the cluster CA. Every other request needs that
# certificate, and is accepted only about the node it names.
struct Join {
  token @0 :Text;
  node @1 :Text;                 # the name the certificate will carry
  csrPem @2 :Text;
  address @3 :Text;              # the node's address (a subjectAltName of its certificate)
}

struct Joined {
  certPem @0 :Text;
  caPem @1 :Text;
}

# Sent when the agent starts (and again whenever it wants to update what it advertises).
# Registering a name that is already known updates its address and capacity and keeps the
# admin's drain flag.
struct Register {
  token @0 :Text;
  # name, address, capacity, gpus, labels, portRange, drivers, agentVersion, vmRuntime.
  # `state` is ignored: the master decides a node's state.
  node @1 :Common.Node;
  # The first registration of an agent process whose predecessor on this node stopped on
  # SIGTERM/SIGINT (a planned restart, not a lost connection): it does not count toward the
  # node being shown "unstable" (docs/master.md).
  afterPlannedStop @2 :Bool;
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
  legacyState @2 :Text;          # unused: the state's text before `state` (@7) was typed
  exitCode @3 :Int32;            # meaningful once Exited
  reason @4 :Text;               # for people only: no decision reads it
  cpuMillisUsed @5 :Int64;       # recent usage, millicores
  memoryBytesUsed @6 :Int64;
  state @7 :Lifecycle.ReplicaState;  # starting | running | exited | killed | oomKilled | lost
  cause @8 :Lifecycle.EndCause;      # why it ended (none while it lives)
  signal @9 :Int32;                  # cause `signal`: which one
  workerRestarts @10 :Int32;         # elastic PyTorch: torchrun's worker-group restarts so far
                                     # in this attempt, counted from its output (docs/wiring.md)
}

# One piece of an ended replica attempt's output for the master's log archive (docs/agent.md,
# "Logs outlive replicas"). Pieces go in order: `offset` is where `data` starts in the
# archived text, and offset 0 starts the log afresh (the first request, with no data, also
# asks for the master's bound). The master stores nothing unless the token is right and the
# attempt was placed on `node`; it answers `archived` or an error.
struct ArchiveLog {
  token @0 :Text;
  node @1 :Text;
  job @2 :Text;                  # the job's name (the spec's), to find the attempt
  replicaId @3 :Int64;
  attempt @4 :Int32;
  offset @5 :UInt64;
  data @6 :Data;                 # at most 1 MiB
  last @7 :Bool;                 # the log is complete with this piece
  times @8 :Text;                # with the last piece: the log's time marks on the archived
                                 # text (common/util/log_times.h)
}

struct AgentResponse {
  id @0 :UInt64;
  union {
    error @1 :Text;              # one line written for the person reading the agent's log
    registered @2 :Registered;
    desired @3 :Desired;
    archived @4 :LogArchived;    # the answer to archiveLog
    joined @5 :Joined;
    # Unsolicited, id 0, on the connection the agent registered or last heartbeat on (its
    # standing channel): the master has a change for this node; heartbeat now. Renews nothing:
    # only an answer to a request renews the replicas' lease.
    wake @6 :Void;
  }
  # The raft term of the master that answered (docs/ha.md); 0 = a single master. An agent
  # acts on no answer with a lower term than the highest it has seen: a deposed leader cannot
  # start or stop anything.
  term @7 :UInt64;
}

struct LogArchived {
  held @0 :UInt64;               # bytes of the log the master holds: the next piece's offset
  maxBytes @1 :UInt64;           # a longer log is sent as its last maxBytes, after a marker line
}

struct Registered {
  node @0 :Text;
  heartbeatIntervalMs @1 :UInt32;  # send a heartbeat this often
  # Fencing (docs/reliability.md): with no answer to any request for fenceTimeoutMs, counted
  # from when that request was sent, the agent stops all its replicas, SIGKILL at most
  # fenceGraceMs after SIGTERM; their yard-shims do the same on their own (leases). 0: no fencing.
  fenceTimeoutMs @2 :UInt32;
  fenceGraceMs @3 :UInt32;
}

# What the agent should run: every replica attempt not listed is stopped.
struct Desired {
  replicas @0 :List(DesiredReplica);
  # Specs travel only for attempts the agent does not hold yet, and at most about 4 MiB of
  # them per answer (docs/agent.md), so an answer never grows with the size of specs: an
  # attempt listed with `run` but no spec is sent again. true: some were held back; beat again
  # now for them.
  more @1 :Bool;
}

struct DesiredReplica {
  replicaId @0 :Int64;
  attempt @1 :Int32;
  # true: the attempt should run; the agent starts it when it has no such attempt (it never
  # starts an attempt again once it has ended). false: it has ended for the master (killed,
  # cleaned up, finished); the agent stops it if it still runs and keeps its logs, until
  # the attempt is no longer listed at all (retention over, job deleted): then it removes
  # the attempt's processes, cgroup and logs.
  run @2 :Bool;
  spec @3 :ReplicaSpec;           # set when `run`
  # Not `run` because the job was preempted (docs/scheduler.md, "Preemption"): before its stop
  # the agent writes the preemption notice the workload watches (YARD_PREEMPTED_FILE).
  preempted @4 :Bool;
  preemptedBy @5 :Text;           # who and why: "team-b/train-7 (reclaim)"
}

# Everything an agent needs to start one replica attempt; fixed when it was placed.
struct ReplicaSpec {
  job @0 :Text;
  task @1 :Text;
  role @2 :Text;
  index @3 :Int32;
  image @4 :Text;                 # "host" or an image reference
  argv @5 :List(Text);
  env @6 :List(Job.EnvVar);       # final: Yard's variables (docs/wiring.md) then the user's
  resources @7 :Common.Resources;
  gpus @8 :Text;                  # comma list of the node's GPU indexes assigned to it
  mounts @9 :List(HostMount);
  postStart @10 :List(Text);      # argv; empty = no hook
  preStop @11 :List(Text);
  workingDir @12 :Text;
  stopGraceMs @13 :UInt32;        # preStop + SIGTERM get this long before SIGKILL
  # Files the agent writes into the replica's directory before it starts (an OpenMPI
  # launcher's hostfile). Env values may name that directory as ${YARD_REPLICA_DIR} and the
  # agent's program directory as ${YARD_BIN_DIR}; the agent expands both.
  files @14 :List(SpecFile);
  vm @15 :Bool;                   # a `type: vm` job: run under the node's VM runtime
  # Who the replica runs as (docs/security.md): the job owner's mapped uid/gid. Host replicas
  # run as exactly this; -1 = not mapped (containers keep the image's user).
  runAsUid @16 :Int64 = -1;
  runAsGid @17 :Int64 = -1;
  owner @18 :Text;                # the job owner's user name (for logs and accounting)
  # Set by the agent, not the master (docs/topology.md): the CPUs and memory nodes of its GPUs'
  # NUMA node(s), its cgroup's cpuset; "" = not bound.
  cpus @19 :Text;
  mems @20 :Text;
}

struct SpecFile {
  name @0 :Text;                  # a plain file name
  content @1 :Text;
}

struct HostMount {
  hostPath @0 :Text;              # the dataset's path on the node
  path @1 :Text;                  # where the replica sees it
  readOnly @2 :Bool;
}

# The agent's own API, served on the node's address at `agentPort`: the master calls it to
# stream a replica's logs (yardctl logs). Framed like the other APIs; every call carries
# the join token and is refused without it.
struct AgentCall {
  id @0 :UInt64;
  token @1 :Text;
  union {
    logs @2 :LogsCall;
    wake @3 :Void;                # the master changed what this node should run: heartbeat now
    exec @4 :ExecCall;            # answered by output chunks, then exitCode (or one error)
    execInput @5 :ExecInputCall;  # for the exec on this connection; no answer of its own
  }
}

# Runs a command inside a running replica (its mount namespace, cgroup and environment),
# stdout and stderr streamed back: the platform's exec channel (OpenMPI's rsh agent). The
# command is killed when the connection closes.
struct ExecCall {
  replicaId @0 :Int64;
  attempt @1 :Int32;
  argv @2 :List(Text);
  # A user's command (yardctl exec, docs/exec.md); all unset for the exec channel. It runs in
  # the replica's working directory, in a session of its own (killed whole).
  userExec @3 :Bool;
  stdin @4 :Bool;                 # stdin comes in execInput calls; false: /dev/null
  tty @5 :Bool;                   # a new pty, its slave the command's controlling terminal
  rows @6 :UInt16;                # tty: the initial window size; 0 = not known
  cols @7 :UInt16;
  term @8 :Text;                  # tty: TERM added to the replica's environment
  outputWindow @9 :UInt32;        # > 0: at most this much output unreported by outputTaken; 0 = no limit
}

# More for the exec running on the same connection (userExec only).
struct ExecInputCall {
  union {
    data @0 :Data;                # for the command's stdin; answered by `inputTaken` once written
    closeStdin @1 :Void;          # close the command's stdin (tty: type the EOF character)
    resize @2 :ExecWindowSize;
    outputTaken @3 :UInt64;       # the client has written this many more bytes of output
  }
}

struct ExecWindowSize {
  rows @0 :UInt16;
  cols @1 :UInt16;
}

struct ExecOutput {
  stream @0 :UInt8;               # 1 stdout, 2 stderr
  data @1 :Data;
}

struct LogsCall {
  replicaId @0 :Int64;
  attempt @1 :Int32;
  follow @2 :Bool;                # keep streaming until the attempt ends
  tailLines @3 :Int64 = -1;       # only the last N lines; -1 = everything
  sinceMs @4 :Int64;              # only output written at or after this unix ms; 0 = all
}

# Answers to one call, all with its id: any number of `chunk`s (whole lines, except a last
# line without a newline), then `end`; or one `error`. A following stream sends an empty
# chunk every second or so while nothing new is written (so a relay notices a gone peer).
struct AgentCallResponse {
  id @0 :UInt64;
  union {
    error @1 :Text;
    chunk @2 :Data;
    end @3 :Void;                 # also the answer to `wake`
    output @4 :ExecOutput;
    exitCode @5 :Int32;           # the exec'd command ended: its code, 128+signal, 127 cannot run
    inputTaken @6 :UInt64;        # the exec'd command has taken this many more bytes of stdin
  }
}
