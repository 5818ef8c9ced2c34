// A task's logs. The view is a window of the last N lines of each replica (N = 500 at
// first); "Load earlier" widens it (5,000, 50,000, then everything) and reads again, since
// the master cuts log pages forward from the start of what it sends (docs/http_api.md).
// While the task runs, the window is read and then followed over SSE (`logs/stream?tail=N`);
// EventSource resumes a dropped stream with Last-Event-ID, and the master skips what the
// browser already has, so no line is lost or shown twice. A finished task is read as pages
// of at most 1 MiB ("Load more" reads the next). Logs outlive replicas: the master serves
// finished replicas' output from its archive.

import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { api, enc, query } from '../api/client';
import type { LogChunk, LogsPage, ReplicaJson } from '../api/types';

const WINDOWS = [500, 5000, 50000, -1]; // -1: everything
const PAGE_BYTES = 1 << 20;
const MAX_CHARS = 16 * 1024 * 1024; // what one view keeps of a followed stream

interface Selector {
  role: string;
  index: string; // '' = every index
}

function selectorParams(s: Selector) {
  return { role: s.role || undefined, index: s.role && s.index !== '' ? s.index : undefined };
}

function trimFront(chunks: LogChunk[]): { chunks: LogChunk[]; trimmed: boolean } {
  let total = chunks.reduce((n, c) => n + c.text.length, 0);
  if (total <= MAX_CHARS) return { chunks, trimmed: false };
  let i = 0;
  while (total > MAX_CHARS && i < chunks.length - 1) total -= chunks[i++].text.length;
  return { chunks: chunks.slice(i), trimmed: true };
}

// Whether a window of `tail` lines per replica may have left earlier lines out.
export function mayHaveEarlier(chunks: readonly LogChunk[], tail: number): boolean {
  if (tail < 0) return false;
  const lines = new Map<string, number>();
  for (const c of chunks) {
    let n = 0;
    for (let i = c.text.indexOf('\n'); i >= 0; i = c.text.indexOf('\n', i + 1)) n++;
    lines.set(c.replica, (lines.get(c.replica) ?? 0) + n);
  }
  for (const n of lines.values()) if (n >= tail) return true;
  return false;
}

// Merges a chunk into the list: consecutive output of one replica is one chunk.
function appendChunks(list: LogChunk[], more: readonly LogChunk[]): LogChunk[] {
  const out = [...list];
  for (const c of more) {
    const last = out[out.length - 1];
    if (last && last.replica === c.replica) out[out.length - 1] = { replica: c.replica, text: last.text + c.text };
    else out.push(c);
  }
  return out;
}

