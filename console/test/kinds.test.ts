import { describe, expect, it } from 'vitest';
import type { KindJson } from '../src/api/types';
import { addTask, emptyModel } from '../src/lib/editor';
import { showsElastic, showsReplicas, taskFieldPaths, taskFields } from '../src/lib/fields';
import { effectiveMode, isElastic, isFramework, kindLabel, modeNames, roleRules } from '../src/lib/kinds';
import { newTask, withKind, withMode, type TaskSpec } from '../src/lib/spec';
import { KINDS } from './kinds';

const container = () => ({
  image: 'host',
  resources: { cpu: '500m', memory: '256Mi' },
  command: ['sh', '-c', 'echo hello from $YARD_ROLE $YARD_REPLICA_INDEX'],
});

describe('the kinds descriptors', () => {
  it('give the palette: five kinds in order, with labels and modes', () => {
    expect(KINDS.map((k) => k.kind)).toEqual(['openmpi', 'tensorflow', 'pytorch', 'paddle', 'container-job']);
    expect(KINDS.map((k) => k.label)).toEqual(['OpenMPI', 'TensorFlow', 'PyTorch', 'PaddlePaddle', 'Container-Job']);
    expect(KINDS.map((k) => modeNames(k))).toEqual([[], [], ['master-worker', 'elastic'], ['ps', 'collective', 'elastic'], []]);
    for (const k of KINDS) expect(k.modes.filter((m) => m.default)).toHaveLength(1);
    expect(kindLabel(KINDS, 'containerJob')).toBe('Container-Job');
    expect(kindLabel(KINDS, 'mystery')).toBe('mystery');
  });

  it('give the mode a task is in, as the loader picks it', () => {
    const mode = (t: TaskSpec) => effectiveMode(KINDS, t);
    expect(mode({ kind: 'pytorch' })).toBe('master-worker');
    expect(mode({ kind: 'pytorch', mode: 'elastic' })).toBe('elastic');
    expect(mode({ kind: 'paddle', roles: { trainer: {} } })).toBe('collective');
    expect(mode({ kind: 'paddle', roles: { server: {}, trainer: {} } })).toBe('ps');
    expect(mode({ kind: 'tensorflow' })).toBe('');
    expect(mode({ kind: 'container-job' })).toBe('');
    expect(isElastic(KINDS, { kind: 'paddle', mode: 'elastic' })).toBe(true);
    expect(isElastic(KINDS, { kind: 'paddle' })).toBe(false);
    expect(isFramework(KINDS, { kind: 'openmpi' })).toBe(true);
    expect(isFramework(KINDS, { kind: 'container-job' })).toBe(false);
  });

  it('give the roles each kind and mode takes and requires', () => {
    const r = (kind: string, mode: string) => {
      const x = roleRules(KINDS, kind, mode);
      return [x.allowed, x.required];
    };
    expect(r('pytorch', 'master-worker')).toEqual([['master', 'worker'], ['master']]);
    expect(r('pytorch', 'elastic')).toEqual([['worker'], ['worker']]);
    expect(r('tensorflow', '')).toEqual([['ps', 'chief', 'worker', 'evaluator'], ['worker']]);
    expect(r('paddle', 'ps')).toEqual([['server', 'trainer'], ['server', 'trainer']]);
    expect(r('paddle', 'collective')).toEqual([['trainer'], ['trainer']]);
    expect(r('paddle', 'elastic')).toEqual([['trainer'], ['trainer']]);
    expect(r('openmpi', '')).toEqual([['launcher', 'worker'], ['launcher', 'worker']]);
    expect(r('container-job', '')).toEqual([[], []]);
    // a mode the kind does not have: the default mode's rules (the validator names the mode)
    expect(r('pytorch', 'bogus')).toEqual([['master', 'worker'], ['master']]);
    expect(roleRules(KINDS, 'tensorflow', '').rule).toMatch(/chief needs a ps/);
  });

  it('make the palette tasks the console always made', () => {
    expect(newTask(KINDS, 'container-job', 'a')).toEqual({ name: 'a', kind: 'container-job', completions: 1, parallelism: 1, restartPolicy: 'OnFailure', container: container() });
    expect(newTask(KINDS, 'pytorch', 'a')).toEqual({ name: 'a', kind: 'pytorch', mode: 'master-worker', roles: { master: { replicas: 1, container: container() }, worker: { replicas: 1, container: container() } } });
    expect(newTask(KINDS, 'tensorflow', 'a')).toEqual({ name: 'a', kind: 'tensorflow', roles: { worker: { replicas: 1, container: container() } } });
    expect(newTask(KINDS, 'paddle', 'a')).toEqual({ name: 'a', kind: 'paddle', mode: 'collective', roles: { trainer: { replicas: 1, container: container() } } });
    const mpi = newTask(KINDS, 'openmpi', 'a');
    expect(mpi).toEqual({
      name: 'a',
      kind: 'openmpi',
      slotsPerWorker: 1,
      roles: { launcher: { replicas: 1, container: { ...container(), command: 'mpirun hostname' } }, worker: { replicas: 1, container: { ...container(), command: 'sleep infinity' } } },
      advanced: { cleanup: 'running' },
    });
    expect(Object.keys(mpi)).toEqual(['name', 'kind', 'slotsPerWorker', 'roles', 'advanced']);
    expect(Object.keys(newTask(KINDS, 'container-job', 'a'))).toEqual(['name', 'kind', 'completions', 'parallelism', 'restartPolicy', 'container']);
  });

  it('decide which fields a task shows', () => {
    const fields = (t: TaskSpec) => taskFields(KINDS, t);
    expect(fields({ kind: 'container-job' })).toEqual(['completions', 'parallelism', 'timeout', 'retries', 'restartPolicy', 'container']);
    expect(fields({ kind: 'pytorch' })).toEqual(['mode', 'nprocPerNode', 'roles', 'advanced']);
    expect(fields({ kind: 'pytorch', mode: 'elastic' })).toEqual(['mode', 'nprocPerNode', 'roles', 'advanced', 'elastic']);
    expect(fields({ kind: 'tensorflow' })).toEqual(['evaluatorInCluster', 'roles', 'advanced']);
    expect(fields({ kind: 'openmpi' })).toEqual(['slotsPerWorker', 'roles', 'advanced']);
    expect(fields({ kind: 'nothing-known' })).toEqual([]);
    // an elastic section or replicas the spec has are shown, so their errors can be fixed
    expect(showsElastic(KINDS, { kind: 'paddle', elastic: { minReplicas: 1 } })).toBe(true);
    expect(showsElastic(KINDS, { kind: 'tensorflow', elastic: { minReplicas: 1 } })).toBe(false);
    const el = withMode(KINDS, newTask(KINDS, 'pytorch', 'a'), 'elastic');
    expect(showsReplicas(KINDS, el, 'worker')).toBe(false);
    expect(showsReplicas(KINDS, { ...el, roles: { worker: { replicas: 2 } } }, 'worker')).toBe(true);
  });

  it('drive a kind the console has never heard of', () => {
    const kinds: KindJson[] = [
      ...KINDS,
      {
        kind: 'jax',
        label: 'JAX',
        framework: true,
        fields: ['mode', 'roles', 'coordinatorPort'],
        modes: [
          { mode: 'spmd', default: true, elastic: false, roles: [{ role: 'host', required: true, min: 2, max: null }], rule: '', success: 'every host exits 0' },
          { mode: 'elastic', default: false, elastic: true, roles: [{ role: 'host', required: true, min: 1, max: null }], rule: '', success: '' },
        ],
      },
    ];
    const t = addTask(kinds, emptyModel(), 'jax', { x: 0, y: 0 }).model.spec.tasks[0];
    expect(t).toEqual({ name: 'jax-1', kind: 'jax', mode: 'spmd', roles: { host: { replicas: 2, container: container() } } });
    expect(taskFields(kinds, t)).toEqual(['mode', 'roles', 'coordinatorPort', 'advanced']);
    expect(taskFieldPaths(kinds, t, 0)).toContain('tasks[0].coordinatorPort');
    const el = withMode(kinds, t, 'elastic');
    expect(el.roles).toEqual({ host: { container: container() } });
    expect(el.elastic).toBeDefined();
    expect(withKind(kinds, t, 'container-job').container).toEqual(container());
  });
});
