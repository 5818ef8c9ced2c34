// A task on the Create page's canvas: its name, kind and roles, a badge with its validation
// errors, and the handles to draw dependencies (drag from the bottom handle of the task that
// runs first to the top of the one that runs after it).

import { Handle, Position, type Node, type NodeProps } from '@xyflow/react';
import { memo } from 'react';
import { isElastic, kindLabel, kindOf, type Kinds } from '../lib/kinds';
import type { TaskSpec } from '../lib/spec';
import { useKindsContext } from './KindsContext';

export type EditData = { task: TaskSpec; errors: number };
export type EditNode = Node<EditData, 'edit'>;

export const EDIT_W = 200;
export const EDIT_H = 70;

function rolesText(kinds: Kinds, t: TaskSpec): string {
  const k = kindOf(kinds, t.kind);
  if (k && !k.framework) return `${t.completions ?? 1} runs, ${t.parallelism ?? 1} at a time`;
  if (isElastic(kinds, t)) return `elastic ${t.elastic?.minReplicas ?? '?'}–${t.elastic?.maxReplicas ?? '?'}`;
  return Object.entries(t.roles ?? {})
    .map(([n, r]) => `${n}×${r?.replicas ?? 1}`)
    .join(' ');
}

export const EditTaskNode = memo(function EditTaskNode({ data, selected }: NodeProps<EditNode>) {
  const t = data.task;
  const kinds = useKindsContext();
  const name = t.name || '(unnamed)';
  return (
    <div className={`task-node edit${selected ? ' selected' : ''}${data.errors ? ' has-errors' : ''}`} data-testid={`task-node-${t.name ?? ''}`}>
      <Handle type="target" position={Position.Top} data-testid={`handle-in-${t.name ?? ''}`} />
      <div className="task-node-head">
        <span className={`kind-dot kind-${t.kind}`} aria-hidden="true" />
        <span className="task-node-name">{name}</span>
        {data.errors > 0 && (
          <span className="error-badge" data-testid={`task-errors-${t.name ?? ''}`} title={`${data.errors} problem(s)`}>
            {data.errors} {data.errors === 1 ? 'error' : 'errors'}
          </span>
        )}
      </div>
      <div className="task-node-sub muted">
        {t.kind ? kindLabel(kinds, t.kind) : 'no kind'}
        {t.mode ? ` · ${t.mode}` : ''} · {rolesText(kinds, t)}
      </div>
      <Handle type="source" position={Position.Bottom} data-testid={`handle-out-${t.name ?? ''}`} />
    </div>
  );
});
