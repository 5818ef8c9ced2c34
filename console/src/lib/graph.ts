// The DAG rules the canvas enforces as the user draws: an edge A -> B means B dependsOn A,
// and an edge that would close a cycle is refused on the spot (the master refuses it at
// submit too; docs/design.md §2, "The DAG").

export interface DagTask {
  name?: string;
  dependsOn?: string[];
}

function dependsIndex(tasks: readonly DagTask[]): Map<string, string[]> {
  const deps = new Map<string, string[]>();
  for (const t of tasks) if (t.name !== undefined) deps.set(t.name, [...(deps.get(t.name) ?? []), ...(t.dependsOn ?? [])]);
  return deps;
}

// Whether making `to` depend on `from` closes a cycle: it does when `to` is `from` or one of
// `from`'s (transitive) dependencies. Returns the cycle in run order (`to` first and last),
// or null.
export function cycleIfConnected(tasks: readonly DagTask[], from: string, to: string): string[] | null {
  if (from === to) return [to, to];
  const deps = dependsIndex(tasks);
  // depth-first search from `from` along dependsOn, remembering how each task was reached
  const parent = new Map<string, string>();
  const stack = [from];
  const seen = new Set([from]);
  while (stack.length) {
    const cur = stack.pop()!;
    for (const d of deps.get(cur) ?? []) {
      if (seen.has(d)) continue;
      seen.add(d);
      parent.set(d, cur);
      if (d === to) {
        // in run order: to -> ... -> from, and the new edge from -> to closes it
        const path = [to];
        let p = to;
        while (p !== from) {
          p = parent.get(p)!;
          path.push(p);
        }
        return [...path, to];
      }
      stack.push(d);
    }
  }
  return null;
}

// One cycle of the graph as task names (first repeated at the end), or null when it is a DAG.
// Unknown names in dependsOn are ignored here (the validator names them).
export function findCycle(tasks: readonly DagTask[]): string[] | null {
  const deps = dependsIndex(tasks);
  const state = new Map<string, 1 | 2>(); // 1 on the stack, 2 done
  for (const start of deps.keys()) {
    if (state.has(start)) continue;
    // iterative DFS keeping the path
    const path: string[] = [];
    const iters: number[] = [];
    path.push(start);
    iters.push(0);
    state.set(start, 1);
    while (path.length) {
      const cur = path[path.length - 1];
      const list = deps.get(cur) ?? [];
      const k = iters[iters.length - 1];
      if (k >= list.length) {
        state.set(cur, 2);
        path.pop();
        iters.pop();
        continue;
      }
      iters[iters.length - 1] = k + 1;
      const next = list[k];
      if (!deps.has(next)) continue;
      const s = state.get(next);
      if (s === 1) return [...path.slice(path.indexOf(next)), next];
      if (s === undefined) {
        state.set(next, 1);
        path.push(next);
        iters.push(0);
      }
    }
  }
  return null;
}

export function cycleMessage(cycle: readonly string[]): string {
  if (cycle.length === 2 && cycle[0] === cycle[1]) return `a task cannot depend on itself (${cycle[0]})`;
  return `that would make a cycle: ${cycle.join(' → ')}`;
}
