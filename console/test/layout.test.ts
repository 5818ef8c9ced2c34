import { describe, expect, it } from 'vitest';
import { computeLayout, layeredLayout, LARGE_GRAPH } from '../src/lib/layout';

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
  it('lays out large graphs in layers: below every dependency, no overlaps, neighbours close', () => {
    // prep, then 50 chains of 20 under it (the benchmark's shape), and a lattice with crossings
    const nodes = [{ id: 'prep', width: 210, height: 62 }];
    const edges: { source: string; target: string }[] = [];
    for (let c = 0; c < 50; c++)
      for (let k = 0; k < 20; k++) {
        nodes.push({ id: `c${c}-${k}`, width: 210, height: 62 });
        edges.push({ source: k === 0 ? 'prep' : `c${c}-${k - 1}`, target: `c${c}-${k}` });
      }
    for (let k = 1; k < 20; k++) edges.push({ source: `c${(k * 7) % 50}-${k - 1}`, target: `c${(k * 13) % 50}-${k}` });
    const r = computeLayout({ seq: 3, nodes, edges });
    expect(r.seq).toBe(3);
    expect(Object.keys(r.positions)).toHaveLength(nodes.length);
    for (const e of edges) expect(r.positions[e.target].y).toBeGreaterThan(r.positions[e.source].y);
    const seen = new Set<string>();
    for (const p of Object.values(r.positions)) {
      const key = `${p.x},${p.y}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
    }
    // a chain without extra edges stays in one column
    expect(r.positions['c1-5'].x).toBe(r.positions['c1-6'].x);
  });
  it('uses the layered layout only above LARGE_GRAPH tasks', () => {
    const nodes = Array.from({ length: LARGE_GRAPH + 1 }, (_, i) => ({ id: `n${i}`, width: 100, height: 40 }));
    const edges = nodes.slice(1).map((x) => ({ source: 'n0', target: x.id }));
    const big = computeLayout({ seq: 1, nodes, edges });
    expect(big.positions).toEqual(layeredLayout({ seq: 1, nodes, edges }).positions);
  });
});
