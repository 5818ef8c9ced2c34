// Above the canvas: the validation's state ("Checking…", "2 problems", "Valid"), Submit, the
// submit's refusal, the errors no field shows, the list of every error (each a link to its
// task) and the refused edge's message.

import { useState } from 'react';
import type { SpecError } from '../../lib/fields';
import type { Validation } from './useValidation';

export function StatusBar({
  touched,
  checking,
  validation,
  generalErrors,
  submitting,
  canSubmit,
  onSubmit,
  submitError,
  onPickTask,
  message,
}: {
  touched: boolean;
  checking: boolean; // a check is under way or due (the spec changed since the last)
  validation: Validation;
  generalErrors: SpecError[];
  submitting: boolean;
  canSubmit: boolean;
  onSubmit: () => void;
  submitError: string;
  onPickTask: (index: number | null) => void;
  message: string;
}) {
  const [showProblems, setShowProblems] = useState(false);
  const count = validation.errors.length;
  return (
    <>
      <div className="create-bar">
        <span className="validation" data-testid="validation-status" data-state={checking ? 'checking' : count ? 'invalid' : 'valid'}>
          {!touched
            ? 'Drop a task to start.'
            : checking
              ? 'Checking…'
              : validation.failure
                ? validation.failure
                : count
                  ? `${count} ${count === 1 ? 'problem' : 'problems'}`
                  : 'Valid'}
        </span>
        {count > 0 && (
          <button className="link" data-testid="problems-toggle" onClick={() => setShowProblems((v) => !v)}>
            {showProblems ? 'hide' : 'show all'}
          </button>
        )}
        <span className="spacer" />
        <button className="primary" data-testid="submit-job" disabled={submitting || !canSubmit} onClick={onSubmit}>
          {submitting ? 'Submitting…' : 'Submit'}
        </button>
      </div>
      {submitError && (
        <div className="error-banner" data-testid="submit-error">
          {submitError}
        </div>
      )}
      {generalErrors.length > 0 && (
        <div className="error-banner">
          {generalErrors.map((e, i) => (
            <div key={i} data-testid={`error-${e.path}`}>
              {e.path ? <code>{e.path}: </code> : null}
              {e.message}
            </div>
          ))}
        </div>
      )}
      {showProblems && count > 0 && (
        <ul className="problems" data-testid="problems-list">
          {validation.errors.map((e, i) => {
            const ti = /^tasks\[(\d+)\]/.exec(e.path);
            return (
              <li key={i} data-testid={`problem-${e.path}`}>
                <button className="link" onClick={() => onPickTask(ti ? Number(ti[1]) : null)}>
                  {e.path || '(spec)'}
                </button>
                : {e.message}
              </li>
            );
          })}
        </ul>
      )}
      {message && (
        <div className="canvas-message" role="alert" data-testid="canvas-message">
          {message}
        </div>
      )}
    </>
  );
}
