import { describe, expect, it } from 'vitest';
import { cycleIfConnected, cycleMessage, findCycle } from '../src/lib/graph';

const chain = [
  { name: 'prep', dependsOn: [] },
  { name: 'train', dependsOn: ['prep'] },
  { name: 'eval', dependsOn: ['train'] },
  { name: 'side' },
];

describe('cycleIfConnected', () => {
  it('allows an edge that keeps a DAG', () => {
    expect(cycleIfConnected(chain, 'prep', 'eval')).toBeNull();
    expect(cycleIfConnected(chain, 'side', 'prep')).toBeNull();
    expect(cycleIfConnected(chain, 'eval', 'side')).toBeNull();
  });
  it('refuses a task depending on itself', () => {
    expect(cycleIfConnected(chain, 'train', 'train')).toEqual(['train', 'train']);
  });
  it('refuses a direct back edge and names the cycle in run order', () => {
    // train depends on prep; making prep depend on train closes prep -> train -> prep
    expect(cycleIfConnected(chain, 'train', 'prep')).toEqual(['prep', 'train', 'prep']);
  });
  it('refuses a transitive back edge', () => {
    expect(cycleIfConnected(chain, 'eval', 'prep')).toEqual(['prep', 'train', 'eval', 'prep']);
  });
  it('ignores unknown names', () => {
    expect(cycleIfConnected([{ name: 'a', dependsOn: ['ghost'] }], 'a', 'b')).toBeNull();
  });
  it('handles a wide graph quickly', () => {
    const tasks = [{ name: 'root' }, ...Array.from({ length: 1000 }, (_, i) => ({ name: `t${i}`, dependsOn: ['root'] }))];
    tasks.push({ name: 'join', dependsOn: tasks.slice(1).map((t) => t.name!) });
    const t0 = Date.now();
    expect(cycleIfConnected(tasks, 'join', 'root')?.[0]).toBe('root');
    expect(Date.now() - t0).toBeLessThan(500);
  });
});

describe('findCycle', () => {
  it('finds none in a DAG', () => {
    expect(findCycle(chain)).toBeNull();
  });
  it('finds a cycle', () => {
    const c = findCycle([
      { name: 'a', dependsOn: ['c'] },
      { name: 'b', dependsOn: ['a'] },
      { name: 'c', dependsOn: ['b'] },
    ]);
    expect(c).not.toBeNull();
    expect(c![0]).toBe(c![c!.length - 1]);
    expect(new Set(c)).toEqual(new Set(['a', 'b', 'c']));
  });
});

describe('cycleMessage', () => {
  it('says what would happen', () => {
    expect(cycleMessage(['a', 'a'])).toBe('a task cannot depend on itself (a)');
    expect(cycleMessage(['a', 'b', 'a'])).toBe('that would make a cycle: a → b → a');
  });
});
