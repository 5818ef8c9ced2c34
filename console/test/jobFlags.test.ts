import { describe, expect, it } from 'vitest';
import type { JobSummary } from '../src/api/types';
import { afterText, afterTitle, heldText, jobActions, requeuesText } from '../src/lib/jobFlags';

function job(over: Partial<JobSummary>): JobSummary {
  return {
    name: 'j',
    queue: 'default',
    owner: 'admin',
    state: 'Queued',
    reason: '',
    priority: 0,
    submittedAt: 0,
    startedAt: 0,
    finishedAt: 0,
    tasksTotal: 1,
    tasksDone: 0,
    held: false,
    heldBy: '',
    after: [],
    afterPending: false,
    requeues: 0,
    ...over,
  };
}

describe('heldText', () => {
  it('names who held the job', () => {
    expect(heldText(job({ held: true, heldBy: 'alice' }))).toBe('Held by alice');
    expect(heldText(job({ held: true, heldBy: '' }))).toBe('Held');
  });
  it('is empty when not held, or when the master does not say', () => {
    expect(heldText(job({}))).toBe('');
    expect(heldText(job({ held: undefined, heldBy: undefined }))).toBe('');
  });
});

describe('afterText and afterTitle', () => {
  const after = [
    { job: 'prep-data', condition: 'succeeded' },
    { job: 'tokenize', condition: 'ended' },
  ];
  it('names the jobs waited for while the job waits', () => {
    expect(afterText(job({ after: after.slice(0, 1), afterPending: true }))).toBe('after prep-data');
    expect(afterText(job({ after, afterPending: true }))).toBe('after prep-data, tokenize');
    expect(afterTitle(job({ after }))).toBe('prep-data succeeded, tokenize ended');
  });
  it('is empty once the wait is over, or with no after', () => {
    expect(afterText(job({ after, afterPending: false }))).toBe('');
    expect(afterText(job({ afterPending: true }))).toBe('');
    expect(afterText(job({ after: undefined, afterPending: undefined }))).toBe('');
  });
});

describe('requeuesText', () => {
  it('counts requeues, and says nothing of none', () => {
    expect(requeuesText(job({ requeues: 1 }))).toBe('requeued 1×');
    expect(requeuesText(job({ requeues: 3 }))).toBe('requeued 3×');
    expect(requeuesText(job({ requeues: 0 }))).toBe('');
    expect(requeuesText(job({ requeues: undefined }))).toBe('');
  });
});

describe('jobActions', () => {
  const acts = (over: Partial<JobSummary>) => [...jobActions(job(over))].sort();
  it('holds a queued job not held, releases a held one', () => {
    expect(acts({ state: 'Queued' })).toEqual(['hold']);
    expect(acts({ state: 'Queued', held: true, heldBy: 'admin' })).toEqual(['release']);
    expect(acts({ state: 'Queued', afterPending: true, after: [{ job: 'a', condition: 'succeeded' }] })).toEqual(['hold']);
  });
  it('requeues a running or ended job, not a skipped or cancelling one', () => {
    for (const state of ['Running', 'Succeeded', 'Failed', 'Cancelled']) expect(acts({ state })).toEqual(['requeue']);
    expect(acts({ state: 'Skipped' })).toEqual([]);
    expect(acts({ state: 'Cancelling' })).toEqual([]);
  });
});
