// Inline SVG icons for states (no icon font, no network): each state has its own shape, so
// the state reads without its colour.
import { memo } from 'react';
import { stateLook } from '../lib/states';

const PATHS: Record<string, JSX.Element> = {
  hourglass: <path d="M4 2h8M4 14h8M5 2c0 4 6 4 6 6s-6 2-6 6M11 2c0 4-6 4-6 6s6 2 6 6" fill="none" />,
  queue: <path d="M3 4h10M3 8h10M3 12h10" fill="none" />,
  play: <path d="M5 3l8 5-8 5z" fill="none" />,
  spinner: (
    <g fill="none">
      <circle cx="8" cy="8" r="5.5" opacity="0.3" />
      <path className="spin" d="M8 2.5a5.5 5.5 0 0 1 5.5 5.5" />
    </g>
  ),
  restart: <path d="M13 8a5 5 0 1 1-1.5-3.6M13 2v3h-3" fill="none" />,
  check: <path d="M3 8.5l3.2 3.2L13 4.5" fill="none" />,
  cross: <path d="M4 4l8 8M12 4l-8 8" fill="none" />,
  ban: (
    <g fill="none">
      <circle cx="8" cy="8" r="5.5" />
      <path d="M4.2 11.8l7.6-7.6" />
    </g>
  ),
  skip: <path d="M3 3l5 5-5 5M8 3l5 5-5 5" fill="none" />,
  stop: <rect x="4" y="4" width="8" height="8" fill="none" />,
  exit: <path d="M9 3h4v10H9M2 8h8M7 5l3 3-3 3" fill="none" />,
  question: <path d="M5.5 6a2.5 2.5 0 1 1 3.5 2.3c-.7.3-1 .8-1 1.5V11M8 13.2v.3" fill="none" />,
};

export const StateIcon = memo(function StateIcon({ state, size = 16 }: { state: string; size?: number }) {
  const look = stateLook(state);
  return (
    <svg
      className={`state-icon icon-${look.icon}`}
      width={size}
      height={size}
      viewBox="0 0 16 16"
      stroke={look.color}
      strokeWidth={1.8}
      strokeLinecap="round"
      strokeLinejoin="round"
      aria-hidden="true"
    >
      {PATHS[look.icon] ?? PATHS.question}
    </svg>
  );
});

// `lookAs`: the state whose colours and icon to use, when they differ from the text (a
// replica that exited with a non-zero code reads "Exited" but looks failed).
export const StateBadge = memo(function StateBadge({ state, testid, lookAs }: { state: string; testid?: string; lookAs?: string }) {
  const look = stateLook(lookAs ?? state);
  return (
    <span
      className="state-badge"
      data-testid={testid}
      data-state={state}
      style={{ color: look.color, borderColor: look.color, borderStyle: look.border === 'double' ? 'double' : look.border, background: look.background }}
    >
      <StateIcon state={lookAs ?? state} size={13} />
      {state || 'unknown'}
    </span>
  );
});
