// Automatic layout of a DAG, top to bottom. Pure: the layout worker
// (src/workers/layout.worker.ts) runs it off the main thread; tests run it directly.
// Up to LARGE_GRAPH tasks: dagre (edge crossings minimised, long edges routed). Above that,
// dagre takes seconds (2.5 s for 1,000 tasks in chains, 10-17 s for a lattice with crossing
// edges), so a simple layered layout is used: every task one row below its deepest
// dependency (longest-path layering), rows ordered by the mean position of each task's
// dependencies, then of its dependents (barycentre sweeps), in linear-ish time.

import { Graph, layout } from '@dagrejs/dagre';

export interface LayoutNode {
  id: string;
  width: number;
  height: number;
}
export interface LayoutEdge {
  source: string;
  target: string;
}
export interface LayoutRequest {
  seq: number;
  nodes: LayoutNode[];
  edges: LayoutEdge[];
}
export interface LayoutResult {
  seq: number;
  positions: Record<string, { x: number; y: number }>;
  ms: number;
}

export const LARGE_GRAPH = 150;
const NODE_SEP = 24;
const RANK_SEP = 60;

export function computeLayout(req: LayoutRequest): LayoutResult {
  if (req.nodes.length > LARGE_GRAPH) return layeredLayout(req);
  const t0 = Date.now();
  const g = new Graph({ multigraph: false, compound: false });
  // Wide fan-outs (a sweep of 1,000 sibling tasks) would make one endless row; dagre's
  // defaults with modest separations keep them readable when zoomed.
  g.setGraph({ rankdir: 'TB', nodesep: 24, ranksep: 60, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set<string>();
  for (const n of req.nodes) {
    ids.add(n.id);
    g.setNode(n.id, { width: n.width, height: n.height });
  }
  for (const e of req.edges) if (ids.has(e.source) && ids.has(e.target) && e.source !== e.target) g.setEdge(e.source, e.target);
  layout(g);
  const positions: Record<string, { x: number; y: number }> = {};
  for (const n of req.nodes) {
    const p = g.node(n.id);
    // dagre gives centres; the canvas places nodes by their top-left corner
    positions[n.id] = { x: Math.round(p.x - n.width / 2), y: Math.round(p.y - n.height / 2) };
  }
  return { seq: req.seq, positions, ms: Date.now() - t0 };
}

// The layered layout for large graphs (see the top of this file).
export function layeredLayout(req: LayoutRequest): LayoutResult {
  const t0 = Date.now();
  const index = new Map<string, number>();
  req.nodes.forEach((n, i) => index.set(n.id, i));
  const n = req.nodes.length;
  const parents: number[][] = Array.from({ length: n }, () => []);
  const children: number[][] = Array.from({ length: n }, () => []);
  for (const e of req.edges) {
    const s = index.get(e.source);
    const t = index.get(e.target);
    if (s === undefined || t === undefined || s === t) continue;
    parents[t].push(s);
    children[s].push(t);
  }
  // Longest-path ranks in topological order (Kahn); anything left (a cycle, which the master
  // refuses anyway) goes on the first row.
  const rank = new Array<number>(n).fill(0);
  const indegree = parents.map((p) => p.length);
  const queue: number[] = [];
  for (let i = 0; i < n; i++) if (indegree[i] === 0) queue.push(i);
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const c of children[v]) {
      rank[c] = Math.max(rank[c], rank[v] + 1);
      if (--indegree[c] === 0) queue.push(c);
    }
  }
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) (rows[rank[i]] ??= []).push(i);
  for (let r = 0; r < rows.length; r++) rows[r] ??= [];
  const pos = new Array<number>(n).fill(0);
  const place = (row: number[]) => row.forEach((v, i) => (pos[v] = i));
  rows.forEach(place);
  // Order each row by the mean position of the neighbours in the row it is compared with.
  const sweep = (order: number[][], neighbours: number[][]) => {
    for (const row of order) {
      const key = new Map<number, number>();
      for (const v of row) {
        const ns = neighbours[v];
        key.set(v, ns.length ? ns.reduce((a, u) => a + pos[u], 0) / ns.length : pos[v]);
      }
      row.sort((a, b) => key.get(a)! - key.get(b)! || a - b);
      place(row);
    }
  };
  sweep(rows.slice(1), parents);
  sweep(rows.slice(0, -1).reverse(), children);
  sweep(rows.slice(1), parents);
  const width = Math.max(...req.nodes.map((x) => x.width));
  const height = Math.max(...req.nodes.map((x) => x.height));
  const widest = Math.max(...rows.map((r) => r.length));
  const positions: Record<string, { x: number; y: number }> = {};
  rows.forEach((row, r) => {
    // Each row centred under the widest one.
    const offset = ((widest - row.length) * (width + NODE_SEP)) / 2;
    row.forEach((v, i) => {
      positions[req.nodes[v].id] = { x: Math.round(10 + offset + i * (width + NODE_SEP)), y: 10 + r * (height + RANK_SEP) };
    });
  });
  return { seq: req.seq, positions, ms: Date.now() - t0 };
}
