// fetch() for /api/v1: same origin, the session cookie, and the X-Yard-Console header the
// master's CSRF guard asks of every cookie-authenticated POST and DELETE (sent on every call
// so no request is forgotten). A 401 anywhere sends the user to the login page.

import type { SpecErrorJson } from './types';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors: SpecErrorJson[] = [],
  ) {
    super(message);
  }
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();

export function onUnauthorized(l: Listener): () => void {
  unauthorizedListeners.add(l);
  return () => {
    unauthorizedListeners.delete(l);
  };
}

export function reportUnauthorized(): void {
  unauthorizedListeners.forEach((l) => l());
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'DELETE';
  json?: unknown;
  yaml?: string;
  signal?: AbortSignal;
  // a 401 is the caller's to handle (the login form), not a redirect
  quiet401?: boolean;
}

export function query(params: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { 'X-Yard-Console': '1', Accept: 'application/json' };
  let body: string | undefined;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.yaml !== undefined) {
    headers['Content-Type'] = 'application/yaml';
    body = opts.yaml;
  }
  let res: Response;
  try {
    res = await fetch(`/api/v1${path}`, {
      method: opts.method ?? (body !== undefined ? 'POST' : 'GET'),
      headers,
      body,
      credentials: 'same-origin',
      signal: opts.signal,
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, `cannot reach the master: ${(e as Error).message}`);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
  }
  if (!res.ok) {
    const d = (data ?? {}) as { error?: string; errors?: SpecErrorJson[] };
    const err = new ApiError(res.status, d.error ?? `${res.status} ${res.statusText}`, d.errors ?? []);
    if (res.status === 401 && !opts.quiet401) reportUnauthorized();
    throw err;
  }
  return data as T;
}

export function enc(s: string): string {
  return encodeURIComponent(s);
}
