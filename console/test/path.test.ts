import { describe, expect, it } from 'vitest';
import { formatPath, getAt, isPrefix, parsePath, setAt, taskIndexOf } from '../src/lib/path';

describe('paths', () => {
  it('parses and formats the validator paths', () => {
    const p = 'tasks[1].roles.worker.container.ports[0].name';
    expect(parsePath(p)).toEqual(['tasks', 1, 'roles', 'worker', 'container', 'ports', 0, 'name']);
    expect(formatPath(parsePath(p))).toBe(p);
    expect(parsePath('name')).toEqual(['name']);
    expect(taskIndexOf(p)).toBe(1);
    expect(taskIndexOf('name')).toBe(-1);
  });
  it('gets and sets without touching other branches', () => {
    const root: { tasks: { name: string; roles?: { w: { replicas?: number } } }[] } = { tasks: [{ name: 'a', roles: { w: { replicas: 1 } } }, { name: 'b' }] };
    const next = setAt(root, 'tasks[0].roles.w.replicas', 3);
    expect(getAt(next, 'tasks[0].roles.w.replicas')).toBe(3);
    expect(root.tasks[0].roles!.w.replicas).toBe(1);
    expect(next.tasks[1]).toBe(root.tasks[1]);
    const gone = setAt(next, 'tasks[0].roles.w.replicas', undefined);
    expect(gone.tasks[0].roles!.w).toEqual({});
    const created = setAt({} as Record<string, unknown>, 'a.b[0].c', 'x');
    expect(created).toEqual({ a: { b: [{ c: 'x' }] } });
    const removed = setAt({ l: [1, 2, 3] }, 'l[1]', undefined);
    expect(removed.l).toEqual([1, 3]);
  });
  it('knows prefixes by segment', () => {
    expect(isPrefix('tasks[1]', 'tasks[1].name')).toBe(true);
    expect(isPrefix('tasks[1]', 'tasks[10].name')).toBe(false);
    expect(isPrefix('tasks[1].env', 'tasks[1].envx')).toBe(false);
  });
});
