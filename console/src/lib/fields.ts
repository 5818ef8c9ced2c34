// Which form fields the console shows for a spec, by spec path. The task form renders the
// same structure (src/components/TaskForm.tsx); these lists let validation errors be
// placed at their field before the form is even open (badges on canvas nodes), and let a
// test check that every key of every example spec has a field. Which task-level fields a
// task has comes from its kind's descriptor (lib/kinds.ts, GET /api/v1/kinds).

import { isElastic, kindOf, takesField, type Kinds } from './kinds';
import { formatPath, join, parsePath } from './path';
import type { Container, JobSpec, TaskSpec, Words } from './spec';

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

// Whether the role form shows `replicas`: not in elastic mode, unless the spec has one
// (then it is shown so the error "not used in elastic mode" can be fixed where it is).
export function showsReplicas(kinds: Kinds, task: TaskSpec, role: string): boolean {
  return !isElastic(kinds, task) || task.roles?.[role]?.replicas !== undefined;
}

// The elastic section: for a kind that takes it, in an elastic mode or when the spec has one.
export function showsElastic(kinds: Kinds, task: TaskSpec): boolean {
  return takesField(kinds, task, 'elastic') && (isElastic(kinds, task) || task.elastic !== undefined);
}

// The task-level fields the form shows for a task, in the descriptor's order (`advanced`
// last for a framework kind that does not list it).
export function taskFields(kinds: Kinds, task: TaskSpec): string[] {
  const k = kindOf(kinds, task.kind);
  if (!k) return [];
  const out = k.fields.filter((f) => f !== 'elastic' || showsElastic(kinds, task));
  if (k.framework && !out.includes('advanced')) out.push('advanced');
  return out;
}

export function taskFieldPaths(kinds: Kinds, task: TaskSpec, i: number): string[] {
  const b = `tasks[${i}]`;
  const out = [b, join(b, 'name'), join(b, 'kind'), join(b, 'dependsOn'), join(b, 'topology')];
  (task.dependsOn ?? []).forEach((_, j) => out.push(`${b}.dependsOn[${j}]`));
  for (const f of taskFields(kinds, task)) {
    const p = join(b, f);
    if (f === 'container') out.push(...containerFieldPaths(p, task.container));
    else if (f === 'advanced') out.push(p, ...ADVANCED_FIELDS.map((x) => join(p, x)));
    else if (f === 'elastic') out.push(p, ...ELASTIC_FIELDS.map((x) => join(p, x)));
    else if (f === 'roles') {
      out.push(p);
      for (const [name, role] of Object.entries(task.roles ?? {})) {
        const rp = join(p, name);
        out.push(rp);
        if (showsReplicas(kinds, task, name)) out.push(join(rp, 'replicas'));
        out.push(...containerFieldPaths(join(rp, 'container'), role?.container));
      }
    } else out.push(p);
  }
  return out;
}

export const JOB_FIELDS = ['name', 'type', 'queue', 'priority', 'hold', 'after', 'array', 'array.count', 'array.range', 'array.maxRunning', 'tasks'];

export function specFieldPaths(kinds: Kinds, spec: JobSpec): Set<string> {
  const out = new Set<string>(JOB_FIELDS);
  spec.tasks.forEach((t, i) => taskFieldPaths(kinds, t, i).forEach((p) => out.add(p)));
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
