import { useEffect, useRef } from 'react';

export function Confirm({
  title,
  body,
  okLabel,
  danger,
  onOk,
  onCancel,
}: {
  title: string;
  body: string;
  okLabel: string;
  danger?: boolean;
  onOk: () => void;
  onCancel: () => void;
}) {
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => cancel.current?.focus(), []);
  return (
    <div className="modal-backdrop" onKeyDown={(e) => e.key === 'Escape' && onCancel()}>
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby="confirm-title" data-testid="confirm-dialog">
        <h3 id="confirm-title">{title}</h3>
        <p>{body}</p>
        <div className="modal-actions">
          <button ref={cancel} data-testid="confirm-cancel" onClick={onCancel}>
            Keep
          </button>
          <button className={danger ? 'danger' : 'primary'} data-testid="confirm-ok" onClick={onOk}>
            {okLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

export function Modal({ title, onClose, children, testid }: { title: string; onClose: () => void; children: React.ReactNode; testid?: string }) {
  return (
    <div className="modal-backdrop" onKeyDown={(e) => e.key === 'Escape' && onClose()}>
      <div className="modal wide" role="dialog" aria-modal="true" data-testid={testid}>
        <div className="modal-head">
          <h3>{title}</h3>
          <button className="icon-button" aria-label="Close" data-testid={testid ? `${testid}-close` : undefined} onClick={onClose}>
            ×
          </button>
        </div>
        {children}
      </div>
    </div>
  );
}
