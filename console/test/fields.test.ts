import { describe, expect, it } from 'vitest';
import { modelFromSpec } from '../src/lib/editor';
import { errorCountByTask, errorsByField, fieldForError, specFieldPaths } from '../src/lib/fields';
import { formatPath, type Segment } from '../src/lib/path';
import { modeNames } from '../src/lib/kinds';
import { newTask, withMode, type JobSpec } from '../src/lib/spec';
import { importYaml } from '../src/lib/yamlio';
import { examples } from './examples';
import { KINDS } from './kinds';


// Every scalar's path in a spec object: what a form must have a field for.
function leafPaths(v: unknown, segs: Segment[] = [], out: string[] = []): string[] {
  if (Array.isArray(v)) {
    if (v.length === 0) out.push(formatPath(segs));
    v.forEach((x, i) => leafPaths(x, [...segs, i], out));
  } else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) leafPaths(x, [...segs, k], out);
  } else out.push(formatPath(segs));
  return out;
}

const spec: JobSpec = {
  name: 'demo',
  tasks: [
    { name: 'prep', kind: 'container-job', container: { image: 'host', ports: [{ name: 'ab', port: 1 }] } },
    { name: 'train', kind: 'pytorch', roles: { worker: { replicas: 1, container: { ports: [{ name: 'ab', port: 80 }] } } } },
  ],
};

describe('error paths to fields', () => {
  const fields = specFieldPaths(KINDS, spec);
  it('puts an error on its own field', () => {
    expect(fieldForError('tasks[1].roles.worker.container.ports[0].name', fields)).toBe('tasks[1].roles.worker.container.ports[0].name');
    expect(fieldForError('tasks[0].container.image', fields)).toBe('tasks[0].container.image');
    expect(fieldForError('name', fields)).toBe('name');
    expect(fieldForError('queue', fields)).toBe('queue');
  });
  it('puts an error without a field of its own on the nearest enclosing one', () => {
    // an unknown key (a typo) belongs to the mapping it is in
    expect(fieldForError('tasks[1].roles.worker.replica', fields)).toBe('tasks[1].roles.worker');
    expect(fieldForError('tasks[0].container.resources', fields)).toBe('tasks[0].container.resources');
    expect(fieldForError('tasks[1].roles.master', fields)).toBe('tasks[1].roles');
    expect(fieldForError('tasks[5].name', fields)).toBe('tasks');
    expect(fieldForError('tasks[0].container.ports[3].name', fields)).toBe('tasks[0].container.ports');
  });
  it('keeps what it cannot place for the general list', () => {
    expect(fieldForError('', fields)).toBe('');
    expect(fieldForError('bogus', fields)).toBe('');
  });
  it('groups errors by field and counts them per task', () => {
    const errors = [
      { path: 'tasks[1].roles.worker.container.ports[0].name', message: '"ab" must be 4-32 characters' },
      { path: 'tasks[0].container.ports[0].name', message: '"ab" must be 4-32 characters' },
      { path: 'tasks[0].container', message: 'give resources or a flavor' },
      { path: 'name', message: '"demo" must be 4-25 characters' },
    ];
    const by = errorsByField(errors, fields);
    expect(by.get('tasks[0].container')?.map((e) => e.message)).toEqual(['give resources or a flavor']);
    expect(by.get('name')).toHaveLength(1);
    expect([...errorCountByTask(errors)]).toEqual([
      [1, 1],
      [0, 2],
    ]);
  });
});

describe('the form has a field for every key', () => {
  it.each(examples().map((e) => [e.file, e.text]))('of %s', (_file, text) => {
    const m = modelFromSpec(importYaml(text).spec);
    const fields = specFieldPaths(KINDS, m.spec);
    const missing = leafPaths(m.spec).filter((p) => !fields.has(p));
    expect(missing).toEqual([]);
  });
  it('of every palette kind and mode', () => {
    for (const k of KINDS) {
      const variants = [newTask(KINDS, k.kind, 'task'), ...modeNames(k).map((mode) => withMode(KINDS, newTask(KINDS, k.kind, 'task'), mode))];
      for (const t of variants) {
        const s: JobSpec = { name: 'x', tasks: [t] };
        const fields = specFieldPaths(KINDS, s);
        expect(leafPaths(s).filter((p) => !fields.has(p))).toEqual([]);
      }
    }
  });
});
