// The JSON the master's HTTP API answers: the same objects `yardctl -o json` prints
// (docs/yardctl.md). Times are unix milliseconds.

export interface ResourcesJson {
  cpuMillis: number;
  memoryBytes: number;
  gpu: number;
}

export interface User {
  name: string;
  admin: boolean;
  uid?: number;
  gid?: number;
  createdAt?: number;
}

export interface JobSummary {
  name: string;
  queue: string;
  owner: string;
  state: string;
  reason: string;
  priority: number;
  submittedAt: number;
  startedAt: number;
  finishedAt: number;
  tasksTotal: number;
  tasksDone: number;
  array?: string;
  arrayIndex?: number;
  // Hold and after (docs/http_api.md): a held job stays Queued until released; a job with
  // `after` waits (afterPending) until those jobs end as asked, or ends Skipped.
  held?: boolean;
  heldBy?: string;
  after?: AfterJson[];
  afterPending?: boolean;
  requeues?: number;
}

export interface AfterJson {
  job: string;
  condition: string; // succeeded | failed | ended
}

export interface JobList {
  items: JobSummary[];
  total: number;
  nextCursor: string | null;
}

export interface ReplicaJson {
  role: string;
  index: number;
  attempt: number;
  state: string;
  node: string;
  port: number;
  declaredPorts: string;
  gpus: string;
  gpuLinks?: string; // the worst link among its GPUs (docs/topology.md)
  exitCode: number;
  // Elastic PyTorch: torchrun's worker-group restarts in this attempt (docs/wiring.md).
  restarts: number;
  reason: string;
}

export interface ElasticJson {
  current: number;
  desired: number;
  min: number;
  max: number;
  target: number;
  utilisation: number | null;
  lastDecision: string;
  lastDecisionAt: number;
  nextDecisionAt: number;
  pending: boolean;
}

export interface TaskDetail {
  name: string;
  kind: string;
  mode: string;
  state: string;
  reason: string;
  attempt: number;
  dependsOn: string[];
  replicas: ReplicaJson[];
  elastic: ElasticJson | null;
  // topology: {required|preferred: LEVEL}, and the level's values its live replicas are in
  topology?: { required?: string; preferred?: string; domains: string[] } | null;
  // A container job's runs needed (0 for other kinds).
  completions?: number;
  restarts?: number;
}

export interface JobDetail {
  job: JobSummary;
  tasks: TaskDetail[];
}

export interface EventJson {
  at: number;
  task: string;
  replica: string;
  attempt: number;
  type: string;
  reason: string;
  job?: string;
}

export interface LogChunk {
  replica: string;
  text: string;
}

export interface LogsPage {
  chunks: LogChunk[];
  nextCursor: string | null;
  problems: string;
}

export interface UsageJson {
  task: string;
  role: string;
  index: number;
  attempt: number;
  node: string;
  state: string;
  requested: ResourcesJson;
  used: { cpuMillis: number; memoryBytes: number };
  sampledAt: number;
  cpuPercentOfRequest: number | null;
}

export interface QueueJson {
  name: string;
  state: string;
  quota: ResourcesJson;
  used: ResourcesJson;
  maxRunningJobs: number;
  weight: number;
  placement: string;
  runningJobs: number;
  queuedJobs: number;
  createdAt: number;
  allowHostTasks: boolean;
  grants: string[];
}

export interface NodeJson {
  name: string;
  address: string;
  state: string;
  drained: boolean;
  capacity: ResourcesJson;
  allocated: ResourcesJson;
  used?: ResourcesJson;
  portLo: number;
  portHi: number;
  drivers: string;
  vmRuntime: string;
  lastHeartbeat: number;
  agentVersion: string;
  replicas: number;
  // How its GPUs are linked (docs/topology.md); null when not known.
  topology?: GpuTopologyJson | null;
}

export interface GpuTopologyJson {
  simulated: boolean;
  gpus: number[];
  links: string[][]; // links[a][b]: NV#, PIX, PXB, PHB, NODE, SYS; X for itself
  numa: number[];
  cpus: string[];
}

export interface DatasetJson {
  name: string;
  path: string;
  readOnly: boolean;
  createdAt: number;
  grants: string[];
}

export interface SpecErrorJson {
  path: string;
  message: string;
}

export interface ValidateAnswer {
  valid: boolean;
  errors: SpecErrorJson[];
  spec?: unknown;
}

export interface SubmitAnswer {
  result: string;
  jobs: string[];
}

export interface TaskEventJson {
  job: string;
  task: string;
  state: string;
  reason: string;
  attempt: number;
}

// GET /api/v1/kinds: one descriptor per task kind, in palette order (docs/http_api.md). The
// console's palette, mode choices, role rules, new tasks and form fields all read it.
export interface RoleRuleJson {
  role: string;
  required: boolean; // a task in this mode must have the role
  min: number; // replicas when present
  max: number | null; // null: unbounded
}

export interface ModeJson {
  mode: string; // "" for a kind without modes (its one entry)
  default: boolean; // the mode a task without `mode` gets (the loader's default)
  elastic: boolean;
  roles: RoleRuleJson[]; // the roles the mode takes, in the order a person writes them
  rule: string; // an extra combination rule, in words ("" when none)
  success: string; // when a task of this kind and mode has succeeded, in words
}

export interface KindJson {
  kind: string;
  label: string;
  framework: boolean; // roles and `advanced`; else a container job
  fields: string[]; // the task-level keys the kind takes besides name, kind and dependsOn
  modes: ModeJson[];
}

export interface KindsJson {
  kinds: KindJson[];
}
