// The job spec as the console edits it: a plain object with exactly the keys and shapes of
// the YAML spec (docs/spec.md, docs/design.md §2), so that YAML import/export and the JSON
// sent to /api/v1/validate and /api/v1/jobs are the same object. Keys the form does not
// know (say a typo from an imported file) are kept, so the validator can name them.

import { defaultMode, isElastic, kindOf, roleRules, startReplicas, type Kinds } from './kinds';

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
export interface TopologySpec {
  required?: string;
  preferred?: string;
}
export interface TaskSpec {
  name?: string;
  kind?: string;
  dependsOn?: string[];
  // keep the gang within one rack, block... (docs/topology.md, "Cluster levels")
  topology?: TopologySpec;
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
export interface AfterSpec {
  job?: string;
  condition?: string;
}
export interface JobSpec {
  name?: string;
  type?: string;
  queue?: string;
  priority?: Scalar;
  array?: JobArraySpec;
  hold?: boolean;
  after?: (AfterSpec | string)[];
  tasks: TaskSpec[];
}

// `after` as one line, as yardctl's --after takes it: "prep-data, eval-b:failed" (docs/habits.md);
// a condition is shown only when it is not the default, succeeded.
export function afterText(after: JobSpec['after']): string {
  if (!Array.isArray(after)) return '';
  return after
    .map((a) => {
      if (typeof a === 'string') return a;
      const job = a?.job ?? '';
      return a?.condition && a.condition !== 'succeeded' ? `${job}:${a.condition}` : job;
    })
    .join(', ');
}

// The line back as the spec's list: "a, b:failed" -> [{job: 'a'}, {job: 'b', condition: 'failed'}];
// an empty line is no `after`. A condition the master does not know is kept for its validator to name.
export function parseAfter(text: string): AfterSpec[] | undefined {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) return undefined;
  return items.map((s) => {
    const colon = s.lastIndexOf(':');
    if (colon < 0) return { job: s };
    return { job: s.slice(0, colon).trim(), condition: s.slice(colon + 1).trim() };
  });
}

// A kind's name as the master's descriptors give it (lib/kinds.ts).
export type Kind = string;

export function defaultContainer(): Container {
  return {
    image: 'host',
    resources: { cpu: '500m', memory: '256Mi' },
    command: ['sh', '-c', 'echo hello from $YARD_ROLE $YARD_REPLICA_INDEX'],
  };
}

export function defaultElastic(kind: string | undefined): Elastic {
  return { backend: kind === 'paddle' ? 'etcd' : 'c10d', minReplicas: 1, maxReplicas: 2 };
}

// What a new task starts with beyond what its kind's descriptor requires: the console's
// choice of starting content (never a rule), so that each kind's palette task runs as
// dropped. A kind without a preset gets its required roles with the default container.
interface Preset {
  task?: Partial<TaskSpec>; // after name, kind and mode
  roles?: string[]; // optional roles it starts with too
  commands?: Record<string, Words>; // per role
  after?: Partial<TaskSpec>; // after the roles
}
const PRESETS: Record<string, Preset> = {
  'container-job': { task: { completions: 1, parallelism: 1, restartPolicy: 'OnFailure' } },
  pytorch: { roles: ['worker'] },
  openmpi: {
    task: { slotsPerWorker: 1 },
    commands: { launcher: 'mpirun hostname', worker: 'sleep infinity' },
    after: { advanced: { cleanup: 'running' } },
  },
};

// A new task of `kind` that passes validation as it is (the palette's drop): the kind's
// default mode and the roles it requires.
export function newTask(kinds: Kinds, kind: Kind, name: string): TaskSpec {
  const k = kindOf(kinds, kind);
  const t: TaskSpec = { name, kind };
  if (!k) return t;
  const mode = defaultMode(k);
  if (mode?.mode) t.mode = mode.mode;
  const preset = PRESETS[kind] ?? {};
  Object.assign(t, clone(preset.task ?? {}));
  if (k.fields.includes('container')) t.container = defaultContainer();
  const roles = (mode?.roles ?? []).filter((r) => r.required || preset.roles?.includes(r.role));
  if (roles.length) {
    t.roles = {};
    for (const r of roles) {
      const role: Role = mode?.elastic ? {} : { replicas: startReplicas(r) };
      role.container = defaultContainer();
      const command = preset.commands?.[r.role];
      if (command !== undefined) role.container.command = command;
      t.roles[r.role] = role;
    }
  }
  Object.assign(t, clone(preset.after ?? {}));
  return t;
}

// The first container of a task, used to seed a role that is added.
function firstContainer(task: TaskSpec): Container {
  for (const r of Object.values(task.roles ?? {})) if (r?.container) return clone(r.container);
  return defaultContainer();
}

// Reshapes a framework task for a new mode: roles the mode does not take are dropped, the
// roles it requires are added (seeded from an existing container), `replicas` and `elastic`
// follow the elastic rule ("not used in elastic mode").
export function withMode(kinds: Kinds, task: TaskSpec, mode: string): TaskSpec {
  const t: TaskSpec = clone(task);
  t.mode = mode;
  const rules = roleRules(kinds, t.kind, mode);
  const elastic = isElastic(kinds, t);
  const seed = firstContainer(t);
  const roles: Record<string, Role> = {};
  for (const [name, role] of Object.entries(t.roles ?? {})) if (rules.allowed.includes(name)) roles[name] = role;
  for (const name of rules.required) if (!roles[name]) roles[name] = { container: clone(seed) };
  for (const [name, role] of Object.entries(roles)) {
    if (elastic) delete role.replicas;
    else if (role.replicas === undefined) role.replicas = startReplicas(rules.rules.find((r) => r.role === name));
    roles[name] = role;
  }
  // keep the allowed order
  t.roles = {};
  for (const name of rules.allowed) if (roles[name]) t.roles[name] = roles[name];
  if (elastic) t.elastic = t.elastic ?? defaultElastic(t.kind);
  else delete t.elastic;
  return t;
}

// Changes a task's kind, keeping its name, dependencies and first container.
export function withKind(kinds: Kinds, task: TaskSpec, kind: Kind): TaskSpec {
  const seed = task.container ?? firstContainer(task);
  const t = newTask(kinds, kind, task.name ?? '');
  if (task.dependsOn) t.dependsOn = [...task.dependsOn];
  if (t.container) t.container = clone(seed);
  for (const r of Object.values(t.roles ?? {})) if (r) r.container = clone(seed);
  return reorderTask(t);
}

// The key order a person writes: name, kind, dependsOn first.
const TASK_KEY_ORDER = ['name', 'kind', 'dependsOn', 'topology', 'mode'];
export function reorderTask(t: TaskSpec): TaskSpec {
  const out: Record<string, unknown> = {};
  const src = t as Record<string, unknown>;
  for (const k of TASK_KEY_ORDER) if (src[k] !== undefined) out[k] = src[k];
  for (const k of Object.keys(src)) if (!(k in out) && src[k] !== undefined) out[k] = src[k];
  return out as TaskSpec;
}

// The key order a person writes a spec in (docs/design.md §2): what export uses, whatever
// order the form added keys in.
const JOB_KEY_ORDER = ['name', 'type', 'queue', 'priority', 'array', 'hold', 'after', 'tasks'];
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
