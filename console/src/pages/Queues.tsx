import type { ResourcesJson } from '../api/types';
import { errorText, useQueues } from '../api/queries';
import { countText, cpuText, memText, UNLIMITED } from '../lib/format';
import { Link } from '../router';

function Bar({ used, total }: { used: number; total: number }) {
  if (total >= UNLIMITED || total <= 0) return null;
  const pct = Math.min(100, Math.round((used / total) * 100));
  return (
    <span className="bar" title={`${pct}%`} aria-label={`${pct}% used`}>
      <span style={{ width: `${pct}%` }} />
    </span>
  );
}

export function UsedOf({ used, total }: { used: ResourcesJson; total: ResourcesJson }) {
  return (
    <div className="usedof">
      <div>
        cpu {cpuText(used.cpuMillis)} / {cpuText(total.cpuMillis)} <Bar used={used.cpuMillis} total={total.cpuMillis} />
      </div>
      <div>
        mem {memText(used.memoryBytes)} / {memText(total.memoryBytes)} <Bar used={used.memoryBytes} total={total.memoryBytes} />
      </div>
      <div>
        gpu {countText(used.gpu)} / {countText(total.gpu)} <Bar used={used.gpu} total={total.gpu} />
      </div>
    </div>
  );
}

export function QueuesPage() {
  const { data: items, error: err } = useQueues(10000);
  const error = errorText(err);
  return (
    <div className="page">
      <div className="page-head">
        <h2>Queues</h2>
      </div>
      {error && <div className="error-banner">{error}</div>}
      <table className="table" data-testid="queues-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>State</th>
            <th>Quota used / total</th>
            <th>Weight</th>
            <th>Running jobs</th>
            <th>Queued jobs</th>
            <th>Placement</th>
          </tr>
        </thead>
        <tbody>
          {items?.map((q) => (
            <tr key={q.name} data-testid={`queue-row-${q.name}`}>
              <td>
                <Link to={`/jobs?queue=${encodeURIComponent(q.name)}`}>{q.name}</Link>
              </td>
              <td data-testid={`queue-state-${q.name}`}>{q.state}</td>
              <td>
                <UsedOf used={q.used} total={q.quota} />
              </td>
              <td>{q.weight}</td>
              <td>
                {q.runningJobs}
                {q.maxRunningJobs > 0 && q.maxRunningJobs < UNLIMITED ? ` / ${q.maxRunningJobs}` : ''}
              </td>
              <td>{q.queuedJobs}</td>
              <td>{q.placement}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
