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
  allowHostTasks @10 :Bool;    # users' jobs may have host tasks (image: host) here; admin-set
  grants @11 :List(Text);      # read-only: users granted this queue (queue grant)
  # Cohorts (docs/scheduler.md, "Cohorts"): queues that lend each other idle quota.
  cohort @12 :Text;            # "" = none
  hasBorrowLimit @13 :Bool;    # false = no bound on borrowing
  borrowLimit @14 :Common.Resources;
  hasLendLimit @15 :Bool;      # false = all of the quota may be lent
  lendLimit @16 :Common.Resources;
  # Read-only: beyond the quota now; lent to the cohort's borrowers; what a gang could get now.
  borrowed @17 :Common.Resources;
  lent @18 :Common.Resources;
  available @19 :Common.Resources;
  # Read-only, fair share (docs/scheduler.md): its dominant share of past usage, decayed; and
  # the order queues take turns in, (dominant share of the ready nodes now + that) / weight.
  pastShare @20 :Float64;
  share @21 :Float64;
  # Preemption (docs/scheduler.md, "Preemption"): what its blocked head may stop.
  reclaim @22 :Text;                   # never | borrowed | any ("" = never)
  preemptLowerPriority @23 :Bool;
  minRuntimeMs @24 :Int64 = 300000;    # its jobs are not preempted before running this long
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
  setAllowHostTasks @9 :Bool;
  setCohort @10 :Bool;
  setBorrowLimit @11 :Bool;     # values.hasBorrowLimit false: remove the limit
  setLendLimit @12 :Bool;       # values.hasLendLimit false: remove the limit
  setReclaim @13 :Bool;
  setPreemptLowerPriority @14 :Bool;
  setMinRuntime @15 :Bool;
}

struct Dataset {
  name @0 :Text;
  path @1 :Text;
  readOnly @2 :Bool = true;
  createdAt @3 :Int64;
  grants @4 :List(Text);       # read-only: users (or "queue:Q") granted this dataset
}

struct JobFilter {
  queue @0 :Text;    # empty = every queue
  state @1 :Text;    # empty = every state (Queued, Running, Succeeded, Failed, Cancelled)
  array @2 :Text;    # only the members of this job array; empty = every job
  all @3 :Bool;      # every user's jobs (admins); false = the caller's own
  owner @4 :Text;    # only this user's jobs (admins); empty = see `all`
  # A page of the list (the HTTP API's job list): jobs whose name contains `nameContains`,
  # newest first when `newestFirst` (else in submission order), `limit` of them (0 = every
  # one) from `offset`. Response.total says how many matched before the cut.
  nameContains @5 :Text;
  newestFirst @6 :Bool;
  offset @7 :Int64;
  limit @8 :Int32;
}

struct JobSummary {
  name @0 :Text;
  queue @1 :Text;
  state @2 :Text;
  reason @3 :Text;
  priority @4 :Int64;
  submittedAt @5 :Int64;   # unix ms; 0 = not yet
  startedAt @6 :Int64;
  finishedAt @7 :Int64;
  tasksTotal @8 :Int32;
  tasksDone @9 :Int32;     # tasks in a final state
  array @10 :Text;         # a job array's member: the array's name (empty: not a member)
  arrayIndex @11 :Int32;   # and its index
  owner @12 :Text;         # the user who submitted it
  heldBy @13 :Text;        # yardctl job hold: who held it ("" = not held)
  after @14 :Text;         # its spec's after: "prep-data:succeeded,..." ("" = none)
  afterPending @15 :Bool;  # not all of them have ended as their conditions say yet
  requeues @16 :Int32;     # yardctl job requeue: how many times
  # Preemptions (docs/scheduler.md, "Preemption"): how many times; the last one's preemptor
  # and why ("team-b/train-7 (reclaim)"), at preemptedAt (unix ms).
  preemptions @17 :Int32;
  preemptedBy @18 :Text;
  preemptedAt @19 :Int64;
}

struct ReplicaInfo {
  role @0 :Text;
  index @1 :Int32;
  attempt @2 :Int32;
  state @3 :Text;          # Placed, Starting, Running, Exited, Killed, OOMKilled, Lost
  node @4 :Text;
  port @5 :Int32;          # the replica's allocated port
  declaredPorts @6 :Text;  # "name=9100/TCP,..."
  gpus @7 :Text;           # comma list of GPU indexes
  exitCode @8 :Int32;
  reason @9 :Text;
  env @10 :List(Job.EnvVar);   # what it was started with: Yard's variables, then the user's
  restarts @11 :Int32;     # started again in the task's current life: a run's earlier attempts, a
                           # gang's restarts, plus torchrun's worker-group restarts (elastic PyTorch)
  gpuLinks @12 :Text;      # the worst link among its GPUs ("NV12", "PIX", "SYS"); "" = one GPU or not known
}

