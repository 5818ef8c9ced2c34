import { describe, expect, it } from 'vitest';
import { computeLayout } from '../src/lib/layout';

describe('computeLayout', () => {
  it('places every task below the tasks it depends on', () => {
    const nodes = ['a', 'b', 'c', 'd'].map((id) => ({ id, width: 200, height: 60 }));
    const edges = [
      { source: 'a', target: 'b' },
      { source: 'a', target: 'c' },
      { source: 'b', target: 'd' },
      { source: 'c', target: 'd' },
    ];
    const r = computeLayout({ seq: 7, nodes, edges });
    expect(r.seq).toBe(7);
    for (const e of edges) expect(r.positions[e.target].y).toBeGreaterThan(r.positions[e.source].y);
    expect(r.positions.b.x).not.toBe(r.positions.c.x);
  });
  it('lays out 1,000 tasks', () => {
    // ten stages of a hundred, each stage depending on one task of the previous stage
    const nodes = Array.from({ length: 1000 }, (_, i) => ({ id: `t${i}`, width: 210, height: 62 }));
    const edges = nodes.slice(100).map((n, i) => ({ source: `t${Math.floor(i / 100) * 100}`, target: n.id }));
    const r = computeLayout({ seq: 1, nodes, edges });
    expect(Object.keys(r.positions)).toHaveLength(1000);
    // fine in a worker; printed so a slow-down shows in the test log
    console.log(`layout of 1000 tasks: ${r.ms} ms`);
  });
});
