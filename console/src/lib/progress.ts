// What the Job page says of a task at a glance: its progress and, once it failed, why, on its
// box; the job's tasks counted by state in the header. Pure functions of the job JSON
// (docs/http_api.md), so the unit tests pin the wording.
//
// The job JSON lists the replicas that exist (every attempt of each) and a container job's
// `completions`, not a role's `replicas`. So a container job's runs are counted of its
// completions ("3/5 runs"; "3 runs done" from a master that does not send them), and a
// framework task's total is the replicas it has, which is all of them once its gang is placed
// (a gang is placed whole).

import type { ReplicaJson, TaskDetail } from '../api/types';
import { FINISHED_TASK_STATES } from './states';

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// The newest attempt of each replica (role and index), in the order first seen.
export function latestReplicas(replicas: readonly ReplicaJson[]): ReplicaJson[] {
  const newest = new Map<string, ReplicaJson>();
  for (const r of replicas) {
    const key = `${r.role}/${r.index}`;
    const cur = newest.get(key);
    if (!cur || r.attempt >= cur.attempt) newest.set(key, r);
  }
  return [...newest.values()];
}

// A replica's attempt ended well: the master counts a container-job run done when it exited 0.
const exitedOk = (r: ReplicaJson) => r.state === 'Exited' && r.exitCode === 0;

// The box's progress line:
// - a container job: its runs done (distinct run indexes that exited 0) of `completions` when
//   known, and while it runs, the runs running ("1 run done, 2 running", "3/5 runs");
// - an elastic task: its workers now of the spec's bounds ("2 of 1–4 workers", "→ 3" while
//   moving to another count); once finished, the workers it had;
// - any other task: its replicas running of all it has ("2/4 running"); once finished, how
//   many it had. Empty when it has none yet (waiting for its gang to be placed).
export function progressText(task: TaskDetail): string {
  const active = !FINISHED_TASK_STATES.has(task.state);
  const latest = latestReplicas(task.replicas);
  const running = latest.filter((r) => r.state === 'Running').length;
  if (task.kind === 'container-job') {
    const done = new Set(task.replicas.filter(exitedOk).map((r) => r.index)).size;
    const runs = task.completions ? `${done}/${task.completions} runs` : `${plural(done, 'run')} done`;
    return active && running > 0 ? `${runs}, ${running} running` : runs;
  }
  const e = task.elastic;
  if (e) {
    const bounds = `${e.min}–${e.max}`;
    if (!active) return `${plural(latest.length, 'worker')} (${bounds})`;
    return `${e.current} of ${bounds} workers${e.desired !== e.current ? ` → ${e.desired}` : ''}`;
  }
  if (latest.length === 0) return '';
  return active ? `${running}/${latest.length} running` : plural(latest.length, 'replica');
}

// How a replica's attempt ended badly, in a word or two; '' when it did not (still running,
// exited 0, or stopped by the system or the user: Killed is the consequence, not the cause).
export function endText(r: ReplicaJson): string {
  if (r.state === 'Exited' && r.exitCode !== 0) return `exit ${r.exitCode}`;
  if (r.state === 'OOMKilled' || r.state === 'Lost') return r.state;
  return '';
}

// The failed replica of a task: of the replicas that ended badly, the newest attempt (the
// first in the master's order among equals). Null when none did (a task failed by its
// timeout, or before it started).
export function failedReplica(task: TaskDetail): ReplicaJson | null {
  let found: ReplicaJson | null = null;
  for (const r of task.replicas) if (endText(r) && (!found || r.attempt > found.attempt)) found = r;
  return found;
}

// What a failed task's box says besides its reason: how its failed replica ended ("exit 3").
// Empty unless the task Failed.
export function failureExit(task: TaskDetail): string {
  if (task.state !== 'Failed') return '';
  const r = failedReplica(task);
  return r ? endText(r) : '';
}

// The header's count of a job's tasks by state ("tasks 5: 3 succeeded, 1 failed, 1 skipped"),
// finished states first, zero counts left out.
const COUNT_ORDER = ['Succeeded', 'Failed', 'Cancelled', 'Skipped', 'Stopping', 'Running', 'Restarting', 'Starting', 'Queued', 'Waiting'];

export interface StateCount {
  state: string;
  count: number;
}

export function taskCounts(states: readonly string[]): StateCount[] {
  const counts = new Map<string, number>();
  for (const s of states) counts.set(s, (counts.get(s) ?? 0) + 1);
  const known = COUNT_ORDER.filter((s) => counts.has(s));
  const other = [...counts.keys()].filter((s) => !COUNT_ORDER.includes(s)).sort();
  return [...known, ...other].map((state) => ({ state, count: counts.get(state)! }));
}

// "3 succeeded, 1 failed, 1 skipped"
export function countsText(counts: readonly StateCount[]): string {
  return counts.map((c) => `${c.count} ${c.state.toLowerCase()}`).join(', ');
}
