// Validation by the master (POST /api/v1/validate, the same loader and validator as at
// submit) 400 ms after the user stops typing; an older request still in flight is cancelled.
// Not a cached query: every spec is new, and the answer is only about that spec.

import { useEffect, useState } from 'react';
import { api, ApiError } from '../../api/client';
import type { ValidateAnswer } from '../../api/types';
import type { SpecError } from '../../lib/fields';
import type { JobSpec } from '../../lib/spec';

const VALIDATE_MS = 400;

export interface Validation {
  errors: SpecError[];
  spec: unknown; // the spec the errors are about
  failure?: string; // the validation call itself failed
}

export const NO_VALIDATION: Validation = { errors: [], spec: null };

// `touched`: the user has changed something (a fresh page checks nothing).
export function useValidation(spec: JobSpec, touched: boolean) {
  const [validation, setValidation] = useState<Validation>(NO_VALIDATION);
  const [checking, setChecking] = useState(false);

  useEffect(() => {
    if (!touched) return undefined;
    const ctl = new AbortController();
    const t = setTimeout(async () => {
      setChecking(true);
      try {
        const r = await api<ValidateAnswer>('/validate', { json: spec, signal: ctl.signal });
        setValidation({ errors: r.errors ?? [], spec });
      } catch (e) {
        if ((e as Error).name === 'AbortError') return;
        if (e instanceof ApiError && e.errors.length) setValidation({ errors: e.errors, spec });
        else setValidation({ errors: [], spec, failure: `validation failed: ${(e as Error).message}` });
      } finally {
        if (!ctl.signal.aborted) setChecking(false);
      }
    }, VALIDATE_MS);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [spec, touched]);

  // `stale`: the spec changed since the errors were found
  return { validation, setValidation, checking, stale: validation.spec !== spec };
}
