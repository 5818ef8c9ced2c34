import type { DatasetJson } from '../api/types';
import { usePoll } from '../components/usePoll';
import { timeText } from '../lib/format';

export function DatasetsPage() {
  const { data, error } = usePoll<{ items: DatasetJson[] }>('/datasets', 30000);
  return (
    <div className="page">
      <div className="page-head">
        <h2>Datasets</h2>
      </div>
      {error && <div className="error-banner">{error}</div>}
      <table className="table" data-testid="datasets-table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Path</th>
            <th>Access</th>
            <th>Grants</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {data?.items.map((d) => (
            <tr key={d.name} data-testid={`dataset-row-${d.name}`}>
              <td>{d.name}</td>
              <td>
                <code>{d.path}</code>
              </td>
              <td>{d.readOnly ? 'read-only' : 'read-write'}</td>
              <td>{d.grants.length ? d.grants.join(', ') : '-'}</td>
              <td>{timeText(d.createdAt)}</td>
            </tr>
          ))}
          {data && data.items.length === 0 && (
            <tr>
              <td colSpan={5} className="empty">
                No datasets. An admin registers one with yardctl dataset create NAME --path PATH.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
