import type { StreamStatus } from '../api/sse';

const TEXT: Record<StreamStatus, string> = { connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…' };

export function LiveStatus({ status }: { status: StreamStatus }) {
  return (
    <span className={`live-status ${status}`} data-testid="live-status" data-status={status} title="Live updates from the master">
      <span className="dot" aria-hidden="true" />
      {TEXT[status]}
    </span>
  );
}
