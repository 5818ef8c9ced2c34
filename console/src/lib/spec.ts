// The job spec as the console edits it: a plain object with exactly the keys and shapes of
// the YAML spec (docs/spec.md, docs/design.md §2), so that YAML import/export and the JSON
// sent to /api/v1/validate and /api/v1/jobs are the same object. Keys the form does not
// know (say a typo from an imported file) are kept, so the validator can name them.

export type Scalar = string | number;
export type Words = string | string[];

export interface Resources {
  cpu?: Scalar;
  memory?: Scalar;
  gpu?: Scalar;
}
export interface Hook {
  exec?: Words;
}
export interface Port {
  name?: string;
  port?: Scalar;
  protocol?: string;
}
export interface EnvVar {
  name?: string;
  value?: Scalar;
}
export interface Mount {
  dataset?: string;
  path?: string;
  readOnly?: boolean;
}
export interface Container {
  image?: string;
  resources?: Resources;
  flavor?: string;
  command?: Words;
  args?: Words;
  postStart?: Hook;
  preStop?: Hook;
  ports?: Port[];
  env?: EnvVar[];
  mounts?: Mount[];
  workingDir?: string;
}
export interface Role {
  replicas?: Scalar;
  container?: Container;
}
export interface Advanced {
  retries?: Scalar;
  maxLifetime?: Scalar;
  retention?: Scalar;
  cleanup?: string;
}
export interface Elastic {
  backend?: string;
  metric?: string;
  target?: Scalar;
  minReplicas?: Scalar;
  maxReplicas?: Scalar;
  scaleTimeout?: Scalar;
}
export interface TaskSpec {
  name?: string;
  kind?: string;
  dependsOn?: string[];
  // framework kinds
  mode?: string;
  roles?: Record<string, Role>;
  advanced?: Advanced;
  elastic?: Elastic;
  nprocPerNode?: Scalar;
  slotsPerWorker?: Scalar;
  evaluatorInCluster?: boolean;
  // container-job
  completions?: Scalar;
  parallelism?: Scalar;
  timeout?: Scalar;
  retries?: Scalar;
  restartPolicy?: string;
  container?: Container;
}
export interface JobArraySpec {
  count?: Scalar;
  range?: string;
  maxRunning?: Scalar;
}
export interface JobSpec {
  name?: string;
  type?: string;
  queue?: string;
  priority?: Scalar;
  array?: JobArraySpec;
  tasks: TaskSpec[];
}

export type Kind = 'container-job' | 'pytorch' | 'tensorflow' | 'paddle' | 'openmpi';

export interface KindInfo {
  kind: Kind;
  label: string;
  modes: string[]; // empty: the kind has no mode
}

// The five kinds of the palette, with the labels the product uses.
export const KINDS: KindInfo[] = [
  { kind: 'openmpi', label: 'OpenMPI', modes: [] },
  { kind: 'tensorflow', label: 'TensorFlow', modes: [] },
  { kind: 'pytorch', label: 'PyTorch', modes: ['master-worker', 'elastic'] },
  { kind: 'paddle', label: 'PaddlePaddle', modes: ['ps', 'collective', 'elastic'] },
  { kind: 'container-job', label: 'Container-Job', modes: [] },
];

export function kindInfo(kind: string | undefined): KindInfo | undefined {
  return KINDS.find((k) => k.kind === kind);
}

export const FRAMEWORK_KINDS = ['pytorch', 'tensorflow', 'paddle', 'openmpi'];

export function isFramework(task: TaskSpec): boolean {
  return FRAMEWORK_KINDS.includes(task.kind ?? '');
}

// The mode the loader uses when the spec gives none (docs/spec.md, "Defaults").
export function effectiveMode(task: TaskSpec): string {
  if (task.mode) return task.mode;
  if (task.kind === 'pytorch') return 'master-worker';
  if (task.kind === 'paddle') return task.roles && 'server' in task.roles ? 'ps' : 'collective';
  return '';
}

export function isElastic(task: TaskSpec): boolean {
  return effectiveMode(task) === 'elastic';
}

export interface RoleRules {
  allowed: string[]; // in the order the form offers them
  required: string[];
}

// Which roles a kind and mode take (docs/design.md §2, "Task kinds and roles").
export function roleRules(kind: string | undefined, mode: string): RoleRules {
  switch (kind) {
    case 'pytorch':
      return mode === 'elastic'
        ? { allowed: ['worker'], required: ['worker'] }
        : { allowed: ['master', 'worker'], required: ['master'] };
    case 'tensorflow':
      return { allowed: ['ps', 'chief', 'worker', 'evaluator'], required: ['worker'] };
    case 'paddle':
      return mode === 'ps'
        ? { allowed: ['server', 'trainer'], required: ['server', 'trainer'] }
        : { allowed: ['trainer'], required: ['trainer'] };
    case 'openmpi':
      return { allowed: ['launcher', 'worker'], required: ['launcher', 'worker'] };
    default:
      return { allowed: [], required: [] };
  }
}