export function LogsView({ job, task, replicas, live }: { job: string; task: string; replicas: ReplicaJson[]; live: boolean }) {
  const [sel, setSel] = useState<Selector>({ role: '', index: '' });
  const [windowAt, setWindowAt] = useState(0);
  const [chunks, setChunks] = useState<LogChunk[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [problems, setProblems] = useState('');
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(false);
  const [follow, setFollow] = useState(true);
  const [ended, setEnded] = useState('');
  const [trimmed, setTrimmed] = useState(false);
  const [reopen, setReopen] = useState(0);
  const box = useRef<HTMLPreElement>(null);
  const atBottom = useRef(true);
  const fromBottom = useRef<number | null>(null);

  const tail = WINDOWS[windowAt];
  const following = follow && live;
  const roles = [...new Set(replicas.map((r) => r.role))];
  const indexes = [...new Set(replicas.filter((r) => r.role === sel.role).map((r) => r.index))].sort((a, b) => a - b);
  const base = `/jobs/${enc(job)}/logs`;
  const params = { task, ...selectorParams(sel), tail: tail >= 0 ? tail : undefined };

  const reset = useCallback(() => {
    setChunks([]);
    setNext(null);
    setEnded('');
    setTrimmed(false);
    setError('');
    setProblems('');
  }, []);

  // a finished task (or follow off): pages
  useEffect(() => {
    if (following) return undefined;
    const ctl = new AbortController();
    reset();
    setLoading(true);
    api<LogsPage>(`${base}${query({ ...params, limit: PAGE_BYTES })}`, { signal: ctl.signal })
      .then((p) => {
        setChunks(appendChunks([], p.chunks));
        setNext(p.nextCursor);
        setProblems(p.problems);
      })
      .catch((e: Error) => e.name !== 'AbortError' && setError(e.message))
      .finally(() => setLoading(false));
    return () => ctl.abort();
    // (params is built from these on every render)
  }, [following, base, task, sel, tail, reset]);

  // a running task: the window, then new output as it is written
  useEffect(() => {
    if (!following) return undefined;
    reset();
    setLoading(true);
    const es = new EventSource(`/api/v1${base}/stream${query(params)}`);
    es.onopen = () => setLoading(false);
    es.addEventListener('log', (e) => {
      setLoading(false);
      try {
        const c = JSON.parse((e as MessageEvent).data as string) as LogChunk;
        setChunks((list) => {
          const t = trimFront(appendChunks(list, [c]));
          if (t.trimmed) setTrimmed(true);
          return t.chunks;
        });
      } catch {
        /* a malformed event is skipped */
      }
    });
    es.addEventListener('end', (e) => {
      let message = '';
      try {
        message = (JSON.parse((e as MessageEvent).data as string) as { message: string }).message;
      } catch {
        /* no message */
      }
      setEnded(message || 'The job has ended: nothing more to follow.');
      es.close();
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        setLoading(false);
        setError('The log stream was refused or lost.');
      }
    };
    return () => es.close();
  }, [following, base, task, sel, tail, reset, reopen]);

  const loadMore = async () => {
    if (!next) return;
    setLoading(true);
    try {
      const p = await api<LogsPage>(`${base}${query({ ...params, cursor: next, limit: PAGE_BYTES })}`);
      setChunks((c) => appendChunks(c, p.chunks));
      setNext(p.nextCursor);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setLoading(false);
    }
  };

  const loadEarlier = () => {
    if (box.current) fromBottom.current = box.current.scrollHeight - box.current.scrollTop;
    setWindowAt((w) => Math.min(w + 1, WINDOWS.length - 1));
  };

  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    if (fromBottom.current !== null && chunks.length) {
      el.scrollTop = el.scrollHeight - fromBottom.current; // widened: stay on the same line
      fromBottom.current = null;
    } else if (atBottom.current) {
      el.scrollTop = el.scrollHeight;
    }
  }, [chunks]);

  const many = new Set(chunks.map((c) => c.replica)).size > 1 || (sel.role === '' && replicas.length > 1);
  const text = chunks.map((c) => (many ? prefixLines(c) : c.text)).join('');
  const earlier = windowAt < WINDOWS.length - 1 && mayHaveEarlier(chunks, tail);

  return (
    <div className="logs">
      <div className="logs-bar">
        <select data-testid="logs-role" value={sel.role} onChange={(e) => setSel({ role: e.target.value, index: '' })}>
          <option value="">every replica</option>
          {roles.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        {sel.role && (
          <select data-testid="logs-index" value={sel.index} onChange={(e) => setSel({ ...sel, index: e.target.value })}>
            <option value="">every index</option>
            {indexes.map((i) => (
              <option key={i} value={String(i)}>
                {i}
              </option>
            ))}
          </select>
        )}
        <button data-testid="logs-load-earlier" disabled={!earlier || loading} onClick={loadEarlier} title={tail >= 0 ? `Showing the last ${tail} lines of each replica` : 'Showing everything'}>
          Load earlier
        </button>
        <label className="check" title={live ? 'Show new output as it is written' : 'The task has finished'}>
          <input type="checkbox" data-testid="logs-follow" checked={following} disabled={!live} onChange={(e) => setFollow(e.target.checked)} />
          follow
        </label>
        {loading && <span className="muted">loading…</span>}
        <span className="muted small">{tail >= 0 ? `last ${tail} lines per replica` : 'all output'}</span>
      </div>
      {error && (
        <div className="error-text" data-testid="logs-error">
          {error}{' '}
          {following && (
            <button className="link" onClick={() => setReopen((n) => n + 1)}>
              retry
            </button>
          )}
        </div>
      )}
      {problems && (
        <div className="warn-text" data-testid="logs-problems">
          {problems}
        </div>
      )}
      {trimmed && <div className="muted small">The oldest followed output was trimmed from this view (it is still in the log).</div>}
      <pre
        className="logs-view"
        data-testid="logs-view"
        ref={box}
        onScroll={(e) => {
          const el = e.currentTarget;
          atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {text || (loading ? '' : 'No output yet.')}
      </pre>
      {next && !following && (
        <button data-testid="logs-load-more" disabled={loading} onClick={() => void loadMore()}>
          Load more
        </button>
      )}
      {ended && (
        <div className="muted small" data-testid="logs-ended">
          {ended}
        </div>
      )}
    </div>
  );
}

function prefixLines(c: LogChunk): string {
  const lines = c.text.split('\n');
  const last = lines.pop();
  const out = lines.map((l) => `[${c.replica}] ${l}\n`).join('');
  return last ? `${out}[${c.replica}] ${last}` : out;
}
