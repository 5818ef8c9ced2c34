// The job list: filters and pages are server-side (limit + an opaque cursor), never the
// whole list; rows change in place from the cluster event stream. A job that appears while
// the first page is shown is announced rather than pushed in, so rows do not jump under the
// pointer.

import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, query } from '../api/client';
import { errorText, invalidateSoon, keys, queryClient, useQueues } from '../api/queries';
import { useEventStream } from '../api/sse';
import type { JobList, JobSummary, User } from '../api/types';
import { JobFlags } from '../components/JobFlags';
import { StateBadge } from '../components/StateIcon';
import { LiveStatus } from '../components/LiveStatus';
import { ageText } from '../lib/format';
import { JOB_STATES } from '../lib/states';
import { Link, navigate, useLocation } from '../router';

const PAGE = 50;

interface Filters {
  state: string;
  queue: string;
  q: string;
  all: boolean;
}

function filtersFrom(search: URLSearchParams): Filters {
  return { state: search.get('state') ?? '', queue: search.get('queue') ?? '', q: search.get('q') ?? '', all: search.get('all') === 'true' };
}

function useNow(periodMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), periodMs);
    return () => clearInterval(t);
  }, [periodMs]);
  return now;
}

const JobRow = memo(function JobRow({ job, now, deleted }: { job: JobSummary; now: number; deleted: boolean }) {
  return (
    <tr data-testid={`job-row-${job.name}`} className={deleted ? 'deleted' : ''}>
      <td>
        <Link to={`/jobs/${encodeURIComponent(job.name)}`} data-testid={`job-link-${job.name}`}>
          {job.name}
        </Link>
        {job.array && <span className="muted"> ({job.array})</span>}
      </td>
      <td>
        <StateBadge state={deleted ? 'Deleted' : job.state} testid={`job-state-${job.name}`} />
        {!deleted && <JobFlags job={job} testid={`job-flags-${job.name}`} />}
        {job.reason && <div className="muted small">{job.reason}</div>}
      </td>
      <td>{job.queue}</td>
      <td>{job.owner}</td>
      <td title={new Date(job.submittedAt).toISOString()}>{ageText(job.submittedAt, now)}</td>
      <td data-testid={`job-tasks-${job.name}`}>
        {job.tasksDone}/{job.tasksTotal}
      </td>
    </tr>
  );
});

// Whether a job the stream announces belongs on this list.
function matches(s: JobSummary, f: Filters, user: User): boolean {
  return (
    (!f.state || s.state === f.state) &&
    (!f.queue || s.queue === f.queue) &&
    (!f.q || s.name.includes(f.q)) &&
    (f.all || !s.owner || s.owner === user.name)
  );
}

