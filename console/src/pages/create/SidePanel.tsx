// The Create page's right-hand panel: the selected dependency, the selected task's form, or
// with nothing selected the job's own form (name, type, queue, priority, hold, after, job array).

import { useEffect, useState } from 'react';
import { useQueues } from '../../api/queries';
import { CheckField, FieldErrors, Section, SelectField, TextField, useForm } from '../../components/form';
import { TaskForm } from '../../components/TaskForm';
import { countText, cpuText, freeOf, memText } from '../../lib/format';
import { afterText, parseAfter, type JobSpec } from '../../lib/spec';

export interface EdgeSel {
  source: string;
  target: string;
}

export function SidePanel({
  spec,
  ids,
  selected,
  edge,
  onJob,
  onDeleteTask,
  onRemoveEdge,
}: {
  spec: JobSpec;
  ids: readonly string[];
  selected: string | null;
  edge: EdgeSel | undefined;
  onJob: () => void; // back to the job's form
  onDeleteTask: (id: string) => void;
  onRemoveEdge: (e: EdgeSel) => void;
}) {
  const form = useForm();
  const index = selected ? ids.indexOf(selected) : -1;
  const task = index >= 0 ? spec.tasks[index] : undefined;
  const nameOf = (id: string) => spec.tasks[ids.indexOf(id)]?.name ?? id;
  return (
    <aside className="form-panel" aria-label="Settings">
      <datalist id="yard-datasets">
        {form.datasets.map((d) => (
          <option key={d} value={d} />
        ))}
      </datalist>
      {edge ? (
        <div className="edge-panel" data-testid="edge-panel">
          <h3>Dependency</h3>
          <p>
            <b>{nameOf(edge.target)}</b> runs after <b>{nameOf(edge.source)}</b> has succeeded.
          </p>
          <button className="danger" data-testid="edge-remove" onClick={() => onRemoveEdge(edge)}>
            Remove dependency
          </button>
        </div>
      ) : task ? (
        <>
          <button className="link" data-testid="job-settings" onClick={onJob}>
            ← Job settings
          </button>
          <TaskForm key={selected!} index={index} task={task} tasks={spec.tasks} onDelete={() => onDeleteTask(selected!)} />
        </>
      ) : (
        <JobForm spec={spec} />
      )}
    </aside>
  );
}

// `after` as one line ("prep-data, eval-b:failed"), written back as the spec's list.
function AfterField() {
  const form = useForm();
  const value = form.get('after') as JobSpec['after'];
  const [draft, setDraft] = useState(afterText(value));
  useEffect(() => {
    if (afterText(parseAfter(draft)) !== afterText(value)) setDraft(afterText(value));
  }, [value]); // the draft is compared, not watched
  const bad = !!form.errorsAt('after')?.length;
  return (
    <div className="field">
      <label htmlFor="field-after">After jobs</label>
      <input
        id="field-after"
        data-testid="field-after"
        value={draft}
        placeholder="prep-data, eval-b:failed"
        aria-invalid={bad}
        className={bad ? 'invalid' : undefined}
        onChange={(e) => {
          setDraft(e.target.value);
          form.set('after', parseAfter(e.target.value));
        }}
      />
      <div className="hint">jobs (or job arrays) it waits for, each JOB[:succeeded|failed|ended]</div>
      <FieldErrors path="after" />
    </div>
  );
}

function JobForm({ spec }: { spec: JobSpec }) {
  // the queue list of the cache (shared with the Jobs and Queues pages); only running
  // queues are offered, each with its free quota
  const queues = useQueues().data ?? [];
  const running = queues.filter((q) => q.state === 'running');
  const options = running.map((q) => ({
    value: q.name,
    label: `${q.name} (free: ${cpuText(freeOf(q.quota.cpuMillis, q.used.cpuMillis))} cpu, ${memText(freeOf(q.quota.memoryBytes, q.used.memoryBytes))}, ${countText(freeOf(q.quota.gpu, q.used.gpu))} gpu)`,
  }));
  return (
    <div className="job-form" data-testid="job-form">
      <Section title="Job" path={undefined}>
        <TextField path="name" label="Name" placeholder="resnet-train" hint="4-25 characters: a-z, 0-9 and -; starts with a letter" />
        <SelectField path="type" label="Type" options={['training', 'vm']} defaultLabel="training (default)" />
        <SelectField path="queue" label="Queue" options={options} defaultLabel={spec.queue === undefined ? 'default (default)' : undefined} />
        {queues.length > 0 && running.length === 0 && <div className="hint">No queue is running: the master will refuse a submission.</div>}
        <TextField path="priority" label="Priority" type="int" placeholder="0" hint="within the queue, higher goes first" />
        <CheckField path="hold" label="Submit held (it starts on yardctl job release)" dflt={false} />
        <AfterField />
        <FieldErrors path="tasks" />
      </Section>
      <Section title="Job array (optional)" path="array" open={spec.array !== undefined}>
        <p className="hint">One job per index, named NAME-INDEX. Give a count or a range.</p>
        <TextField path="array.count" label="Count" type="int" placeholder="indexes 0..count-1" />
        <TextField path="array.range" label="Range" placeholder="0-99:2,200" />
        <TextField path="array.maxRunning" label="Max running" type="int" placeholder="no limit" />
      </Section>
      <p className="hint">Select a task on the canvas to edit it. Delete a task or an edge with the Delete key.</p>
    </div>
  );
}
