# The job model of docs/design.md §2, as the spec loader produces it and as clients send it
# to the master. Values are normalised: quantities in base units (millicores, bytes),
# durations in seconds, command + args joined into one argv, defaults applied.
#
# Numeric fields a user writes are signed (Int64) on purpose: the validator, which runs
# on this message both in yardctl and in the master, must be able to see and name a
# negative or out-of-range value instead of having it wrapped by the wire type.
@0xbe48077585d5b865;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("yard::schema");

using Common = import "common.capnp";

enum JobType {
  training @0;
  vm @1;            # replicas run under a VM-isolated runtime (e.g. Kata)
}

enum TaskKind {
  containerJob @0;
  pytorch @1;
  tensorflow @2;
  paddle @3;
  openmpi @4;
}

enum TaskMode {
  none @0;          # kinds without modes (container-job, tensorflow, openmpi)
  masterWorker @1;  # pytorch
  elastic @2;       # pytorch, paddle
  ps @3;            # paddle: server + trainer
  collective @4;    # paddle: trainers only
}

enum Protocol {
  tcp @0;
  udp @1;
}

enum RestartPolicy {
  onFailure @0;     # restart the run in place
  never @1;         # a failed run is replaced by a new run, possibly elsewhere
}

enum Cleanup {
  running @0;       # stop replicas still running at task end; keep exited ones for retention
  none @1;          # stop and remove nothing
  all @2;           # stop and remove every replica at task end
}

enum ElasticBackend {
  c10d @0;
  etcd @1;
}

struct Port {
  name @0 :Text;
  port @1 :Int64;
  protocol @2 :Protocol;
}

struct EnvVar {
  name @0 :Text;
  value @1 :Text;
}

struct Mount {
  dataset @0 :Text;
  path @1 :Text;
  readOnly @2 :Bool = true;
}

struct Hook {
  exec @0 :List(Text);   # argv; empty = no hook
}

struct Container {
  image @0 :Text;        # an image reference, or "host" (run on the host OS)
  sizing :union {
    unset @1 :Void;      # neither resources nor flavor given (a validation error)
    resources @2 :Common.Resources;
    flavor @3 :Text;     # an admin-defined resource flavor
  }
  argv @4 :List(Text);   # command + args, joined
  postStart @5 :Hook;
  preStop @6 :Hook;
  ports @7 :List(Port);
  env @8 :List(EnvVar);
  mounts @9 :List(Mount);
  workingDir @10 :Text;  # empty = the image's (or, for host, the agent's replica dir)
  nodeSelector @11 :List(Common.Label);  # only nodes with all these labels; sorted by key
}

struct Role {
  name @0 :Text;         # master, worker, ps, chief, evaluator, server, trainer, launcher
  replicas @1 :Int64;
  container @2 :Container;
}

struct Advanced {
  retries @0 :Int64;             # whole-gang restarts after a failure
  maxLifetime @1 :Int64;         # seconds from first start; 0 = no limit
  retention @2 :Int64 = 86400;   # seconds finished replicas and logs are kept
  cleanup @3 :Cleanup;
}

struct Elastic {
  backend @0 :ElasticBackend;
  metric @1 :Text = "cpu";
  target @2 :Int64 = 80;         # % of the requested cpu
  minReplicas @3 :Int64 = 1;
  maxReplicas @4 :Int64 = 1;
  scaleTimeout @5 :Int64;        # seconds; 0 = no timeout
}

struct ContainerJob {
  completions @0 :Int64 = 1;
  parallelism @1 :Int64 = 1;
  timeout @2 :Int64;             # seconds per run; 0 = no timeout
  retries @3 :Int64;
  restartPolicy @4 :RestartPolicy;
  container @5 :Container;
}

struct Task {
  name @0 :Text;
  dependsOn @1 :List(Text);
  kind @2 :TaskKind;
  mode @3 :TaskMode;
  roles @4 :List(Role);          # in the order the spec lists them (empty for container-job)
  containerJob @5 :ContainerJob; # set for container-job only
  advanced @6 :Advanced;         # framework kinds
  hasElastic @7 :Bool;
  elastic @8 :Elastic;
  slotsPerWorker @9 :Int64 = 1;  # openmpi
  nprocPerNode @10 :Int64 = 1;   # pytorch
  evaluatorInCluster @11 :Bool;  # tensorflow: put the evaluator in TF_CONFIG's cluster
  topology @12 :TaskTopology;    # keep the gang within one domain of a cluster level (docs/topology.md)
}

# `topology: {required: rack}` or `{preferred: rack}`: a level of the master's
# [scheduler] topology_levels (a node label key; "host" is the node itself).
struct TaskTopology {
  mode @0 :TopologyMode;
  level @1 :Text;
}

enum TopologyMode {
  none @0;
  required @1;    # the whole gang within one domain of `level`, or it waits
  preferred @2;   # within one if one fits, falling back level by level, then anywhere
}

struct Job {
  name @0 :Text;
  type @1 :JobType;
  queue @2 :Text = "default";
  priority @3 :Int64;
  tasks @4 :List(Task);
  array @5 :JobArray;            # a job array: the master creates one job per index
  hold @6 :Bool;                 # submitted held: not scheduled until `yardctl job release`
  after @7 :List(JobAfter);      # runs once these jobs have ended as each condition says
}

# `after:` (docs/habits.md): Slurm's --dependency=afterok / afternotok / afterany.
struct JobAfter {
  job @0 :Text;
  condition @1 :AfterCondition;
}

enum AfterCondition {
  succeeded @0;
  failed @1;
  ended @2;
}

# `array:` at job level (docs/spec.md, "Job arrays"): `count: N` (indexes 0..N-1) or
# `range: "A-B[:S]"`; `maxRunning` caps how many members run at once (0: no cap). A member
# is the job `<name>-<index>` with the same spec; the master fills `member` in its copy.
struct JobArray {
  count @0 :Int32;
  range @1 :Text;
  maxRunning @2 :Int32;
  member @3 :ArrayMember;
}

struct ArrayMember {
  array @0 :Text;                # the array's name; empty: not a member
  index @1 :Int32;               # YARD_ARRAY_INDEX
  count @2 :Int32;               # YARD_ARRAY_COUNT: how many members the array has
}
