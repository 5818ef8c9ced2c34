import { useCallback, useEffect, useState } from 'react';
import { api } from '../api/client';

// Loads `path` now and every `periodMs` while the page is shown (and visible).
export function usePoll<T>(path: string, periodMs = 10000): { data: T | null; error: string; reload: () => void } {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState('');
  const [n, setN] = useState(0);
  const reload = useCallback(() => setN((x) => x + 1), []);
  useEffect(() => {
    let stop = false;
    const load = () => {
      if (document.visibilityState === 'hidden') return;
      api<T>(path)
        .then((d) => !stop && (setData(d), setError('')))
        .catch((e: Error) => !stop && setError(e.message));
    };
    load();
    const t = setInterval(load, periodMs);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, [path, periodMs, n]);
  return { data, error, reload };
}