export function JobsPage({ user }: { user: User }) {
  const { search } = useLocation();
  const filters = useMemo(() => filtersFrom(search), [search]);
  const [nameDraft, setNameDraft] = useState(filters.q);
  // the cursor of each page seen, for these filters (new filters start again at page one)
  const filtersKey = JSON.stringify(filters);
  const [pages, setPages] = useState<{ key: string; cursors: (string | null)[] }>({ key: filtersKey, cursors: [null] });
  const cursors = pages.key === filtersKey ? pages.cursors : [null];
  const setCursors = (f: (c: (string | null)[]) => (string | null)[]) => setPages({ key: filtersKey, cursors: f(cursors) });
  const [fresh, setFresh] = useState(0);
  const [deleted, setDeleted] = useState<Set<string>>(new Set());
  const queues = useQueues().data?.map((q) => q.name) ?? [];
  const now = useNow(10000);
  const page = cursors.length - 1;

  const setFilter = useCallback(
    (patch: Partial<Filters>) => {
      const f = { ...filters, ...patch };
      navigate(`/jobs${query({ state: f.state, queue: f.queue, q: f.q, all: f.all ? 'true' : undefined })}`, true);
    },
    [filters],
  );

  // the name filter is typed: ask the master once typing pauses
  useEffect(() => {
    if (nameDraft === filters.q) return undefined;
    const t = setTimeout(() => setFilter({ q: nameDraft }), 300);
    return () => clearTimeout(t);
  }, [nameDraft, filters.q, setFilter]);

  const cursor = cursors[cursors.length - 1];
  const params = { state: filters.state, queue: filters.queue, q: filters.q, all: filters.all ? 'true' : undefined, limit: PAGE, cursor };
  const key = [...keys.jobs, params];
  // what the stream said while a page was being fetched: applied to the page when it comes
  const recent = useRef<Map<string, JobSummary> | null>(null);
  const jobs = useQuery({
    queryKey: key,
    queryFn: async ({ signal }) => {
      recent.current = new Map();
      const l = await api<JobList>(`/jobs${query(params)}`, { signal });
      const seen = recent.current ?? new Map<string, JobSummary>();
      recent.current = null;
      setFresh(0);
      setDeleted(new Set());
      return seen.size ? { ...l, items: l.items.map((j) => (seen.has(j.name) ? { ...j, ...seen.get(j.name) } : j)) } : l;
    },
    placeholderData: keepPreviousData, // a new page or filter shows the old rows until it comes
  });
  const list = jobs.data ?? null;
  const error = errorText(jobs.error);
  const reload = () => void queryClient.invalidateQueries({ queryKey: key });

  const status = useEventStream('/api/v1/events/stream', {
    job: (d) => {
      const s = d as JobSummary;
      recent.current?.set(s.name, s);
      // a job's change touches its page and its queue's counts, wherever they are cached
      invalidateSoon(keys.job(s.name), 400, true);
      invalidateSoon(keys.queues, 1000, true);
      const cur = queryClient.getQueryData<JobList>(key);
      const i = cur ? cur.items.findIndex((j) => j.name === s.name) : -1;
      if (cur && i >= 0) {
        const items = [...cur.items];
        items[i] = { ...items[i], ...s };
        queryClient.setQueryData<JobList>(key, { ...cur, items });
      } else if (cur && page === 0 && s.state === 'Queued' && matches(s, filters, user)) {
        setFresh((n) => n + 1);
      }
    },
    deleted: (d) => {
      const name = (d as { job: string }).job;
      queryClient.removeQueries({ queryKey: keys.job(name) });
      setDeleted((s) => new Set(s).add(name));
    },
    // the stream is open: the page is read again, so nothing that changed between the first
    // read and the stream's start is missed; `reset`: what was missed is gone
    hello: reload,
    reset: reload,
  });

  const start = page * PAGE;
  return (
    <div className="page">
      <div className="page-head">
        <h2>Jobs</h2>
        <LiveStatus status={status} />
        <Link to="/create" className="button primary" data-testid="jobs-create">
          Create job
        </Link>
      </div>
      <div className="filters">
        <label>
          State
          <select data-testid="filter-state" value={filters.state} onChange={(e) => setFilter({ state: e.target.value })}>
            <option value="">any</option>
            {JOB_STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Queue
          <select data-testid="filter-queue" value={filters.queue} onChange={(e) => setFilter({ queue: e.target.value })}>
            <option value="">any</option>
            {[...new Set([...queues, ...(filters.queue ? [filters.queue] : [])])].map((q) => (
              <option key={q}>{q}</option>
            ))}
          </select>
        </label>
        <label>
          Name
          <input data-testid="filter-name" type="search" placeholder="contains…" value={nameDraft} onChange={(e) => setNameDraft(e.target.value)} />
        </label>
        {user.admin && (
          <label className="check">
            <input data-testid="filter-all" type="checkbox" checked={filters.all} onChange={(e) => setFilter({ all: e.target.checked })} />
            all users
          </label>
        )}
      </div>
      {error && (
        <div className="error-banner" data-testid="jobs-error">
          {error}
        </div>
      )}
      {fresh > 0 && (
        <button className="notice" data-testid="jobs-new" onClick={reload}>
          {fresh} new {fresh === 1 ? 'job' : 'jobs'}: show
        </button>
      )}
      <table className="table" data-testid="jobs-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>State</th>
            <th>Queue</th>
            <th>Owner</th>
            <th>Age</th>
            <th>Tasks done</th>
          </tr>
        </thead>
        <tbody>
          {list?.items.map((j) => <JobRow key={j.name} job={j} now={now} deleted={deleted.has(j.name)} />)}
          {list && list.items.length === 0 && (
            <tr>
              <td colSpan={6} className="empty" data-testid="jobs-empty">
                No jobs{filters.state || filters.queue || filters.q ? ' match these filters' : ' yet'}.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <div className="pager">
        <button data-testid="page-prev" disabled={page === 0} onClick={() => setCursors((c) => c.slice(0, -1))}>
          ← Newer
        </button>
        <span data-testid="page-info">
          {list ? `${list.items.length ? start + 1 : 0}–${start + list.items.length} of ${list.total}` : 'loading…'}
        </span>
        <button data-testid="page-next" disabled={!list?.nextCursor} onClick={() => list?.nextCursor && setCursors((c) => [...c, list.nextCursor])}>
          Older →
        </button>
      </div>
    </div>
  );
}
