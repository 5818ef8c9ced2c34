// One job: its DAG with live task states, the selected task's panel, the job's events, and
// cancel/delete. Live through the job-scoped event stream: a `task` event updates its node
// at once; `job`/`task` events also schedule a re-fetch of the detail (debounced), which
// brings replicas and reasons.

import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, ApiError, enc } from '../api/client';
import { useEventStream } from '../api/sse';
import type { EventJson, JobDetail, JobSummary, TaskEventJson } from '../api/types';
import { Confirm } from '../components/Confirm';
import { JobDag } from '../components/JobDag';
import { LiveStatus } from '../components/LiveStatus';
import { StateBadge } from '../components/StateIcon';
import { Events, TaskPanel } from '../components/TaskPanel';
import { timeText } from '../lib/format';
import { FINISHED_JOB_STATES } from '../lib/states';
import { TaskStore } from '../lib/taskStore';
import { Link, navigate } from '../router';

const REFETCH_MS = 400;

export function JobPage({ name }: { name: string }) {
  const [detail, setDetail] = useState<JobDetail | null>(null);
  const [events, setEvents] = useState<EventJson[]>([]);
  const [error, setError] = useState('');
  const [notFound, setNotFound] = useState(false);
  const [gone, setGone] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<'cancel' | 'delete' | null>(null);
  const [result, setResult] = useState('');
  const [showEvents, setShowEvents] = useState(false);
  const store = useMemo(() => new TaskStore(), []);
  const base = `/jobs/${enc(name)}`;

  const applyDetail = useCallback(
    (d: JobDetail) => {
      for (const t of d.tasks) store.set(t.name, { state: t.state, reason: t.reason, attempt: t.attempt });
      setDetail(d);
    },
    [store],
  );

  const load = useCallback(async () => {
    try {
      const [d, ev] = await Promise.all([api<JobDetail>(base), api<{ items: EventJson[] }>(`${base}/events`)]);
      applyDetail(d);
      setEvents(ev.items);
      setError('');
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setNotFound(true);
      else setError((e as Error).message);
    }
  }, [base, applyDetail]);

  useEffect(() => {
    void load();
  }, [load]);

  // a burst of events becomes one re-fetch
  const timer = useRef<ReturnType<typeof setTimeout>>();
  const refetch = useCallback(() => {
    if (timer.current) return;
    timer.current = setTimeout(async () => {
      timer.current = undefined;
      try {
        applyDetail(await api<JobDetail>(base));
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) setGone(true);
      }
    }, REFETCH_MS);
  }, [base, applyDetail]);
  useEffect(() => () => timer.current && clearTimeout(timer.current), []);

  const status = useEventStream(`/api/v1/events/stream?job=${enc(name)}`, {
    job: (d) => {
      const s = d as JobSummary;
      if (s.name !== name) return;
      setDetail((cur) => (cur ? { ...cur, job: { ...cur.job, ...s } } : cur));
      refetch();
    },
    task: (d) => {
      const t = d as TaskEventJson;
      if (t.job !== name) return;
      store.set(t.task, { state: t.state, reason: t.reason, attempt: t.attempt });
      refetch();
    },
    event: (d) => {
      const e = d as EventJson;
      if (e.job && e.job !== name) return;
      setEvents((list) => [...list, e]);
    },
    deleted: (d) => (d as { job: string }).job === name && setGone(true),
    // the stream is open: what changed between the first fetch and now is fetched again (a
    // short job may have finished in that moment); `reset`: what was missed is gone
    hello: () => void load(),
    reset: () => void load(),
  });

  const act = async (what: 'cancel' | 'delete') => {
    setConfirm(null);
    try {
      const r = await api<{ result: string }>(what === 'cancel' ? `${base}/cancel` : base, { method: what === 'cancel' ? 'POST' : 'DELETE' });
      setResult(r?.result ?? (what === 'cancel' ? 'cancelled' : 'deleted'));
      if (what === 'delete') navigate('/jobs');
      else refetch();
    } catch (e) {
      setResult(`${what} failed: ${(e as Error).message}`);
    }
  };

  if (notFound)
    return (
      <div className="page" data-testid="job-not-found">
        <h2>{name}</h2>
        <p>
          No job named <b>{name}</b> (it may have been deleted). <Link to="/jobs">Back to the jobs</Link>.
        </p>
      </div>
    );

  const job = detail?.job;
  const task = detail?.tasks.find((t) => t.name === selected);
  const finished = job ? FINISHED_JOB_STATES.has(job.state) : false;

  return (
    <div className="page job-page">
      <div className="page-head">
        <h2 data-testid="job-name">{name}</h2>
        {job && <StateBadge state={job.state} testid="job-state" />}
        <LiveStatus status={status} />
        <span className="spacer" />
        <button data-testid="job-events-toggle" onClick={() => setShowEvents((v) => !v)}>
          {showEvents ? 'Hide events' : `Events (${events.length})`}
        </button>
        <button data-testid="job-cancel" disabled={!job || finished || job.state === 'Cancelling' || gone} onClick={() => setConfirm('cancel')}>
          Cancel job
        </button>
        <button className="danger" data-testid="job-delete" disabled={!job || gone} onClick={() => setConfirm('delete')}>
          Delete
        </button>
      </div>
      {job && (
        <div className="job-meta" data-testid="job-meta">
          <span>
            queue <b>{job.queue}</b>
          </span>
          <span>
            owner <b>{job.owner}</b>
          </span>
          <span>
            tasks <b data-testid="job-tasks-done">{job.tasksDone}/{job.tasksTotal}</b> done
          </span>
          <span>submitted {timeText(job.submittedAt)}</span>
          {job.startedAt > 0 && <span>started {timeText(job.startedAt)}</span>}
          {job.finishedAt > 0 && <span>finished {timeText(job.finishedAt)}</span>}
          {job.reason && <span data-testid="job-reason">{job.reason}</span>}
        </div>
      )}
      {gone && (
        <div className="error-banner" data-testid="job-gone">
          This job was deleted.
        </div>
      )}
      {error && <div className="error-banner">{error}</div>}
      {result && (
        <div className="notice-text" data-testid="action-result">
          {result}
        </div>
      )}
      <div className="job-body">
        {detail ? <JobDag tasks={detail.tasks} store={store} onSelect={setSelected} /> : <div className="dag loading">Loading…</div>}
        {task && <TaskPanel key={task.name} job={name} task={task} events={events} store={store} onClose={() => setSelected(null)} />}
      </div>
      {showEvents && (
        <div className="job-events">
          <Events events={events} testid="job-events" />
        </div>
      )}
      {confirm && (
        <Confirm
          title={confirm === 'cancel' ? `Cancel ${name}?` : `Delete ${name}?`}
          body={
            confirm === 'cancel'
              ? 'Every running replica is stopped (preStop, SIGTERM, then SIGKILL); tasks not started will not start.'
              : 'The job, its events and its logs are removed. A running job is cancelled first.'
          }
          okLabel={confirm === 'cancel' ? 'Cancel job' : 'Delete job'}
          danger
          onOk={() => void act(confirm)}
          onCancel={() => setConfirm(null)}
        />
      )}
    </div>
  );
}
