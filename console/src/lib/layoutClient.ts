// The main-thread side of the layout worker: one worker for the page, requests numbered so
// that only the answer to the latest request of each caller is used.

import type { LayoutEdge, LayoutNode, LayoutResult } from './layout';

let worker: Worker | null = null;
let seq = 0;
const waiting = new Map<number, (r: LayoutResult) => void>();

function getWorker(): Worker {
  if (!worker) {
    worker = new Worker(new URL('../workers/layout.worker.ts', import.meta.url), { type: 'module' });
    worker.onmessage = (e: MessageEvent<LayoutResult>) => {
      const done = waiting.get(e.data.seq);
      waiting.delete(e.data.seq);
      done?.(e.data);
    };
  }
  return worker;
}

export function layoutInWorker(nodes: LayoutNode[], edges: LayoutEdge[]): Promise<LayoutResult> {
  const id = ++seq;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    getWorker().postMessage({ seq: id, nodes, edges });
  });
}
