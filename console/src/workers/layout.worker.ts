/// <reference lib="webworker" />
// Runs dagre off the main thread, so a 1,000-task DAG lays out without freezing the page.
import { computeLayout, type LayoutRequest } from '../lib/layout';

self.onmessage = (e: MessageEvent<LayoutRequest>) => {
  (self as unknown as Worker).postMessage(computeLayout(e.data));
};
