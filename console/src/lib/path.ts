// Spec paths as the validator writes them: `tasks[1].roles.worker.container.ports[0].name`.
// Role, env and key names are identifiers (no dots or brackets), so the grammar is simple.

export type Segment = string | number;

export function parsePath(path: string): Segment[] {
  const out: Segment[] = [];
  const re = /([^.[\]]+)|\[(\d+)\]/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(path)) !== null) out.push(m[2] !== undefined ? Number(m[2]) : m[1]);
  return out;
}

export function formatPath(segments: readonly Segment[]): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else out += out ? `.${s}` : s;
  }
  return out;
}

export function join(base: string, key: Segment): string {
  if (typeof key === 'number') return `${base}[${key}]`;
  return base ? `${base}.${key}` : key;
}

export function getAt(root: unknown, path: string | readonly Segment[]): unknown {
  const segs = typeof path === 'string' ? parsePath(path) : path;
  let cur: unknown = root;
  for (const s of segs) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[s];
  }
  return cur;
}

// Returns a copy of `root` with the value at `path` replaced (undefined deletes the key or
// list item's value), sharing every untouched branch. Missing parents are created as
// objects or arrays by the next segment's type.
export function setAt<T>(root: T, path: string | readonly Segment[], value: unknown): T {
  const segs = typeof path === 'string' ? parsePath(path) : path;
  return setRec(root, segs, 0, value) as T;
}

function setRec(node: unknown, segs: readonly Segment[], i: number, value: unknown): unknown {
  if (i === segs.length) return value;
  const key = segs[i];
  if (typeof key === 'number') {
    const arr = Array.isArray(node) ? [...node] : [];
    const next = setRec(arr[key], segs, i + 1, value);
    if (next === undefined && i + 1 === segs.length) arr.splice(key, 1);
    else arr[key] = next;
    return arr;
  }
  const obj: Record<string, unknown> =
    node !== null && typeof node === 'object' && !Array.isArray(node) ? { ...(node as Record<string, unknown>) } : {};
  const next = setRec(obj[key], segs, i + 1, value);
  if (next === undefined) delete obj[key];
  else obj[key] = next;
  return obj;
}

// The index of the task a path points into (`tasks[3]...` -> 3), or -1.
export function taskIndexOf(path: string): number {
  const m = /^tasks\[(\d+)\]/.exec(path);
  return m ? Number(m[1]) : -1;
}

// Whether `prefix` is `path` or one of its ancestors, segment-wise.
export function isPrefix(prefix: string, path: string): boolean {
  if (prefix === path) return true;
  if (!path.startsWith(prefix)) return false;
  const c = path.charAt(prefix.length);
  return c === '.' || c === '[';
}
