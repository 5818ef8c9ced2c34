// One job: its DAG with live task states, the selected task's panel, the job's events, and
// hold/release/requeue/cancel/delete. The detail and the events are queries of the cache (api/queries.ts), kept
// live by the job-scoped event stream: a `task` event updates its node at once; `job`/`task`
// events also invalidate the detail (one re-fetch per burst), which brings replicas and
// reasons; `event`s are appended to the cached list.

import { useQuery } from '@tanstack/react-query';
import { useCallback, useLayoutEffect, useMemo, useState } from 'react';
import { api, ApiError, enc } from '../api/client';
import { errorText, invalidateSoon, keys, queryClient } from '../api/queries';
import { useEventStream } from '../api/sse';
import type { EventJson, JobDetail, JobSummary, TaskEventJson } from '../api/types';
import { Confirm } from '../components/Confirm';
import { JobFlags } from '../components/JobFlags';
import { JobDag } from '../components/JobDag';
import { LiveStatus } from '../components/LiveStatus';
import { StateBadge } from '../components/StateIcon';
import { Events, TaskPanel } from '../components/TaskPanel';
import { timeText } from '../lib/format';
import { jobActions, requeuesText, type JobAction } from '../lib/jobFlags';
import { countsText, failureExit, progressText, taskCounts } from '../lib/progress';
import { FINISHED_JOB_STATES, stateLook } from '../lib/states';
import { TaskStore } from '../lib/taskStore';
import { Link, navigate } from '../router';

const REFETCH_MS = 400;

type Action = JobAction | 'cancel' | 'delete';

// Each action's confirmation, and what it says done when the master's answer has no result.
const CONFIRM: Record<Action, { verb: string; body: string; ok: string; danger: boolean; done: string }> = {
  hold: {
    verb: 'Hold',
    body: 'The job stays Queued and is not started until it is released.',
    ok: 'Hold job',
    danger: false,
    done: 'held',
  },
  release: { verb: 'Release', body: 'The job may start once the scheduler places it.', ok: 'Release job', danger: false, done: 'released' },
  requeue: {
    verb: 'Requeue',
    body: 'What runs is stopped, and every task starts a new attempt; earlier runs are kept as history.',
    ok: 'Requeue job',
    danger: true,
    done: 'requeued',
  },
  cancel: {
    verb: 'Cancel',
    body: 'Every running replica is stopped (preStop, SIGTERM, then SIGKILL); tasks not started will not start.',
    ok: 'Cancel job',
    danger: true,
    done: 'cancelled',
  },
  delete: {
    verb: 'Delete',
    body: 'The job, its events and its logs are removed. A running job is cancelled first.',
    ok: 'Delete job',
    danger: true,
    done: 'deleted',
  },
};

// A job's detail as the page read it: `readAt`, when the read was sent (performance.now()).
type ReadDetail = JobDetail & { readAt?: number };

