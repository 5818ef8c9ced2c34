import { describe, expect, it } from 'vitest';
import { addTask, connect, disconnect, edgesOf, emptyModel, modelFromSpec, removeTasks, setField } from '../src/lib/editor';
import { withKind, withMode, type Kind } from '../src/lib/spec';
import { KINDS } from './kinds';

function threeTasks() {
  let m = emptyModel();
  const ids: string[] = [];
  for (const k of ['container-job', 'pytorch', 'tensorflow'] as Kind[]) {
    const r = addTask(KINDS, m, k, { x: 0, y: 0 });
    m = r.model;
    ids.push(r.id);
  }
  return { m, ids };
}

describe('the editor model', () => {
  it('names dropped tasks uniquely after their kind', () => {
    let m = emptyModel();
    for (let i = 0; i < 3; i++) m = addTask(KINDS, m, 'pytorch', { x: 0, y: 0 }).model;
    expect(m.spec.tasks.map((t) => t.name)).toEqual(['pytorch-1', 'pytorch-2', 'pytorch-3']);
    for (const k of KINDS) expect(addTask(KINDS, emptyModel(), k.kind, { x: 0, y: 0 }).model.spec.tasks[0].name).toMatch(/^[a-z][a-z0-9-]{2,30}[a-z0-9]$/);
  });

  it('connects tasks into dependsOn and refuses a cycle at once', () => {
    const { m, ids } = threeTasks();
    const a = connect(m, ids[0], ids[1]);
    expect(a.error).toBeUndefined();
    const b = connect(a.model!, ids[1], ids[2]);
    expect(b.model!.spec.tasks[2].dependsOn).toEqual(['pytorch-1']);
    expect(b.model!.spec.tasks[1].dependsOn).toEqual(['container-job-1']);
    // dependsOn comes right after name and kind, as a person writes it
    expect(Object.keys(b.model!.spec.tasks[1]).slice(0, 3)).toEqual(['name', 'kind', 'dependsOn']);
    const c = connect(b.model!, ids[2], ids[0]);
    expect(c.model).toBeUndefined();
    expect(c.error).toBe('Refused: that would make a cycle: container-job-1 → pytorch-1 → tensorflow-1 → container-job-1');
    expect(connect(b.model!, ids[1], ids[1]).error).toMatch(/cannot depend on itself/);
    // connecting twice is one dependency
    expect(connect(b.model!, ids[0], ids[1]).model!.spec.tasks[1].dependsOn).toEqual(['container-job-1']);
    expect(edgesOf(b.model!)).toEqual([
      { id: `${ids[0]}->${ids[1]}`, source: ids[0], target: ids[1] },
      { id: `${ids[1]}->${ids[2]}`, source: ids[1], target: ids[2] },
    ]);
  });

  it('removes edges and tasks with the dependencies on them', () => {
    const { m, ids } = threeTasks();
    let x = connect(connect(m, ids[0], ids[1]).model!, ids[0], ids[2]).model!;
    x = disconnect(x, ids[0], ids[1]);
    expect(x.spec.tasks[1].dependsOn).toBeUndefined();
    x = removeTasks(x, [ids[0]]);
    expect(x.spec.tasks.map((t) => t.name)).toEqual(['pytorch-1', 'tensorflow-1']);
    expect(x.spec.tasks[1].dependsOn).toBeUndefined();
    expect(x.ids).toEqual([ids[1], ids[2]]);
  });

  it('carries dependencies along when a task is renamed', () => {
    const { m, ids } = threeTasks();
    let x = connect(m, ids[0], ids[1]).model!;
    x = setField(x, 'tasks[0].name', 'prep-data');
    expect(x.spec.tasks[1].dependsOn).toEqual(['prep-data']);
    expect(edgesOf(x)).toHaveLength(1);
  });

  it('sets fields by spec path and shares untouched tasks', () => {
    const { m } = threeTasks();
    const x = setField(m, 'tasks[1].roles.worker.replicas', 4);
    expect(x.spec.tasks[1].roles!.worker.replicas).toBe(4);
    expect(x.spec.tasks[0]).toBe(m.spec.tasks[0]);
    expect(x.spec.tasks[2]).toBe(m.spec.tasks[2]);
    expect(setField(m, 'name', 'my-job').spec.name).toBe('my-job');
  });

  it('imports the compact env mapping as the list the form edits', () => {
    const m = modelFromSpec({ name: 'x', tasks: [{ name: 'aaaa', kind: 'container-job', container: { env: { A: '1', B: 2 } } }] });
    expect(m.spec.tasks[0].container!.env).toEqual([
      { name: 'A', value: '1' },
      { name: 'B', value: 2 },
    ]);
  });

  it('reshapes roles for a mode and a kind', () => {
    const pt = addTask(KINDS, emptyModel(), 'pytorch', { x: 0, y: 0 }).model.spec.tasks[0];
    const el = withMode(KINDS, pt, 'elastic');
    expect(Object.keys(el.roles!)).toEqual(['worker']);
    expect(el.roles!.worker.replicas).toBeUndefined();
    expect(el.elastic).toEqual({ backend: 'c10d', minReplicas: 1, maxReplicas: 2 });
    const back = withMode(KINDS, el, 'master-worker');
    expect(Object.keys(back.roles!)).toEqual(['master', 'worker']);
    expect(back.elastic).toBeUndefined();
    const ps = withMode(KINDS, addTask(KINDS, emptyModel(), 'paddle', { x: 0, y: 0 }).model.spec.tasks[0], 'ps');
    expect(Object.keys(ps.roles!)).toEqual(['server', 'trainer']);
    const cj = withKind(KINDS, { ...pt, dependsOn: ['a'] }, 'container-job');
    expect(cj.kind).toBe('container-job');
    expect(cj.dependsOn).toEqual(['a']);
    expect(cj.roles).toBeUndefined();
    expect(cj.container).toEqual(pt.roles!.master.container);
  });
});
