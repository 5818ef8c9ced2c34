import { describe, expect, it } from 'vitest';
import type { ElasticJson, ReplicaJson, TaskDetail } from '../src/api/types';
import { failedReplica, failureExit, latestReplicas, progressText, taskCounts, countsText } from '../src/lib/progress';

function replica(role: string, index: number, attempt: number, state: string, exitCode = 0): ReplicaJson {
  return { role, index, attempt, state, node: 'dev', port: 0, declaredPorts: '', gpus: '', exitCode, restarts: 0, reason: '' };
}

function task(over: Partial<TaskDetail>): TaskDetail {
  return { name: 't', kind: 'pytorch', mode: 'master-worker', state: 'Running', reason: '', attempt: 0, dependsOn: [], replicas: [], elastic: null, ...over };
}

function elastic(over: Partial<ElasticJson>): ElasticJson {
  return {
    current: 2,
    desired: 2,
    min: 1,
    max: 4,
    target: 80,
    utilisation: null,
    lastDecision: '',
    lastDecisionAt: 0,
    nextDecisionAt: 0,
    pending: false,
    ...over,
  };
}

describe('latestReplicas', () => {
  it('keeps the newest attempt of each replica, in the order first seen', () => {
    const rs = [replica('master', 0, 0, 'Exited', 1), replica('master', 0, 1, 'Running'), replica('worker', 0, 0, 'Running')];
    expect(latestReplicas(rs).map((r) => `${r.role}/${r.index}#${r.attempt}`)).toEqual(['master/0#1', 'worker/0#0']);
  });
});

describe('progressText', () => {
  it('counts a container job’s runs that exited 0, each run index once', () => {
    const t = task({
      kind: 'container-job',
      mode: '',
      replicas: [
        replica('run', 0, 0, 'Exited', 0),
        replica('run', 1, 0, 'Exited', 2),
        replica('run', 1, 1, 'Running'),
        replica('run', 2, 0, 'Running'),
      ],
    });
    expect(progressText(t)).toBe('1 run done, 2 running');
    expect(progressText({ ...t, completions: 5 })).toBe('1/5 runs, 2 running');
  });
  it('says a finished container job’s runs without a running count', () => {
    const rs = [0, 1, 2].map((i) => replica('run', i, 0, 'Exited', 0));
    expect(progressText(task({ kind: 'container-job', state: 'Succeeded', replicas: rs }))).toBe('3 runs done');
    expect(progressText(task({ kind: 'container-job', state: 'Succeeded', replicas: rs, completions: 3 }))).toBe('3/3 runs');
    expect(progressText(task({ kind: 'container-job', state: 'Failed', replicas: [replica('run', 0, 0, 'Exited', 3)] }))).toBe('0 runs done');
    expect(progressText(task({ kind: 'container-job', state: 'Queued' }))).toBe('0 runs done');
  });
  it('counts a container job’s runs of its completions', () => {
    const rs = [replica('run', 0, 0, 'Exited', 0), replica('run', 1, 0, 'Exited', 0), replica('run', 2, 0, 'Exited', 0)];
    const t = task({ kind: 'container-job', mode: '', completions: 5, replicas: rs });
    expect(progressText(t)).toBe('3/5 runs');
    expect(progressText({ ...t, replicas: [...rs, replica('run', 3, 0, 'Running')] })).toBe('3/5 runs, 1 running');
    expect(progressText({ ...t, state: 'Queued', replicas: [] })).toBe('0/5 runs');
    // a failed run retried and done counts once; one that failed for good counts not at all
    const retried = [replica('run', 0, 0, 'Exited', 1), replica('run', 0, 1, 'Exited', 0), replica('run', 1, 0, 'Exited', 2)];
    expect(progressText({ ...t, state: 'Failed', completions: 2, replicas: retried })).toBe('1/2 runs');
    // 0 (the master's value for other kinds) is not a count of runs
    expect(progressText({ ...t, completions: 0 })).toBe('3 runs done');
  });
  it('counts a framework task’s replicas running of all it has', () => {
    const rs = [replica('master', 0, 0, 'Running'), replica('worker', 0, 0, 'Running'), replica('worker', 1, 0, 'Placed'), replica('worker', 2, 0, 'Starting')];
    expect(progressText(task({ replicas: rs }))).toBe('2/4 running');
    // an older attempt is not a replica of its own
    expect(progressText(task({ replicas: [replica('master', 0, 0, 'Exited', 1), replica('master', 0, 1, 'Running')] }))).toBe('1/1 running');
  });
  it('says nothing of a task whose gang is not placed yet, and how many replicas a finished one had', () => {
    expect(progressText(task({ state: 'Queued' }))).toBe('');
    expect(progressText(task({ state: 'Waiting' }))).toBe('');
    const rs = [replica('master', 0, 0, 'Exited'), replica('worker', 0, 0, 'Killed', 143)];
    expect(progressText(task({ state: 'Succeeded', replicas: rs }))).toBe('2 replicas');
    expect(progressText(task({ state: 'Cancelled', replicas: rs.slice(0, 1) }))).toBe('1 replica');
  });
  it('gives an elastic task’s workers now of its bounds, and where it is moving', () => {
    const t = task({ mode: 'elastic', elastic: elastic({ current: 2, desired: 2, min: 1, max: 4 }) });
    expect(progressText(t)).toBe('2 of 1–4 workers');
    expect(progressText({ ...t, elastic: elastic({ current: 2, desired: 3, min: 1, max: 4 }) })).toBe('2 of 1–4 workers → 3');
    const done = { ...t, state: 'Cancelled', replicas: [replica('worker', 0, 0, 'Killed', 143), replica('worker', 1, 0, 'Killed', 143)] };
    expect(progressText(done)).toBe('2 workers (1–4)');
  });
});

