// The side panel of a task on the Job page: why it is where it is, its replicas, events,
// logs and usage.

import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { api, enc } from '../api/client';
import { errorText, keys } from '../api/queries';
import type { EventJson, TaskDetail, UsageJson } from '../api/types';
import { cpuText, memText, timeText } from '../lib/format';
import { FINISHED_TASK_STATES } from '../lib/states';
import type { TaskStore } from '../lib/taskStore';
import { LogsView } from './LogsView';
import { StateBadge } from './StateIcon';
import { kindLabel } from '../lib/kinds';
import { failureExit, progressText } from '../lib/progress';
import { useKindsData } from './KindsContext';

type Tab = 'replicas' | 'events' | 'logs' | 'usage';

// Why a task is where it is: the master's reason, or for a waiting task without one, the
// dependencies it still waits for.
export function whyText(task: TaskDetail, store: TaskStore): string {
  if (task.reason) return task.reason;
  if (task.state === 'Waiting') {
    const pending = task.dependsOn.filter((d) => store.get(d)?.state !== 'Succeeded');
    if (pending.length) return `waiting for ${pending.map((d) => `${d} (${store.get(d)?.state ?? 'unknown'})`).join(', ')}`;
  }
  return '';
}

export function TaskPanel({
  job,
  task,
  events,
  store,
  onClose,
}: {
  job: string;
  task: TaskDetail;
  events: EventJson[];
  store: TaskStore;
  onClose: () => void;
}) {
  const [tab, setTab] = useState<Tab>('replicas');
  const live = !FINISHED_TASK_STATES.has(task.state);
  const why = whyText(task, store);
  const mine = events.filter((e) => e.task === task.name);
  const kinds = useKindsData();
  const progress = progressText(task);
  const exit = failureExit(task);
  const e = task.elastic;

  return (
    <aside className="panel" data-testid="task-panel" aria-label={`Task ${task.name}`}>
      <div className="panel-head">
        <h3>{task.name}</h3>
        <button className="icon-button" aria-label="Close" data-testid="task-panel-close" onClick={onClose}>
          ×
        </button>
      </div>
      {/* one label/value grid: the elastic rows are rows of it like the others */}
      <dl className="facts" data-testid="task-facts">
        <dt>State</dt>
        <dd>
          <StateBadge state={task.state} testid="panel-state" />
        </dd>
        <dt>Kind</dt>
        <dd>
          {kindLabel(kinds, task.kind)}
          {task.mode && task.mode !== 'none' ? ` · ${task.mode}` : ''}
        </dd>
        <dt>Attempt</dt>
        <dd>{task.attempt}</dd>
        {task.topology && (
          <>
            <dt>Topology</dt>
            <dd data-testid="panel-topology">
              {task.topology.required !== undefined ? `required ${task.topology.required}` : `preferred ${task.topology.preferred}`}
              {task.topology.domains.length > 0 ? `, in ${task.topology.domains.join(' and ')}` : ''}
            </dd>
          </>
        )}
        {progress && (
          <>
            <dt>Progress</dt>
            <dd data-testid="panel-progress">
              {progress}
              {exit && <span className="failure-text"> · {exit}</span>}
            </dd>
          </>
        )}
        <dt>Reason</dt>
        <dd className="why" data-testid={`reason-${task.name}`}>
          {why ? why : <span className="muted">{live ? 'No reason reported.' : `Finished: ${task.state}.`}</span>}
        </dd>
        {e && (
          <>
            <dt>Workers</dt>
            <dd data-testid="elastic-workers">
              {e.current} now, {e.desired} desired, {e.min}–{e.max} allowed{e.pending ? ' (scaling out)' : ''}
            </dd>
            <dt>Autoscaling</dt>
            <dd data-testid="elastic-scaling">
              {e.utilisation == null ? 'cpu not measured yet' : `cpu ${e.utilisation}% of requested`}, target {e.target}%
            </dd>
            <dt>Last decision</dt>
            <dd data-testid="elastic-decision">
              {e.lastDecision ? `${e.lastDecision}${e.lastDecisionAt ? ` (${timeText(e.lastDecisionAt)})` : ''}` : <span className="muted">none yet</span>}
            </dd>
          </>
        )}
      </dl>
      <div className="tabs" role="tablist">
        {(['replicas', 'events', 'logs', 'usage'] as Tab[]).map((t) => (
          <button key={t} role="tab" aria-selected={tab === t} className={tab === t ? 'active' : ''} data-testid={`tab-${t}`} onClick={() => setTab(t)}>
            {t[0].toUpperCase() + t.slice(1)}
            {t === 'replicas' ? ` (${task.replicas.length})` : t === 'events' ? ` (${mine.length})` : ''}
          </button>
        ))}
      </div>
      <div className="panel-body">
        {tab === 'replicas' && <Replicas task={task} />}
        {tab === 'events' && <Events events={mine} />}
        {tab === 'logs' && <LogsView job={job} task={task.name} replicas={task.replicas} live={live} />}
        {tab === 'usage' && <Usage job={job} task={task.name} live={live} />}
      </div>
    </aside>
  );
}

