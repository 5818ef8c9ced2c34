import { errorText, useNodes } from '../api/queries';
import { ageText, cpuText, memText } from '../lib/format';
import { useEffect, useState } from 'react';
import { UsedOf } from './Queues';
import type { GpuTopologyJson } from '../api/types';

// How a node's GPUs are linked, as nvidia-smi topo -m shows it (docs/topology.md).
function Topology({ node, t }: { node: string; t: GpuTopologyJson }) {
  return (
    <details data-testid={`node-topology-${node}`}>
      <summary className="muted small">GPU topology{t.simulated ? ' (simulated)' : ''}</summary>
      <table className="table small">
        <thead>
          <tr>
            <th></th>
            {t.gpus.map((g) => (
              <th key={g}>GPU{g}</th>
            ))}
            <th>CPUs</th>
            <th>NUMA</th>
          </tr>
        </thead>
        <tbody>
          {t.gpus.map((g, a) => (
            <tr key={g}>
              <th>GPU{g}</th>
              {t.links[a].map((l, b) => (
                <td key={b}>{l}</td>
              ))}
              <td>{t.cpus[a] || '-'}</td>
              <td>{t.numa[a] < 0 ? '-' : t.numa[a]}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

export function NodesPage() {
  const { data: items, error: err } = useNodes(5000);
  const error = errorText(err);
  const [now, setNow] = useState(Date.now());
  useEffect(() => setNow(Date.now()), [items]);
  return (
    <div className="page">
      <div className="page-head">
        <h2>Nodes</h2>
      </div>
      {error && <div className="error-banner">{error}</div>}
      <table className="table" data-testid="nodes-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>State</th>
            <th>Capacity</th>
            <th>Allocated</th>
            <th>Used</th>
            <th>Replicas</th>
            <th>Drivers</th>
            <th>Heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {items?.map((n) => (
            <tr key={n.name} data-testid={`node-row-${n.name}`}>
              <td>
                {n.name}
                <div className="muted small">{n.address}</div>
              </td>
              <td data-testid={`node-state-${n.name}`}>
                {n.state}
                {n.drained && n.state !== 'draining' ? ' (drained)' : ''}
              </td>
              <td>
                cpu {cpuText(n.capacity.cpuMillis)}, mem {memText(n.capacity.memoryBytes)}, gpu {n.capacity.gpu}
                {n.topology && <Topology node={n.name} t={n.topology} />}
              </td>
              <td>
                <UsedOf used={n.allocated} total={n.capacity} />
              </td>
              <td>{n.used ? <UsedOf used={n.used} total={n.capacity} /> : <span className="muted">–</span>}</td>
              <td>{n.replicas}</td>
              <td>
                {n.drivers || '-'}
                {n.vmRuntime && <div className="muted small">vm: {n.vmRuntime}</div>}
              </td>
              <td title={n.lastHeartbeat ? new Date(n.lastHeartbeat).toISOString() : ''}>{n.lastHeartbeat ? `${ageText(n.lastHeartbeat, now)} ago` : '-'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
