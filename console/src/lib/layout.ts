// Automatic layout of a DAG with dagre, top to bottom. Pure: the layout worker
// (src/workers/layout.worker.ts) runs it off the main thread; tests run it directly.

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

export function computeLayout(req: LayoutRequest): LayoutResult {
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