function Replicas({ task }: { task: TaskDetail }) {
  if (task.replicas.length === 0) return <p className="muted">No replicas yet.</p>;
  // torchrun restarts an elastic worker's processes on its own: how often, per attempt.
  const restarts = task.elastic != null;
  return (
    <table className="table compact" data-testid="replicas-table">
      <thead>
        <tr>
          <th>Role</th>
          <th>#</th>
          <th>Att.</th>
          <th>State</th>
          <th>Node</th>
          <th>Exit</th>
          {restarts && <th title="torchrun's worker-group restarts in this attempt">Restarts</th>}
          <th>Reason</th>
        </tr>
      </thead>
      <tbody>
        {task.replicas.map((r) => (
          <tr key={`${r.role}/${r.index}/${r.attempt}`} data-testid={`replica-${r.role}-${r.index}-${r.attempt}`}>
            <td>{r.role}</td>
            <td>{r.index}</td>
            <td>{r.attempt}</td>
            <td>
              <StateBadge state={r.state} lookAs={r.state === 'Exited' && r.exitCode !== 0 ? 'Failed' : undefined} />
            </td>
            <td>{r.node || '-'}</td>
            <td>{r.state === 'Exited' ? r.exitCode : '-'}</td>
            {restarts && <td data-testid="replica-restarts">{r.restarts}</td>}
            <td className="wrap">{r.reason || ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Events({ events, testid = 'events-view' }: { events: EventJson[]; testid?: string }) {
  if (events.length === 0) return <p className="muted" data-testid={testid}>No events.</p>;
  return (
    <table className="table compact" data-testid={testid}>
      <thead>
        <tr>
          <th>Time</th>
          <th>Task</th>
          <th>Replica</th>
          <th>Event</th>
          <th>Reason</th>
        </tr>
      </thead>
      <tbody>
        {events.map((e, i) => (
          <tr key={i}>
            <td className="nowrap">{timeText(e.at)}</td>
            <td>{e.task || '-'}</td>
            <td>{e.replica ? `${e.replica}${e.attempt ? ` #${e.attempt}` : ''}` : '-'}</td>
            <td>{e.type}</td>
            <td className="wrap">{e.reason}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Usage({ job, task, live }: { job: string; task: string; live: boolean }) {
  // one query per job, shared by its tasks' panels; refreshed every 5 s while the task runs
  const q = useQuery({
    queryKey: keys.jobTop(job),
    queryFn: ({ signal }) => api<{ items: UsageJson[] }>(`/jobs/${enc(job)}/top`, { signal }).then((r) => r.items),
    refetchInterval: live ? 5000 : false,
  });
  const items = useMemo(() => q.data?.filter((u) => u.task === task) ?? null, [q.data, task]);
  const error = errorText(q.error);
  if (error) return <div className="error-text">{error}</div>;
  if (!items) return <p className="muted">loading…</p>;
  if (items.length === 0) return <p className="muted" data-testid="usage-view">No running replicas to measure.</p>;
  return (
    <table className="table compact" data-testid="usage-view">
      <thead>
        <tr>
          <th>Replica</th>
          <th>Node</th>
          <th>CPU used / req.</th>
          <th>% of req.</th>
          <th>Memory used / req.</th>
        </tr>
      </thead>
      <tbody>
        {items.map((u) => (
          <tr key={`${u.role}/${u.index}/${u.attempt}`}>
            <td>
              {u.role}/{u.index} #{u.attempt}
            </td>
            <td>{u.node}</td>
            <td>
              {u.sampledAt ? cpuText(u.used.cpuMillis) : '–'} / {cpuText(u.requested.cpuMillis)}
            </td>
            <td>{u.cpuPercentOfRequest === null ? '–' : `${u.cpuPercentOfRequest}%`}</td>
            <td>
              {u.sampledAt ? memText(u.used.memoryBytes) : '–'} / {memText(u.requested.memoryBytes)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
