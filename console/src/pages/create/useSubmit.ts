// Submit: POST /api/v1/jobs with the spec object the form edits. On success the draft is
// dropped, the cached job lists and queues are marked stale, and the job's page opens; a
// 422 puts the master's errors on the fields, as validation does.

import { useMutation } from '@tanstack/react-query';
import { api, ApiError } from '../../api/client';
import { keys, queryClient } from '../../api/queries';
import type { SubmitAnswer } from '../../api/types';
import type { JobSpec } from '../../lib/spec';
import { navigate } from '../../router';
import { clearDraft } from './draft';
import type { Validation } from './useValidation';

export function useSubmit(setValidation: (v: Validation) => void) {
  const submit = useMutation({
    mutationFn: (spec: JobSpec) => api<SubmitAnswer>('/jobs', { json: spec }),
    onSuccess: (r, spec) => {
      clearDraft();
      void queryClient.invalidateQueries({ queryKey: keys.jobs, refetchType: 'none' });
      void queryClient.invalidateQueries({ queryKey: keys.queues, refetchType: 'none' });
      const jobs = r.jobs ?? [];
      navigate(jobs.length === 1 ? `/jobs/${encodeURIComponent(jobs[0])}` : `/jobs?q=${encodeURIComponent(spec.name ?? '')}`);
    },
    onError: (e, spec) => {
      if (e instanceof ApiError && e.errors.length) setValidation({ errors: e.errors, spec });
    },
  });
  const e = submit.error;
  const error = !e
    ? ''
    : e instanceof ApiError && e.errors.length
      ? `The master refused the spec: ${e.errors.length} ${e.errors.length === 1 ? 'problem' : 'problems'}.`
      : e.message;
  return { submit, error };
}