struct TaskInfo {
  name @0 :Text;
  kind @1 :Text;
  mode @2 :Text;
  state @3 :Text;          # Waiting, Queued, Starting, Running, Restarting, Succeeded, Failed, Cancelled, Skipped
  reason @4 :Text;         # why it is in that state; a queued task always has one
  attempt @5 :Int32;
  dependsOn @6 :List(Text);
  replicas @7 :List(ReplicaInfo);
  hasElastic @8 :Bool;     # an elastic task: `elastic` is filled
  elastic @9 :ElasticInfo;
  completions @10 :Int32;  # container-job: runs that must succeed (0 for other kinds)
  restarts @11 :Int32;     # the most restarts of any of its replicas (ReplicaInfo.restarts)
  topology @12 :Text;      # "required rack", "preferred rack"; "" = none (docs/topology.md)
  topologyDomains @13 :List(Text);  # the level's values its live replicas' nodes have ("r2")
}

# What the autoscaler holds of an elastic task (yardctl job show).
struct ElasticInfo {
  current @0 :Int32;             # workers live now
  desired @1 :Int32;             # the count the task is moving to
  min @2 :Int32;
  max @3 :Int32;
  targetPercent @4 :Float64;     # the spec's target, % of the requested cpu
  hasUtilisation @5 :Bool;       # false: nothing measured yet
  utilisationPercent @6 :Float64;  # the last measurement, % of the requested cpu
  lastDecision @7 :Text;         # "1 -> 2: cpu 92% above target 80%", or why nothing changed
  lastDecisionAt @8 :Int64;      # unix ms; 0 = none yet
  nextDecisionAt @9 :Int64;      # unix ms, the earliest the next one may come; 0 = none expected
  pending @10 :Bool;             # a scale-out has not finished
}

struct JobDetail {
  summary @0 :JobSummary;
  tasks @1 :List(TaskInfo);
  answeredAt @2 :Int64;    # the master's clock (unix ms), for "12s ago" whatever the client's clock says
}

# yardctl job scale: set the worker count of an elastic task.
struct JobScale {
  job @0 :Text;
  task @1 :Text;
  replicas @2 :Int32;
}

struct Event {
  at @0 :Int64;            # unix ms
  task @1 :Text;
  replica @2 :Text;        # role/index
  attempt @3 :Int32;
  type @4 :Text;
  reason @5 :Text;
}

struct NodeInfo {
  name @0 :Text;
  address @1 :Text;
  state @2 :Text;          # ready, draining, down
  drained @3 :Bool;
  capacity @4 :Common.Resources;
  allocated @5 :Common.Resources;
  portLo @6 :Int32;
  portHi @7 :Int32;
  drivers @8 :Text;
  vmRuntime @9 :Text;
  lastHeartbeat @10 :Int64;
  agentVersion @11 :Text;
  replicas @12 :Int32;     # live replicas placed on it
  used @13 :Common.Resources;  # what its replicas use now, as its agent last reported
  labels @14 :List(Common.Label);  # as the scheduler sees them: the agent's with the admin's changes
  # How its GPUs are linked (docs/topology.md): `nvidia-smi topo -m`'s matrix, "" = not known;
  # simulated: from its agent's --gpu-topology-file.
  gpuTopology @15 :Text;
  topologySimulated @16 :Bool;
}

# yardctl node label: set (hasValue) or remove labels of a node.
struct NodeLabel {
  node @0 :Text;
  changes @1 :List(LabelChange);
}

struct LabelChange {
  key @0 :Text;
  hasValue @1 :Bool;   # false: remove the key
  value @2 :Text;
}

# One replica attempt's resources: requested, and used as its agent last sampled them.
struct ReplicaUsage {
  task @0 :Text;
  role @1 :Text;
  index @2 :Int32;
  attempt @3 :Int32;
  node @4 :Text;
  state @5 :Text;
  requested @6 :Common.Resources;
  used @7 :Common.Resources;
  sampledAt @8 :Int64;     # unix ms; 0 = no sample yet
}