export function JobPage({ name }: { name: string }) {
  const [gone, setGone] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<Action | null>(null);
  const [result, setResult] = useState('');
  const [showEvents, setShowEvents] = useState(false);
  const store = useMemo(() => new TaskStore(), []);
  const base = `/jobs/${enc(name)}`;

  const detailQ = useQuery({
    queryKey: keys.jobDetail(name),
    // when the read was sent: the canvas keeps a task's state from an event newer than that
    queryFn: async ({ signal }): Promise<ReadDetail> => {
      const readAt = performance.now();
      return { ...(await api<JobDetail>(base, { signal })), readAt };
    },
  });
  const eventsQ = useQuery({
    queryKey: keys.jobEvents(name),
    queryFn: ({ signal }) => api<{ items: EventJson[] }>(`${base}/events`, { signal }).then((r) => r.items),
  });
  const detail = detailQ.data ?? null;
  const events = eventsQ.data ?? [];
  const is404 = detailQ.error instanceof ApiError && detailQ.error.status === 404;
  // a 404 before anything was shown: no such job; after: it was deleted meanwhile
  const notFound = is404 && !detail;
  const error = is404 ? '' : errorText(detailQ.error ?? eventsQ.error);

  // the live states of the nodes follow each detail read, before it is painted
  useLayoutEffect(() => {
    for (const t of detail?.tasks ?? [])
      store.setFromRead(
        t.name,
        { state: t.state, reason: t.reason, attempt: t.attempt, progress: progressText(t), exit: failureExit(t) },
        detail?.readAt ?? -Infinity,
      );
  }, [detail, store]);

  // a burst of events becomes one re-fetch of the detail
  const refetch = useCallback(() => invalidateSoon(keys.jobDetail(name), REFETCH_MS), [name]);
  const load = () => void queryClient.invalidateQueries({ queryKey: keys.job(name) });

  const status = useEventStream(`/api/v1/events/stream?job=${enc(name)}`, {
    job: (d) => {
      const s = d as JobSummary;
      if (s.name !== name) return;
      queryClient.setQueryData<ReadDetail>(keys.jobDetail(name), (cur) => (cur ? { ...cur, job: { ...cur.job, ...s } } : cur));
      invalidateSoon(keys.queues, 1000, true); // its queue's counts changed
      refetch();
    },
    task: (d) => {
      const t = d as TaskEventJson;
      if (t.job !== name) return;
      store.update(t.task, { state: t.state, reason: t.reason, attempt: t.attempt });
      refetch();
    },
    event: (d) => {
      const e = d as EventJson;
      if (e.job && e.job !== name) return;
      queryClient.setQueryData<EventJson[]>(keys.jobEvents(name), (list) => [...(list ?? []), e]);
    },
    deleted: (d) => (d as { job: string }).job === name && setGone(true),
    // the stream is open: what changed between the first fetch and now is fetched again (a
    // short job may have finished in that moment); `reset`: what was missed is gone
    hello: load,
    reset: load,
  });

  const act = async (what: Action) => {
    setConfirm(null);
    try {
      const r = await api<{ result: string }>(what === 'delete' ? base : `${base}/${what}`, { method: what === 'delete' ? 'DELETE' : 'POST' });
      setResult(r?.result ?? CONFIRM[what].done);
      if (what === 'delete') {
        queryClient.removeQueries({ queryKey: keys.job(name) });
        void queryClient.invalidateQueries({ queryKey: keys.jobs, refetchType: 'none' });
        navigate('/jobs');
      } else refetch();
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
  const actions = job && !gone && !is404 ? jobActions(job) : new Set<JobAction>();
  const requeued = job ? requeuesText(job) : '';
  // the tasks by state, from the detail (the summary counts only those done)
  const counts = taskCounts(detail?.tasks.map((t) => t.state) ?? []);

  return (
    <div className="page job-page">
      <div className="page-head">
        <h2 data-testid="job-name">{name}</h2>
        {job && <StateBadge state={job.state} testid="job-state" />}
        {job && <JobFlags job={job} testid="job-flags" />}
        {requeued && (
          <span className="muted small" data-testid="job-requeues">
            {requeued}
          </span>
        )}
        <LiveStatus status={status} />
        <span className="spacer" />
        <button data-testid="job-events-toggle" onClick={() => setShowEvents((v) => !v)}>
          {showEvents ? 'Hide events' : `Events (${events.length})`}
        </button>
        {actions.has('hold') && (
          <button data-testid="job-hold" onClick={() => setConfirm('hold')}>
            Hold
          </button>
        )}
        {actions.has('release') && (
          <button data-testid="job-release" onClick={() => setConfirm('release')}>
            Release
          </button>
        )}
        {actions.has('requeue') && (
          <button data-testid="job-requeue" onClick={() => setConfirm('requeue')}>
            Requeue
          </button>
        )}
        <button data-testid="job-cancel" disabled={!job || finished || job.state === 'Cancelling' || gone || is404} onClick={() => setConfirm('cancel')}>
          Cancel job
        </button>
        <button className="danger" data-testid="job-delete" disabled={!job || gone || is404} onClick={() => setConfirm('delete')}>
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
          <span data-testid="job-tasks">
            tasks <b>{detail.tasks.length}</b>
            {counts.length > 0 && ': '}
            {counts.map((c, i) => (
              <span key={c.state} data-testid={`job-tasks-${c.state.toLowerCase()}`} style={{ color: stateLook(c.state).color }}>
                {i > 0 && ', '}
                {countsText([c])}
              </span>
            ))}
          </span>
          <span>submitted {timeText(job.submittedAt)}</span>
          {job.startedAt > 0 && <span>started {timeText(job.startedAt)}</span>}
          {job.finishedAt > 0 && <span>finished {timeText(job.finishedAt)}</span>}
          {job.reason && <span data-testid="job-reason">{job.reason}</span>}
        </div>
      )}
      {(gone || (is404 && detail)) && (
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
          title={`${CONFIRM[confirm].verb} ${name}?`}
          body={CONFIRM[confirm].body}
          okLabel={CONFIRM[confirm].ok}
          danger={CONFIRM[confirm].danger}
          onOk={() => void act(confirm)}
          onCancel={() => setConfirm(null)}
        />
      )}
    </div>
  );
}
