// The Create page's model: the spec being drawn plus, per task, a stable id for its canvas
// node (task names change as the user types) and a position. Every operation is pure and
// returns a new model sharing untouched tasks, so a canvas node re-renders only when its
// own task changed.

import { cycleIfConnected, cycleMessage } from './graph';
import { getAt, parsePath, setAt, taskIndexOf } from './path';
import type { Kinds } from './kinds';
import type { JobSpec, Kind, TaskSpec } from './spec';
import { clone, newTask, reorderTask } from './spec';

export interface XY {
  x: number;
  y: number;
}

export interface EditorModel {
  spec: JobSpec;
  ids: string[]; // ids[i] is the canvas node of spec.tasks[i]
  positions: Record<string, XY>;
}

let nextId = 1;
export function freshId(): string {
  return `t${nextId++}`;
}

export function emptyModel(): EditorModel {
  return { spec: { type: 'training', queue: 'default', tasks: [] }, ids: [], positions: {} };
}

// Imports a spec object (from YAML or JSON): a deep copy with the compact env mapping
// (`env: { A: "1" }`) turned into the list form the form edits. Positions are left empty
// for the layout.
export function modelFromSpec(input: unknown): EditorModel {
  const spec = clone(input ?? {}) as JobSpec;
  if (!Array.isArray(spec.tasks)) spec.tasks = [];
  spec.tasks = spec.tasks.map((t) => normaliseTask(t));
  return { spec, ids: spec.tasks.map(() => freshId()), positions: {} };
}

function normaliseEnv(c: unknown): void {
  if (!c || typeof c !== 'object') return;
  const container = c as { env?: unknown };
  const env = container.env;
  if (env && typeof env === 'object' && !Array.isArray(env)) {
    container.env = Object.entries(env as Record<string, unknown>).map(([name, value]) =>
      value === null || value === undefined ? { name } : { name, value: value as string | number },
    );
  }
}

function normaliseTask(t: TaskSpec): TaskSpec {
  if (!t || typeof t !== 'object') return t;
  normaliseEnv(t.container);
  if (t.roles && typeof t.roles === 'object') for (const r of Object.values(t.roles)) normaliseEnv(r?.container);
  return t;
}

export function specOf(model: EditorModel): JobSpec {
  return model.spec;
}

export function indexOfId(model: EditorModel, id: string): number {
  return model.ids.indexOf(id);
}

export function uniqueTaskName(spec: JobSpec, kind: string): string {
  const taken = new Set(spec.tasks.map((t) => t.name));
  for (let n = 1; ; n++) {
    const name = `${kind}-${n}`;
    if (!taken.has(name)) return name;
  }
}

export function addTask(kinds: Kinds, model: EditorModel, kind: Kind, at: XY): { model: EditorModel; id: string } {
  const id = freshId();
  const task = newTask(kinds, kind, uniqueTaskName(model.spec, kind));
  return {
    id,
    model: {
      spec: { ...model.spec, tasks: [...model.spec.tasks, task] },
      ids: [...model.ids, id],
      positions: { ...model.positions, [id]: at },
    },
  };
}

// Removes tasks and every dependency on them.
export function removeTasks(model: EditorModel, ids: readonly string[]): EditorModel {
  const gone = new Set(ids);
  const goneNames = new Set(model.spec.tasks.filter((_, i) => gone.has(model.ids[i])).map((t) => t.name));
  const tasks: TaskSpec[] = [];
  const keep: string[] = [];
  model.spec.tasks.forEach((t, i) => {
    if (gone.has(model.ids[i])) return;
    keep.push(model.ids[i]);
    const deps = t.dependsOn?.filter((d) => !goneNames.has(d));
    tasks.push(deps && deps.length !== t.dependsOn!.length ? withDeps(t, deps) : t);
  });
  const positions = { ...model.positions };
  for (const id of ids) delete positions[id];
  return { spec: { ...model.spec, tasks }, ids: keep, positions };
}

function withDeps(t: TaskSpec, deps: string[]): TaskSpec {
  const out = { ...t };
  if (deps.length) out.dependsOn = deps;
  else delete out.dependsOn;
  return reorderTask(out);
}

export type ConnectResult = { model: EditorModel; error?: undefined } | { model?: undefined; error: string };

// Makes task `toId` depend on task `fromId` (an edge from -> to); refuses a cycle.
export function connect(model: EditorModel, fromId: string, toId: string): ConnectResult {
  const fi = indexOfId(model, fromId);
  const ti = indexOfId(model, toId);
  if (fi < 0 || ti < 0) return { error: 'unknown task' };
  const from = model.spec.tasks[fi].name ?? '';
  const to = model.spec.tasks[ti].name ?? '';
  if (!from || !to) return { error: 'name both tasks before connecting them' };
  const cycle = cycleIfConnected(model.spec.tasks, from, to);
  if (cycle) return { error: `Refused: ${cycleMessage(cycle)}` };
  const target = model.spec.tasks[ti];
  if (target.dependsOn?.includes(from)) return { model };
  return { model: replaceTask(model, ti, withDeps(target, [...(target.dependsOn ?? []), from])) };
}

export function disconnect(model: EditorModel, fromId: string, toId: string): EditorModel {
  const fi = indexOfId(model, fromId);
  const ti = indexOfId(model, toId);
  if (fi < 0 || ti < 0) return model;
  const from = model.spec.tasks[fi].name;
  const target = model.spec.tasks[ti];
  if (!target.dependsOn?.includes(from ?? '')) return model;
  return replaceTask(model, ti, withDeps(target, target.dependsOn.filter((d) => d !== from)));
}

export function replaceTask(model: EditorModel, index: number, task: TaskSpec): EditorModel {
  const tasks = [...model.spec.tasks];
  const old = tasks[index];
  tasks[index] = task;
  // a rename carries the dependencies on the task along
  if (old && old.name !== task.name && old.name) {
    const count = tasks.filter((t) => t.name === old.name).length;
    if (count === 0)
      for (let i = 0; i < tasks.length; i++) {
        const d = tasks[i].dependsOn;
        if (d?.includes(old.name)) tasks[i] = { ...tasks[i], dependsOn: d.map((n) => (n === old.name ? task.name ?? '' : n)) };
      }
  }
  return { ...model, spec: { ...model.spec, tasks } };
}

// Sets one field by its spec path (`name`, `tasks[2].roles.worker.replicas`); undefined
// removes the key.
export function setField(model: EditorModel, path: string, value: unknown): EditorModel {
  const ti = taskIndexOf(path);
  if (ti >= 0 && ti < model.spec.tasks.length) {
    const rest = parsePath(path).slice(2);
    const task = rest.length === 0 ? (value as TaskSpec) : setAt(model.spec.tasks[ti], rest, value);
    return replaceTask(model, ti, task);
  }
  return { ...model, spec: setAt(model.spec, path, value) };
}

export function fieldValue(model: EditorModel, path: string): unknown {
  return getAt(model.spec, path);
}

export interface EdgeRef {
  id: string;
  source: string;
  target: string;
}

// The canvas edges: one per known dependency, source = the task depended on.
export function edgesOf(model: EditorModel): EdgeRef[] {
  const byName = new Map<string, string>();
  model.spec.tasks.forEach((t, i) => {
    if (t.name && !byName.has(t.name)) byName.set(t.name, model.ids[i]);
  });
  const out: EdgeRef[] = [];
  model.spec.tasks.forEach((t, i) => {
    for (const d of t.dependsOn ?? []) {
      const src = byName.get(d);
      if (src) out.push({ id: `${src}->${model.ids[i]}`, source: src, target: model.ids[i] });
    }
  });
  return out;
}
