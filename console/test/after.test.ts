import { describe, expect, it } from 'vitest';
import { afterText, orderedSpec, parseAfter } from '../src/lib/spec';

describe("the Create page's after field", () => {
  it('reads a line as yardctl --after does, and writes it back', () => {
    expect(parseAfter('prep-data, eval-b:failed ,sweep:ended')).toEqual([
      { job: 'prep-data' },
      { job: 'eval-b', condition: 'failed' },
      { job: 'sweep', condition: 'ended' },
    ]);
    expect(parseAfter('  ,  ')).toBeUndefined();
    expect(parseAfter('')).toBeUndefined();
    expect(afterText([{ job: 'a' }, { job: 'b', condition: 'succeeded' }, { job: 'c', condition: 'failed' }, 'd:ended'])).toBe(
      'a, b, c:failed, d:ended',
    );
    expect(afterText(undefined)).toBe('');
    // an unknown condition is kept for the master's validator to name
    expect(parseAfter('a:sometimes')).toEqual([{ job: 'a', condition: 'sometimes' }]);
  });

  it('puts hold and after before the tasks in an exported spec', () => {
    const spec = orderedSpec({ tasks: [], after: [{ job: 'a' }], name: 'x', hold: true });
    expect(Object.keys(spec)).toEqual(['name', 'hold', 'after', 'tasks']);
  });
});

describe("the Create page's topology field", () => {
  it("takes a task's topology errors at the field", async () => {
    const { fieldForError, specFieldPaths } = await import('../src/lib/fields');
    const { KINDS } = await import('./kinds');
    const spec = { name: 'topo-job', tasks: [{ name: 'train', kind: 'container-job', topology: { required: 'a rack' } }] };
    const fields = specFieldPaths(KINDS, spec);
    expect(fieldForError('tasks[0].topology.required', fields)).toBe('tasks[0].topology');
    expect(Object.keys(orderedSpec(spec).tasks[0])).toEqual(['name', 'kind', 'topology']);
  });
});
