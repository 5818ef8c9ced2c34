// Which form fields the console shows for a spec, by spec path. The task form renders the
// same structure (src/components/TaskForm.tsx); these lists let validation errors be
// placed at their field before the form is even open (badges on canvas nodes), and let a
// test check that every key of every example spec has a field.

import { formatPath, join, parsePath } from './path';
import type { Container, JobSpec, TaskSpec, Words } from './spec';
import { effectiveMode, isFramework } from './spec';

export interface SpecError {
  path: string;
  message: string;
}

function words(out: string[], p: string, w: Words | undefined): void {
  out.push(p);
  if (Array.isArray(w)) w.forEach((_, j) => out.push(join(p, j)));
}

export function containerFieldPaths(p: string, c: Container | undefined): string[] {
  const out = [p, join(p, 'image')];
  const useFlavor = c?.flavor !== undefined;
  if (!useFlavor || c?.resources !== undefined) {
    const r = join(p, 'resources');
    out.push(r, join(r, 'cpu'), join(r, 'memory'), join(r, 'gpu'));
  }
  if (useFlavor) out.push(join(p, 'flavor'));
  words(out, join(p, 'command'), c?.command);
  words(out, join(p, 'args'), c?.args);
  for (const hook of ['postStart', 'preStop'] as const) {
    const h = join(p, hook);
    out.push(h);
    words(out, join(h, 'exec'), c?.[hook]?.exec);
  }
  const lists: [keyof Container, string[]][] = [
    ['ports', ['name', 'port', 'protocol']],
    ['env', ['name', 'value']],
    ['mounts', ['dataset', 'path', 'readOnly']],
  ];
  for (const [key, leaves] of lists) {
    const lp = join(p, key);
    out.push(lp);
    const list = c?.[key];
    if (Array.isArray(list))
      list.forEach((_, j) => {
        const ip = join(lp, j);
        out.push(ip, ...leaves.map((l) => join(ip, l)));
      });
  }
  out.push(join(p, 'workingDir'));
  return out;
}

export const ADVANCED_FIELDS = ['retries', 'maxLifetime', 'retention', 'cleanup'];
export const ELASTIC_FIELDS = ['backend', 'metric', 'target', 'minReplicas', 'maxReplicas', 'scaleTimeout'];
export const CONTAINER_JOB_FIELDS = ['completions', 'parallelism', 'timeout', 'retries', 'restartPolicy'];

// Whether the role form shows `replicas`: not in elastic mode, unless the spec has one
// (then it is shown so the error "not used in elastic mode" can be fixed where it is).
export function showsReplicas(task: TaskSpec, role: string): boolean {
  return effectiveMode(task) !== 'elastic' || task.roles?.[role]?.replicas !== undefined;
}

export function showsElastic(task: TaskSpec): boolean {
  return effectiveMode(task) === 'elastic' || task.elastic !== undefined;
}

export function taskFieldPaths(task: TaskSpec, i: number): string[] {
  const b = `tasks[${i}]`;
  const out = [b, join(b, 'name'), join(b, 'kind'), join(b, 'dependsOn')];
  (task.dependsOn ?? []).forEach((_, j) => out.push(`${b}.dependsOn[${j}]`));
  if (task.kind === 'container-job') {
    for (const f of CONTAINER_JOB_FIELDS) out.push(join(b, f));
    out.push(...containerFieldPaths(join(b, 'container'), task.container));
    return out;
  }
  if (!isFramework(task)) return out;
  if (task.kind === 'pytorch' || task.kind === 'paddle') out.push(join(b, 'mode'));
  if (task.kind === 'pytorch') out.push(join(b, 'nprocPerNode'));
  if (task.kind === 'openmpi') out.push(join(b, 'slotsPerWorker'));
  if (task.kind === 'tensorflow') out.push(join(b, 'evaluatorInCluster'));
  const roles = join(b, 'roles');
  out.push(roles);
  for (const [name, role] of Object.entries(task.roles ?? {})) {
    const rp = join(roles, name);
    out.push(rp);
    if (showsReplicas(task, name)) out.push(join(rp, 'replicas'));
    out.push(...containerFieldPaths(join(rp, 'container'), role?.container));
  }
  const adv = join(b, 'advanced');
  out.push(adv, ...ADVANCED_FIELDS.map((f) => join(adv, f)));
  if (showsElastic(task)) {
    const el = join(b, 'elastic');
    out.push(el, ...ELASTIC_FIELDS.map((f) => join(el, f)));
  }
  return out;
}

export const JOB_FIELDS = ['name', 'type', 'queue', 'priority', 'array', 'array.count', 'array.range', 'array.maxRunning', 'tasks'];

export function specFieldPaths(spec: JobSpec): Set<string> {
  const out = new Set<string>(JOB_FIELDS);
  spec.tasks.forEach((t, i) => taskFieldPaths(t, i).forEach((p) => out.add(p)));
  return out;
}

// The field an error belongs to: its own path when the form has that field, else the
// nearest enclosing one (`tasks[0].roles.worker.replica` -> `tasks[0].roles.worker`), else
// '' (shown with the job's general errors).
export function fieldForError(path: string, fields: Set<string>): string {
  const segs = parsePath(path);
  for (let n = segs.length; n > 0; n--) {
    const p = formatPath(segs.slice(0, n));
    if (fields.has(p)) return p;
  }
  return '';
}

export function errorsByField(errors: readonly SpecError[], fields: Set<string>): Map<string, SpecError[]> {
  const out = new Map<string, SpecError[]>();
  for (const e of errors) {
    const f = fieldForError(e.path, fields);
    const list = out.get(f);
    if (list) list.push(e);
    else out.set(f, [e]);
  }
  return out;
}

// How many errors fall in each task (index -> count), for the badges on canvas nodes.
export function errorCountByTask(errors: readonly SpecError[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const e of errors) {
    const m = /^tasks\[(\d+)\]/.exec(e.path);
    if (m) out.set(Number(m[1]), (out.get(Number(m[1])) ?? 0) + 1);
  }
  return out;
}