describe('failureExit and failedReplica', () => {
  it('gives the exit code of the replica that failed', () => {
    const t = task({ kind: 'container-job', state: 'Failed', reason: '1 run failed; retries allow 0', replicas: [replica('run', 0, 0, 'Exited', 3)] });
    expect(failureExit(t)).toBe('exit 3');
  });
  it('takes the newest failed attempt, and not a replica the system stopped', () => {
    const t = task({
      state: 'Failed',
      replicas: [replica('master', 0, 0, 'Killed', 143), replica('worker', 0, 0, 'Exited', 1), replica('worker', 0, 1, 'Exited', 7), replica('worker', 1, 1, 'Killed', 143)],
    });
    expect(failedReplica(t)).toMatchObject({ role: 'worker', index: 0, attempt: 1 });
    expect(failureExit(t)).toBe('exit 7');
  });
  it('names an OOM kill or a lost replica instead of a code', () => {
    expect(failureExit(task({ state: 'Failed', replicas: [replica('worker', 0, 0, 'OOMKilled', 137)] }))).toBe('OOMKilled');
    expect(failureExit(task({ state: 'Failed', replicas: [replica('worker', 0, 0, 'Lost')] }))).toBe('Lost');
  });
  it('is empty unless the task failed, or when no replica ended badly', () => {
    expect(failureExit(task({ state: 'Running', replicas: [replica('run', 0, 0, 'Exited', 3)] }))).toBe('');
    expect(failureExit(task({ state: 'Failed', replicas: [replica('run', 0, 0, 'Killed', 143)] }))).toBe('');
    expect(failureExit(task({ state: 'Failed' }))).toBe('');
  });
});

describe('taskCounts', () => {
  it('counts finished states first, leaves out zeros', () => {
    const states = ['Succeeded', 'Skipped', 'Failed', 'Succeeded', 'Succeeded'];
    expect(taskCounts(states)).toEqual([
      { state: 'Succeeded', count: 3 },
      { state: 'Failed', count: 1 },
      { state: 'Skipped', count: 1 },
    ]);
    expect(countsText(taskCounts(states))).toBe('3 succeeded, 1 failed, 1 skipped');
  });
  it('counts unfinished tasks by state too, and a state it does not know last', () => {
    expect(countsText(taskCounts(['Waiting', 'Running', 'Succeeded', 'Hibernating', 'Queued', 'Running']))).toBe(
      '1 succeeded, 2 running, 1 queued, 1 waiting, 1 hibernating',
    );
    expect(countsText(taskCounts([]))).toBe('');
  });
});