struct LogsQuery {
  job @0 :Text;
  task @1 :Text;           # empty = every task
  role @2 :Text;           # empty = every role
  index @3 :Int32 = -1;    # -1 = every index
  attempt @4 :Int32 = -1;  # -1 = the latest attempt of each replica
  follow @5 :Bool;
  tailLines @6 :Int64 = -1;
  sinceMs @7 :Int64;       # only output written at or after this unix ms (--since); 0 = all
}

# From inside a replica (yard-rsh, OpenMPI's rsh agent): run `argv` in a replica of the same
# task attempt on node `host`. The caller proves who it is with the exec token Yard put in
# its environment (YARD_EXEC_TOKEN); only an OpenMPI launcher has one, and it reaches only its
# own task's workers.
struct ExecRequest {
  token @0 :Text;
  job @1 :Text;
  task @2 :Text;
  role @3 :Text;           # the caller's role, index and attempt
  index @4 :Int32;
  attempt @5 :Int32;
  host @6 :Text;           # the target's node address or name
  argv @7 :List(Text);
}

struct ExecOutput {
  stream @0 :UInt8;        # 1 stdout, 2 stderr
  data @1 :Data;
}

# yardctl exec (docs/exec.md): run `argv` in one replica of a job, as `kubectl exec` runs a
# command in a pod. The master picks the replica: `task` may be empty when the job has one
# task, an empty `role` is the task's first role; the newest attempt of role/index, which
# must be Running. Answered by execOutput frames (and execInputTaken while the client sends
# stdin), then execExit; or one error.
struct UserExecRequest {
  job @0 :Text;
  task @1 :Text;
  role @2 :Text;
  index @3 :Int32;
  argv @4 :List(Text);
  stdin @5 :Bool;          # the client sends stdin in execInput frames; false: the command's stdin is /dev/null
  tty @6 :Bool;            # a pty as the command's controlling terminal; all output comes as stream 1
  rows @7 :UInt16;         # tty: the client's terminal size; 0 = not known
  cols @8 :UInt16;
  term @9 :Text;           # tty: TERM for the command; empty = not set
}

# Client -> master: more for the userExec in progress on the same connection (request
# `exec`). It has no answer of its own; one for an exec that has ended is dropped.
# Flow control both ways: the client keeps at most execInputWindow bytes of `data` sent
# and not yet reported by execInputTaken, and reports the output it has written with
# `outputTaken`; the agent stops reading the command's output while execOutputWindow
# bytes of it are unreported.
struct ExecInput {
  exec @0 :UInt64;
  union {
    data @1 :Data;               # bytes for the command's stdin, at most execInputFrameBytes
    closeStdin @2 :Void;         # no more stdin: the command's stdin is closed (tty: ^D is typed)
    resize @3 :WindowSize;       # tty: the client's terminal changed size
    outputTaken @4 :UInt64;      # the client has written this many more bytes of execOutput data
  }
}

struct WindowSize {
  rows @0 :UInt16;
  cols @1 :UInt16;
}

const execInputWindow :UInt32 = 262144;       # 256 KiB
const execInputFrameBytes :UInt32 = 32768;    # 32 KiB
const execOutputWindow :UInt32 = 1048576;     # 1 MiB

# Log output of one replica attempt: whole lines, labelled `task/role/index`.
struct LogChunk {
  replica @0 :Text;
  data @1 :Data;
}

struct Error {
  message @0 :Text;
  # A master of several that is not the leader answers every request so: `leader` is the
  # leader's client API address when it knows one (docs/ha.md); clients send it there.
  leader @1 :Text;
}

# The masters of a highly available cluster (docs/ha.md): `yardctl cluster status`.
struct ClusterMember {
  name @0 :Text;
  raftId @1 :UInt64;
  raftAddress @2 :Text;
  clientAddress @3 :Text;     # empty when the member did not answer
  agentAddress @4 :Text;
  role @5 :Text;              # leader, follower, candidate, unavailable; "unreachable" when it did not answer
  voter @6 :Text;             # voter, standby or spare (raft's membership role)
  term @7 :UInt64;
  appliedIndex @8 :UInt64;    # the last log entry its store holds
  lastContactMs @9 :Int64;    # how long ago the leader last heard from it; -1 = unknown
  version @10 :Text;          # its yard-master version; "" when it did not say (unreachable, or older)
  schemaVersion @11 :UInt32;  # the store schema version it runs (master/store/schema.h); 0 = unknown
}

