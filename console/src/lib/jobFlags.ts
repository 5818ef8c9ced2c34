// What the Jobs list and the Job page say of a job besides its state: held (by whom), waiting
// on other jobs (`after`), requeued N times; and which of the Job page's actions apply. Pure
// functions of the job JSON (docs/http_api.md), so the unit tests pin the wording.

import type { JobSummary } from '../api/types';

type Flags = Pick<JobSummary, 'state' | 'held' | 'heldBy' | 'after' | 'afterPending' | 'requeues'>;

// "Held by alice" (or "Held"); '' when not held.
export function heldText(job: Flags): string {
  if (!job.held) return '';
  return job.heldBy ? `Held by ${job.heldBy}` : 'Held';
}

// "after prep-data, tokenize" while the job still waits for those jobs; '' otherwise.
export function afterText(job: Flags): string {
  if (!job.afterPending || !job.after?.length) return '';
  return `after ${job.after.map((a) => a.job).join(', ')}`;
}

// The conditions spelled out, for a tooltip: "prep-data succeeded, tokenize ended".
export function afterTitle(job: Flags): string {
  return (job.after ?? []).map((a) => `${a.job} ${a.condition}`).join(', ');
}

// "requeued 2×"; '' when never requeued.
export function requeuesText(job: Flags): string {
  const n = job.requeues ?? 0;
  return n > 0 ? `requeued ${n}×` : '';
}

export type JobAction = 'hold' | 'release' | 'requeue';

// Which of hold, release and requeue the Job page offers: hold a Queued job not held yet,
// release a held one, requeue one that runs or ended (not one Skipped: its `after` can no
// longer be met, nor one still queued or being cancelled).
const REQUEUABLE = new Set(['Running', 'Succeeded', 'Failed', 'Cancelled']);

export function jobActions(job: Flags): Set<JobAction> {
  const out = new Set<JobAction>();
  if (job.held) out.add('release');
  else if (job.state === 'Queued') out.add('hold');
  if (REQUEUABLE.has(job.state)) out.add('requeue');
  return out;
}