export function defaultContainer(): Container {
  return {
    image: 'host',
    resources: { cpu: '500m', memory: '256Mi' },
    command: ['sh', '-c', 'echo hello from $YARD_ROLE $YARD_REPLICA_INDEX'],
  };
}

function defaultRole(replicas: number | undefined): Role {
  const role: Role = {};
  if (replicas !== undefined) role.replicas = replicas;
  role.container = defaultContainer();
  return role;
}

export function defaultElastic(kind: string | undefined): Elastic {
  return { backend: kind === 'paddle' ? 'etcd' : 'c10d', minReplicas: 1, maxReplicas: 2 };
}

// A new task of `kind` that passes validation as it is (the palette's drop).
export function newTask(kind: Kind, name: string): TaskSpec {
  switch (kind) {
    case 'container-job':
      return { name, kind, completions: 1, parallelism: 1, restartPolicy: 'OnFailure', container: defaultContainer() };
    case 'pytorch':
      return { name, kind, mode: 'master-worker', roles: { master: defaultRole(1), worker: defaultRole(1) } };
    case 'tensorflow':
      return { name, kind, roles: { worker: defaultRole(1) } };
    case 'paddle':
      return { name, kind, mode: 'collective', roles: { trainer: defaultRole(1) } };
    case 'openmpi':
      return {
        name,
        kind,
        slotsPerWorker: 1,
        roles: {
          launcher: { replicas: 1, container: { ...defaultContainer(), command: 'mpirun hostname' } },
          worker: { replicas: 1, container: { ...defaultContainer(), command: 'sleep infinity' } },
        },
        advanced: { cleanup: 'running' },
      };
  }
}

// The first container of a task, used to seed a role that is added.
function firstContainer(task: TaskSpec): Container {
  for (const r of Object.values(task.roles ?? {})) if (r?.container) return clone(r.container);
  return defaultContainer();
}

// Reshapes a framework task for a new mode: roles the mode does not take are dropped, the
// roles it requires are added (seeded from an existing container), `replicas` and `elastic`
// follow the elastic rule ("not used in elastic mode").
export function withMode(task: TaskSpec, mode: string): TaskSpec {
  const t: TaskSpec = clone(task);
  t.mode = mode;
  const rules = roleRules(t.kind, mode);
  const seed = firstContainer(t);
  const roles: Record<string, Role> = {};
  for (const [name, role] of Object.entries(t.roles ?? {})) if (rules.allowed.includes(name)) roles[name] = role;
  for (const name of rules.required) if (!roles[name]) roles[name] = { container: clone(seed) };
  for (const [name, role] of Object.entries(roles)) {
    if (mode === 'elastic') delete role.replicas;
    else if (role.replicas === undefined) role.replicas = 1;
    roles[name] = role;
  }
  // keep the allowed order
  t.roles = {};
  for (const name of rules.allowed) if (roles[name]) t.roles[name] = roles[name];
  if (mode === 'elastic') t.elastic = t.elastic ?? defaultElastic(t.kind);
  else delete t.elastic;
  return t;
}

// Changes a task's kind, keeping its name, dependencies and first container.
export function withKind(task: TaskSpec, kind: Kind): TaskSpec {
  const seed = task.container ?? firstContainer(task);
  const t = newTask(kind, task.name ?? '');
  if (task.dependsOn) t.dependsOn = [...task.dependsOn];
  if (t.container) t.container = clone(seed);
  for (const r of Object.values(t.roles ?? {})) if (r) r.container = clone(seed);
  return reorderTask(t);
}

// The key order a person writes: name, kind, dependsOn first.
const TASK_KEY_ORDER = ['name', 'kind', 'dependsOn', 'mode'];
export function reorderTask(t: TaskSpec): TaskSpec {
  const out: Record<string, unknown> = {};
  const src = t as Record<string, unknown>;
  for (const k of TASK_KEY_ORDER) if (src[k] !== undefined) out[k] = src[k];
  for (const k of Object.keys(src)) if (!(k in out) && src[k] !== undefined) out[k] = src[k];
  return out as TaskSpec;
}

// The key order a person writes a spec in (docs/design.md §2): what export uses, whatever
// order the form added keys in.
const JOB_KEY_ORDER = ['name', 'type', 'queue', 'priority', 'array', 'tasks'];
export function orderedSpec(spec: JobSpec): JobSpec {
  const out: Record<string, unknown> = {};
  const src = spec as unknown as Record<string, unknown>;
  for (const k of JOB_KEY_ORDER) if (src[k] !== undefined) out[k] = src[k];
  for (const k of Object.keys(src)) if (!(k in out) && src[k] !== undefined) out[k] = src[k];
  if (Array.isArray(out.tasks)) out.tasks = (out.tasks as TaskSpec[]).map((t) => (t && typeof t === 'object' ? reorderTask(t) : t));
  return out as unknown as JobSpec;
}

export function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

export const JOB_NAME_RULE = /^[a-z][a-z0-9-]{2,23}[a-z0-9]$/;
export const TASK_NAME_RULE = /^[a-z][a-z0-9-]{2,30}[a-z0-9]$/;