struct ClusterInfo {
  members @0 :List(ClusterMember);
  term @1 :UInt64;            # the leader's term
  commitIndex @2 :UInt64;     # the leader's commit index
  single @3 :Bool;            # one master without raft: members is this master alone
  answeredBy @4 :Text;        # the name of the master that answered
  # Answered by a master that does not lead (clusterStatusStale): term and commitIndex are its
  # own, lastContactMs is when it last heard each member (the leader's appends), -1 for never.
  stale @5 :Bool;
}

struct EventFeedRequest {
  job @0 :Text;       # "" = every job the caller may see
  after @1 :Text;     # the last item's id the caller holds (SSE Last-Event-ID); "" = none
}

struct FeedItem {
  id @0 :Text;        # the SSE id
  type @1 :Text;      # hello, reset, job, task, event, deleted (docs/http_api.md)
  data @2 :Text;      # one line of JSON
}

# Users, API tokens and join tokens (docs/security.md).
struct UserSpec {
  name @0 :Text;
  admin @1 :Bool;
  uid @2 :Int64 = -1;      # host tasks run as this uid/gid; -1 = not mapped (no host tasks)
  gid @3 :Int64 = -1;
}

struct UserInfo {
  name @0 :Text;
  admin @1 :Bool;
  uid @2 :Int64 = -1;
  gid @3 :Int64 = -1;
  createdAt @4 :Int64;
  tokens @5 :Int32;        # live API tokens
}

struct TokenCreate {
  user @0 :Text;           # API token: its user; join token: empty
  ttlSeconds @1 :Int64;    # 0 = never expires (API tokens); join tokens default to 24 h
  uses @2 :Int32;          # join tokens: how many agents may join with it; 0 = unlimited
  description @3 :Text;
}

struct TokenInfo {
  id @0 :Text;             # public id (the secret's first characters); what revoke takes
  kind @1 :Text;           # "api" | "join"
  user @2 :Text;
  createdAt @3 :Int64;
  expiresAt @4 :Int64;     # 0 = never
  usesLeft @5 :Int32;      # join tokens; -1 = unlimited
  revoked @6 :Bool;
  description @7 :Text;
  lastUsedAt @8 :Int64;
}

# Returned once, when a token is created: the secret is not stored and cannot be shown again.
struct SecretIssued {
  id @0 :Text;
  secret @1 :Text;
  expiresAt @2 :Int64;
}

struct Grant {
  object @0 :Text;         # queue or dataset name
  user @1 :Text;
}

struct AuditQuery {
  user @0 :Text;           # empty = every user
  since @1 :Int64;         # unix ms; 0 = from the start
  until @2 :Int64;         # 0 = now
  limit @3 :Int32;         # 0 = the master's default (1000), newest last
}

struct AuditRecord {
  at @0 :Int64;
  user @1 :Text;           # empty = unauthenticated
  source @2 :Text;         # the peer's address
  request @3 :Text;        # e.g. "job.submit"
  target @4 :Text;         # the object named (job, queue, user, ...)
  outcome @5 :Text;        # "ok" | "refused" | "failed"
  message @6 :Text;        # the refusal or error text
}

struct UsageQuery {
  by @0 :Text;             # "user" | "queue" | "job"
  since @1 :Int64;         # unix ms; 0 = from the start
  until @2 :Int64;         # 0 = now
  user @3 :Text;           # admins: only this user; users always get their own
}

struct UsageRow {
  key @0 :Text;            # the user, queue or job
  jobs @1 :Int64;
  coreSeconds @2 :Float64;
  memoryGibSeconds @3 :Float64;
  gpuSeconds @4 :Float64;
  wallSeconds @5 :Float64;
  user @6 :Text;           # by job: its owner and queue
  queue @7 :Text;
}

