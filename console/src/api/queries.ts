// Every read of the API goes through one TanStack Query cache (docs/console.md, "Data"):
// one query per resource, shared by the pages that show it (the queue list is fetched once
// for the Jobs filter, the Create page's queue choice and the Queues page), polled only
// while a page that wants it is shown and the tab is visible, and invalidated by what the
// event stream says changed.

import { QueryClient, useQuery, type QueryKey } from '@tanstack/react-query';
import { api, ApiError } from './client';
import type { DatasetJson, KindJson, KindsJson, NodeJson, QueueJson, User } from './types';

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // a refusal (4xx: not found, not allowed, logged out) is an answer, not a hiccup
      retry: (n, e) => !(e instanceof ApiError && e.status >= 400 && e.status < 500) && n < 2,
      // the live pages follow the event stream; the polled ones ask for focus refetches
      refetchOnWindowFocus: false,
    },
  },
});

export const keys = {
  whoami: ['whoami'] as const,
  kinds: ['kinds'] as const,
  queues: ['queues'] as const,
  datasets: ['datasets'] as const,
  nodes: ['nodes'] as const,
  jobs: ['jobs'] as const, // + the filters and cursor of one page
  job: (name: string) => ['job', name] as const, // every query of one job
  jobDetail: (name: string) => ['job', name, 'detail'] as const,
  jobEvents: (name: string) => ['job', name, 'events'] as const,
  jobTop: (name: string) => ['job', name, 'top'] as const,
};

export function errorText(e: unknown): string {
  return e ? (e as Error).message : '';
}

// Marks what an event touched as stale: a page showing it now refetches at once (unless
// `quiet`), any other when it is next shown. Invalidations of one key within `ms` are one.
const pending = new Map<string, ReturnType<typeof setTimeout>>();
export function invalidateSoon(key: QueryKey, ms = 400, quiet = false): void {
  const id = JSON.stringify(key);
  if (pending.has(id)) return;
  pending.set(
    id,
    setTimeout(() => {
      pending.delete(id);
      void queryClient.invalidateQueries({ queryKey: key, refetchType: quiet ? 'none' : 'active' });
    }, ms),
  );
}

// Who is logged in: null when nobody is (or the master cannot say).
export function useWhoami() {
  return useQuery({
    queryKey: keys.whoami,
    queryFn: () => api<User>('/whoami', { quiet401: true }).catch(() => null),
    staleTime: Infinity,
    retry: false,
  });
}

// The task kinds' descriptors: fetched once per session.
export function useKinds() {
  return useQuery({
    queryKey: keys.kinds,
    queryFn: ({ signal }) => api<KindsJson>('/kinds', { signal }).then((r): KindJson[] => r.kinds ?? []),
    staleTime: Infinity,
    gcTime: Infinity,
  });
}

// `pollMs`: refreshed that often while shown; without it, read when older than 30 s.
function listQuery<T>(key: QueryKey, path: string, pollMs?: number) {
  return {
    queryKey: key,
    queryFn: ({ signal }: { signal: AbortSignal }) => api<{ items: T[] }>(path, { signal }).then((r) => r.items),
    staleTime: pollMs ? 0 : 30000,
    refetchInterval: pollMs ?? false,
    refetchOnWindowFocus: pollMs !== undefined,
  } as const;
}

export function useQueues(pollMs?: number) {
  return useQuery(listQuery<QueueJson>(keys.queues, '/queues', pollMs));
}

export function useDatasets(pollMs?: number) {
  return useQuery(listQuery<DatasetJson>(keys.datasets, '/datasets', pollMs));
}

export function useNodes(pollMs: number) {
  return useQuery(listQuery<NodeJson>(keys.nodes, '/nodes', pollMs));
}
