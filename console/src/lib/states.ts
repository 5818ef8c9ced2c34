// How each state looks. Colour is never the only cue: every task state also has its own
// icon (drawn in src/components/StateIcon.tsx), its name as text, and a border style, and
// the colours are from the Okabe-Ito palette, which stays distinct under the common forms of
// colour blindness.

export const TASK_STATES = [
  'Waiting',
  'Queued',
  'Starting',
  'Running',
  'Restarting',
  'Succeeded',
  'Failed',
  'Cancelled',
  'Skipped',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export interface StateLook {
  color: string; // border and icon
  background: string;
  border: 'solid' | 'dashed' | 'dotted' | 'double';
  icon: string; // the icon's name (StateIcon)
}

const LOOKS: Record<string, StateLook> = {
  Waiting: { color: '#6b6b6b', background: '#f4f4f4', border: 'dotted', icon: 'hourglass' },
  Queued: { color: '#6b6b6b', background: '#f4f4f4', border: 'dashed', icon: 'queue' },
  Starting: { color: '#3d8fc4', background: '#eaf5fc', border: 'dashed', icon: 'play' },
  Running: { color: '#0072b2', background: '#e4f0f8', border: 'solid', icon: 'spinner' },
  Restarting: { color: '#b07800', background: '#fdf3dc', border: 'dashed', icon: 'restart' },
  Succeeded: { color: '#007a5a', background: '#e2f4ee', border: 'solid', icon: 'check' },
  Failed: { color: '#c24e00', background: '#fbe9de', border: 'double', icon: 'cross' },
  Cancelled: { color: '#a0527f', background: '#f7e8f1', border: 'solid', icon: 'ban' },
  Skipped: { color: '#8a8a8a', background: '#ffffff', border: 'dotted', icon: 'skip' },
  // job-only and replica states
  Cancelling: { color: '#a0527f', background: '#f7e8f1', border: 'dashed', icon: 'ban' },
  Placed: { color: '#6b6b6b', background: '#f4f4f4', border: 'dashed', icon: 'queue' },
  Stopping: { color: '#b07800', background: '#fdf3dc', border: 'dashed', icon: 'stop' },
  Exited: { color: '#007a5a', background: '#e2f4ee', border: 'solid', icon: 'exit' },
  Killed: { color: '#a0527f', background: '#f7e8f1', border: 'solid', icon: 'ban' },
  OOMKilled: { color: '#c24e00', background: '#fbe9de', border: 'double', icon: 'cross' },
  Lost: { color: '#c24e00', background: '#fbe9de', border: 'dotted', icon: 'question' },
};

const UNKNOWN: StateLook = { color: '#6b6b6b', background: '#ffffff', border: 'dotted', icon: 'question' };

export function stateLook(state: string | undefined): StateLook {
  return (state && LOOKS[state]) || UNKNOWN;
}

export const FINISHED_TASK_STATES = new Set(['Succeeded', 'Failed', 'Cancelled', 'Skipped']);
// A job's states, in the order the Jobs page's filter offers them. Skipped: its `after`
// condition can no longer be met; final, like Cancelled.
export const JOB_STATES = ['Queued', 'Running', 'Succeeded', 'Failed', 'Cancelling', 'Cancelled', 'Skipped'] as const;
export const FINISHED_JOB_STATES = new Set(['Succeeded', 'Failed', 'Cancelled', 'Skipped']);
