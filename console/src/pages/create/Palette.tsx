// The palette: the task kinds the master describes (GET /api/v1/kinds, read once through the
// query cache), dragged onto the canvas or clicked; and the spec's buttons. When the kinds
// cannot be read the palette says so: there is no built-in copy to fall back on.

import { errorText, useKinds } from '../../api/queries';

export const KIND_MIME = 'application/x-yard-kind';

export function Palette({
  onAdd,
  hasTasks,
  onImport,
  onExport,
  onLayout,
  onClear,
}: {
  onAdd: (kind: string) => void;
  hasTasks: boolean;
  onImport: () => void;
  onExport: () => void;
  onLayout: () => void;
  onClear: () => void;
}) {
  const kinds = useKinds();
  return (
    <aside className="palette" aria-label="Task kinds">
      <h3>Task kinds</h3>
      {kinds.isPending ? (
        <p className="hint" data-testid="palette-loading">
          Loading the task kinds…
        </p>
      ) : kinds.isError ? (
        <div className="error-text" role="alert" data-testid="palette-error">
          Cannot read the task kinds from the master (GET /api/v1/kinds): {errorText(kinds.error)}.{' '}
          <button className="link" data-testid="palette-retry" onClick={() => void kinds.refetch()}>
            Try again
          </button>
        </div>
      ) : (
        <p className="hint">Drag onto the canvas (or click).</p>
      )}
      {kinds.data?.map((k) => (
        <div
          key={k.kind}
          className={`palette-item kind-${k.kind}`}
          data-testid={`palette-${k.kind}`}
          draggable
          role="button"
          tabIndex={0}
          onDragStart={(e) => {
            e.dataTransfer.setData(KIND_MIME, k.kind);
            e.dataTransfer.effectAllowed = 'copy';
          }}
          onClick={() => onAdd(k.kind)}
          onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && onAdd(k.kind)}
        >
          <span className={`kind-dot kind-${k.kind}`} aria-hidden="true" />
          {k.label}
        </div>
      ))}
      <h3>Spec</h3>
      <button data-testid="import-open" onClick={onImport}>
        Import YAML
      </button>
      <button data-testid="export-open" onClick={onExport}>
        Export YAML
      </button>
      <button data-testid="auto-layout" disabled={!hasTasks} onClick={onLayout}>
        Auto layout
      </button>
      <button data-testid="editor-clear" onClick={onClear}>
        New job
      </button>
    </aside>
  );
}
