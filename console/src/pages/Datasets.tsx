import { errorText, useDatasets } from '../api/queries';
import { timeText } from '../lib/format';

export function DatasetsPage() {
  const { data: items, error: err } = useDatasets(30000);
  const error = errorText(err);
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
          {items?.map((d) => (
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
          {items && items.length === 0 && (
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
