// Numbers for people: cpu, memory, ages. Quotas at or above 2^60 are the master's
// "unlimited".

export const UNLIMITED = 2 ** 60;

export function cpuText(millis: number | undefined): string {
  if (millis === undefined || millis === null) return '-';
  if (millis >= UNLIMITED) return 'unlimited';
  if (millis % 1000 === 0) return String(millis / 1000);
  return `${millis}m`;
}

const UNITS = ['B', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'];
export function memText(bytes: number | undefined): string {
  if (bytes === undefined || bytes === null) return '-';
  if (bytes >= UNLIMITED) return 'unlimited';
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  const s = v >= 10 || Number.isInteger(v) ? String(Math.round(v * 10) / 10) : v.toFixed(1);
  return u === 0 ? `${s}B` : `${s}${UNITS[u]}`;
}

export function countText(n: number | undefined): string {
  if (n === undefined || n === null) return '-';
  return n >= UNLIMITED ? 'unlimited' : String(n);
}

// "12s", "4m", "3h", "2d": how long ago `ms` (unix ms) was, from `now`.
export function ageText(ms: number | undefined, now: number): string {
  if (!ms || ms <= 0) return '-';
  const s = Math.max(0, Math.floor((now - ms) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`;
  return `${Math.floor(s / 86400)}d`;
}

export function timeText(ms: number | undefined): string {
  if (!ms || ms <= 0) return '-';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// Free quota = quota - used per resource, "unlimited" kept.
export function freeOf(quota: number, used: number): number {
  if (quota >= UNLIMITED) return UNLIMITED;
  return Math.max(0, quota - used);
}
