// The task kinds as the master describes them (GET /api/v1/kinds, api/types.ts): which kinds
// exist (the palette), their modes, the roles each mode takes and requires, and the task-level
// fields each kind takes. The console keeps no copy of these rules: every function here takes
// the descriptors as a parameter (the app passes what the query cache holds, the unit tests a
// fixture, test/kinds.json).

import type { KindJson, ModeJson, RoleRuleJson } from '../api/types';
import type { TaskSpec } from './spec';

export type Kinds = readonly KindJson[];

export function kindOf(kinds: Kinds, kind: string | undefined): KindJson | undefined {
  return kind ? kinds.find((k) => k.kind === kind) : undefined;
}

// The product's name for a kind; the job API may name it as the schema does (containerJob).
export function kindLabel(kinds: Kinds, kind: string): string {
  const k = kindOf(kinds, kind) ?? kindOf(kinds, kind.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));
  return k?.label ?? kind;
}

export function defaultMode(k: KindJson): ModeJson | undefined {
  return k.modes.find((m) => m.default) ?? k.modes[0];
}

// The modes a task of the kind chooses from; none for a kind whose one mode is "".
export function modeNames(k: KindJson | undefined): string[] {
  return (k?.modes ?? []).filter((m) => m.mode !== '').map((m) => m.mode);
}

function takesAll(m: ModeJson, roles: readonly string[]): boolean {
  return roles.every((r) => m.roles.some((x) => x.role === r));
}

// The mode a task is in: its `mode`, or without one the mode the loader picks: the default,
// unless the task has a role the default does not take and another mode (not elastic, which
// is never implied) takes all of its roles (a Paddle task with a `server` is `ps`).
export function modeOf(kinds: Kinds, task: TaskSpec): ModeJson | undefined {
  const k = kindOf(kinds, task.kind);
  if (!k) return undefined;
  if (task.mode) return k.modes.find((m) => m.mode === task.mode);
  const dflt = defaultMode(k);
  const present = Object.keys(task.roles ?? {});
  if (!dflt || takesAll(dflt, present)) return dflt;
  return k.modes.find((m) => !m.elastic && takesAll(m, present)) ?? dflt;
}

export function effectiveMode(kinds: Kinds, task: TaskSpec): string {
  return task.mode || (modeOf(kinds, task)?.mode ?? '');
}

export function isElastic(kinds: Kinds, task: TaskSpec): boolean {
  return modeOf(kinds, task)?.elastic ?? false;
}

export function isFramework(kinds: Kinds, task: TaskSpec): boolean {
  return kindOf(kinds, task.kind)?.framework ?? false;
}

// Whether a task's kind takes a task-level field (`nprocPerNode`, `roles`, `container` ...).
// `advanced` belongs to every framework kind (docs/spec.md), whether or not it is listed.
export function takesField(kinds: Kinds, task: TaskSpec, field: string): boolean {
  const k = kindOf(kinds, task.kind);
  if (!k) return false;
  return k.fields.includes(field) || (field === 'advanced' && k.framework);
}

export interface RoleRules {
  allowed: string[]; // in the order the form offers them
  required: string[];
  rules: RoleRuleJson[];
  rule: string; // the mode's combination rule in words, "" when none
}

// Which roles a kind takes and requires in a mode; a mode the kind does not have gets the
// default mode's rules (the validator names the bad mode).
export function roleRules(kinds: Kinds, kind: string | undefined, mode: string): RoleRules {
  const k = kindOf(kinds, kind);
  const m = k ? (k.modes.find((x) => x.mode === mode) ?? defaultMode(k)) : undefined;
  const rules = m?.roles ?? [];
  return {
    allowed: rules.map((r) => r.role),
    required: rules.filter((r) => r.required).map((r) => r.role),
    rules,
    rule: m?.rule ?? '',
  };
}

// The replicas a new role starts with: 1, within the role's bounds.
export function startReplicas(r: RoleRuleJson | undefined): number {
  const n = Math.max(1, r?.min ?? 1);
  return r?.max != null ? Math.min(n, r.max) : n;
}
