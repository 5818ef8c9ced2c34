// The Create page's YAML dialogs: import (a file or pasted text, as yardctl job submit takes
// it) and export (copy or download).

import { useState } from 'react';
import { Modal } from '../../components/Confirm';
import { importYaml } from '../../lib/yamlio';

export function ImportDialog({ onClose, onImport }: { onClose: () => void; onImport: (spec: unknown) => void }) {
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const apply = (src: string) => {
    const r = importYaml(src);
    if (r.error) setError(r.error);
    else onImport(r.spec);
  };
  return (
    <Modal title="Import YAML" onClose={onClose} testid="import-dialog">
      <p className="hint">A job spec as yardctl job submit takes it (docs/spec.md). Anchors, aliases and merge keys are expanded.</p>
      <input
        type="file"
        accept=".yaml,.yml,.json,text/yaml,application/json"
        data-testid="import-file"
        onChange={async (e) => {
          const f = e.target.files?.[0];
          if (f) {
            const t = await f.text();
            setText(t);
            apply(t);
          }
        }}
      />
      <textarea data-testid="import-text" rows={16} value={text} onChange={(e) => setText(e.target.value)} placeholder="name: my-job&#10;tasks:&#10;  - name: train&#10;    kind: pytorch&#10;    ..." />
      {error && (
        <div className="error-text" data-testid="import-error">
          {error}
        </div>
      )}
      <div className="modal-actions">
        <button onClick={onClose}>Close</button>
        <button className="primary" data-testid="import-apply" onClick={() => apply(text)}>
          Import
        </button>
      </div>
    </Modal>
  );
}

export function ExportDialog({ yaml, name, onClose }: { yaml: string; name?: string; onClose: () => void }) {
  const [copied, setCopied] = useState('');
  const download = () => {
    const url = URL.createObjectURL(new Blob([yaml], { type: 'application/yaml' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `${name || 'job'}.yaml`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(yaml);
      setCopied('Copied.');
    } catch {
      setCopied('The browser refused the clipboard: select the text and copy it.');
    }
  };
  return (
    <Modal title="Export YAML" onClose={onClose} testid="export-dialog">
      <textarea data-testid="export-text" rows={22} readOnly value={yaml} />
      <div className="modal-actions">
        {copied && <span className="muted">{copied}</span>}
        <button data-testid="export-copy" onClick={() => void copy()}>
          Copy
        </button>
        <button className="primary" data-testid="export-download" onClick={download}>
          Download
        </button>
      </div>
    </Modal>
  );
}
