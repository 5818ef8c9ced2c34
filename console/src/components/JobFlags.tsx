// The badges beside a job's state: "Held by alice" and "after prep-data" (lib/jobFlags.ts).
import type { JobSummary } from '../api/types';
import { afterText, afterTitle, heldText } from '../lib/jobFlags';

export function JobFlags({ job, testid }: { job: JobSummary; testid: string }) {
  const held = heldText(job);
  const after = afterText(job);
  return (
    <>
      {held && (
        <span className="flag-badge held" data-testid={`${testid}-held`} title="yardctl job release, or Release on the job's page">
          {held}
        </span>
      )}
      {after && (
        <span className="flag-badge after" data-testid={`${testid}-after`} title={`waits until ${afterTitle(job)}`}>
          {after}
        </span>
      )}
    </>
  );
}