struct Request {
  id @0 :UInt64;
  # The caller's API token (docs/security.md); empty = anonymous, which only `ping` may be.
  # Every request carries it, so each is authorized on its own (no connection state).
  token @29 :Text;
  # The browser's address when the request comes through the master's HTTP API, for the audit
  # trail; honoured only on a connection presenting the master's own certificate.
  forwardedFor @46 :Text;
  # Set by a client that may send this request again (yardctl, on its job changes: submit,
  # cancel, delete, hold, release, requeue, scale), unique per request (16 random bytes, hex).
  # A master that already made the change answers what it answered then and makes nothing
  # again, so a request resent after a failover is made once (docs/ha.md).
  requestId @53 :Text;
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
    jobSubmit @11 :Job.Job;   # normalised and validated by yardctl; the master validates again
    jobList @12 :JobFilter;
    jobShow @13 :Text;
    jobEvents @14 :Text;
    jobCancel @15 :Text;
    jobDelete @16 :Text;
    nodeList @17 :Void;
    nodeShow @18 :Text;
    nodeDrain @19 :Text;
    nodeUndrain @20 :Text;
    logs @21 :LogsQuery;       # answered by logChunk frames, then logEnd (or one error)
    jobTop @22 :Text;
    nodeTop @23 :Void;         # answered by `nodes` with `used` filled
    exec @24 :ExecRequest;     # answered by execOutput frames, then execExit (or one error)
    jobScale @25 :JobScale;    # answered by `done` once committed
    userExec @26 :UserExecRequest;  # answered by execOutput (and execInputTaken) frames, then execExit (or one error)
    execInput @27 :ExecInput;  # no answer
    jobSubmitAll @28 :List(Job.Job);  # several specs, all submitted or none; answered by `done` (a line each)
    userCreate @30 :UserSpec;          # admins; answered by `user`
    userList @31 :Void;                # admins; answered by `users`
    userDelete @32 :Text;              # admins; revokes the user's tokens; answered by `done`
    userTokenCreate @33 :TokenCreate;  # admins, or a user for themself; answered by `secret`
    userTokenList @34 :Text;           # a user's API tokens (empty = the caller's); answered by `tokens`
    tokenRevoke @35 :Text;             # an API or join token, by id; answered by `done`
    joinTokenCreate @36 :TokenCreate;  # admins; answered by `secret`
    joinTokenList @37 :Void;           # admins; answered by `tokens`
    queueGrant @38 :Grant;             # admins; answered by `done`
    queueRevoke @39 :Grant;
    datasetGrant @40 :Grant;
    datasetRevoke @41 :Grant;
    nodeDelete @42 :Text;              # admins; answered by `done`
    audit @43 :AuditQuery;             # admins; answered by `auditRecords`
    usage @44 :UsageQuery;             # answered by `usageRows`
    whoami @45 :Void;                  # answered by `user`
    nodeLabel @47 :NodeLabel;          # admins; answered by `node` once committed
    jobHold @48 :Text;                 # answered by `done` once committed
    jobRelease @49 :Text;
    jobRequeue @50 :Text;
    clusterStatus @51 :Void;           # answered by `cluster`
    clusterRemove @52 :Text;           # admins: a master by name, raft id or raft address; answered by `done`
    # Live updates for a follower's HTTP API (docs/ha.md): the leader's event feed, filtered to
    # what the caller may see; answered by a stream of `feedItem`, first `hello` (a new stream)
    # or `reset` (what it missed has left the feed) or the items it missed, until the
    # connection closes.
    eventFeed @54 :EventFeedRequest;
    # yardctl cluster status --stale (docs/ha.md, "When no master leads"): answered by `cluster`
    # by whichever master gets it, follower or leader, from its own view of the members, and
    # not redirected: what an operator can still ask when no master leads.
    clusterStatusStale @55 :Void;
  }
}

struct Response {
  id @0 :UInt64;
  total @25 :Int64;    # jobs: how many matched the filter before its offset and limit
  union {
    error @1 :Error;
    pong @2 :Text;               # the master's version
    queue @3 :Queue;
    queues @4 :List(Queue);
    dataset @5 :Dataset;
    datasets @6 :List(Dataset);
    done @7 :Text;               # a one-line confirmation
    job @8 :JobDetail;
    jobs @9 :List(JobSummary);
    events @10 :List(Event);
    nodes @11 :List(NodeInfo);
    node @12 :NodeInfo;
    logChunk @13 :LogChunk;
    logEnd @14 :Text;            # the stream is over; text says why when it ended early
    usage @15 :List(ReplicaUsage);
    execOutput @16 :ExecOutput;
    execExit @17 :Int32;
    execInputTaken @18 :UInt64;  # userExec: the command has taken this many more bytes of stdin
    user @19 :UserInfo;
    users @20 :List(UserInfo);
    secret @21 :SecretIssued;
    tokens @22 :List(TokenInfo);
    auditRecords @23 :List(AuditRecord);
    usageRows @24 :List(UsageRow);
    cluster @26 :ClusterInfo;
    feedItem @27 :FeedItem;
  }
}
