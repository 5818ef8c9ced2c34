// One Server-Sent Events stream per page (docs/http_api.md, "Live updates"). EventSource
// resumes a dropped connection by itself with Last-Event-ID. When the browser gives up (the
// master answered an error, say while it restarted), a new stream is opened after a pause
// with `?after=<last id seen>`, so the master still sends what was missed, or `reset` when
// that is gone; a page with no id yet re-fetches (`reset`) instead.

import { useEffect, useRef, useState } from 'react';
import { api } from './client';

export type StreamStatus = 'connecting' | 'live' | 'reconnecting';

export type StreamHandlers = Record<string, (data: unknown) => void>;

// The stream's event types: `hello` (the id to resume from) and `reset` are handled here too.
const TYPES = ['hello', 'job', 'task', 'event', 'deleted', 'reset'];

export function withAfter(url: string, after: string): string {
  if (!after) return url;
  return `${url}${url.includes('?') ? '&' : '?'}after=${encodeURIComponent(after)}`;
}

export function useEventStream(url: string | null, handlers: StreamHandlers): StreamStatus {
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const ref = useRef(handlers);
  ref.current = handlers;

  useEffect(() => {
    if (!url) return undefined;
    let es: EventSource | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    let failures = 0;
    let lastId = '';

    const listener = (type: string) => (e: Event) => {
      const m = e as MessageEvent;
      if (m.lastEventId) lastId = m.lastEventId;
      let data: unknown = undefined;
      try {
        data = m.data ? JSON.parse(m.data as string) : undefined;
      } catch {
        data = m.data;
      }
      ref.current[type]?.(data);
    };

    const open = () => {
      const reopened = failures > 0;
      setStatus(reopened ? 'reconnecting' : 'connecting');
      es = new EventSource(withAfter(url, lastId));
      for (const type of TYPES) es.addEventListener(type, listener(type));
      es.onopen = () => {
        if (reopened && !lastId) ref.current.reset?.(undefined); // nothing to resume from
        failures = 0;
        setStatus('live');
      };
      es.onerror = () => {
        if (!es || stopped) return;
        if (es.readyState === EventSource.CLOSED) {
          es.close();
          failures++;
          setStatus('reconnecting');
          // a 401 sends the user to the login page (api() reports it)
          api('/whoami').catch(() => undefined);
          timer = setTimeout(() => !stopped && open(), Math.min(30000, 1000 * 2 ** Math.min(failures, 5)));
        } else {
          setStatus('reconnecting'); // EventSource retries by itself, with Last-Event-ID
        }
      };
    };
    open();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      es?.close();
    };
  }, [url]);

  return status;
}
