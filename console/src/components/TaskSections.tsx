// How the task form shows each task-level field a kind's descriptor lists (GET
// /api/v1/kinds): which fields a task has is the master's word, how each looks (label,
// placeholder, hint) the console's. A field the console has no widget for is a text field
// under its own name, so a field added to a kind shows before the console knows it.

import { Fragment } from 'react';
import { join } from '../lib/path';
import type { TaskSpec } from '../lib/spec';
import { CheckField, Section, SelectField, TextField } from './form';

type Widget = (path: string) => JSX.Element;

// In the task's own section, below "Runs after".
const TOP: Record<string, Widget> = {
  nprocPerNode: (p) => <TextField path={p} label="Processes per node (nprocPerNode)" type="int" placeholder="1" />,
  slotsPerWorker: (p) => <TextField path={p} label="Slots per worker" type="int" placeholder="1" />,
  evaluatorInCluster: (p) => <CheckField path={p} label="Put the evaluator in TF_CONFIG's cluster" dflt={false} />,
};

// A container job's runs.
const RUNS: Record<string, Widget> = {
  completions: (p) => <TextField path={p} label="Completions" type="int" placeholder="1" hint="successful runs needed" />,
  parallelism: (p) => <TextField path={p} label="Parallelism" type="int" placeholder="1" hint="runs at the same time" />,
  timeout: (p) => <TextField path={p} label="Timeout per run" type="quantity" placeholder="none" hint="seconds, or 10m, 1h30m" />,
  retries: (p) => <TextField path={p} label="Retries" type="int" placeholder="0" hint="failed runs tolerated" />,
};
const RESTART = 'restartPolicy';

// The fields with a section of their own (TaskForm renders them).
const SECTIONS = new Set(['mode', 'roles', 'elastic', 'advanced', 'container']);

function isTop(f: string): boolean {
  return !SECTIONS.has(f) && !(f in RUNS) && f !== RESTART;
}

// The simple fields of the task's own section, in the descriptor's order.
export function TopFields({ base, fields }: { base: string; fields: readonly string[] }) {
  return (
    <>
      {fields.filter(isTop).map((f) => (
        <Fragment key={f}>{(TOP[f] ?? ((p: string) => <TextField path={p} label={f} />))(join(base, f))}</Fragment>
      ))}
    </>
  );
}

export function RunsSection({ base, fields }: { base: string; fields: readonly string[] }) {
  const runs = fields.filter((f) => f in RUNS);
  if (!runs.length && !fields.includes(RESTART)) return null;
  return (
    <Section title="Runs" path={undefined}>
      <div className="row2">
        {runs.map((f) => (
          <Fragment key={f}>{RUNS[f](join(base, f))}</Fragment>
        ))}
      </div>
      {fields.includes(RESTART) && (
        <SelectField path={join(base, RESTART)} label="Restart policy" options={['OnFailure', 'Never']} defaultLabel="OnFailure (default)" />
      )}
    </Section>
  );
}

export function ElasticSection({ base, task }: { base: string; task: TaskSpec }) {
  // the backends are not in the kinds' descriptors: Paddle's elastic launcher takes etcd only
  const backends = task.kind === 'paddle' ? ['etcd'] : ['c10d', 'etcd'];
  return (
    <Section title="Elastic" path={join(base, 'elastic')}>
      <div className="row2">
        <SelectField path={join(base, 'elastic.backend')} label="Backend" options={backends} defaultLabel={`${backends[0]} (default)`} />
        <TextField path={join(base, 'elastic.metric')} label="Metric" placeholder="cpu" />
        <TextField path={join(base, 'elastic.target')} label="Target %" type="int" placeholder="80" />
        <TextField path={join(base, 'elastic.scaleTimeout')} label="Scale timeout" type="quantity" placeholder="none" hint="seconds, or 5m" />
        <TextField path={join(base, 'elastic.minReplicas')} label="Min replicas" type="int" placeholder="1" />
        <TextField path={join(base, 'elastic.maxReplicas')} label="Max replicas" type="int" placeholder="1" />
      </div>
    </Section>
  );
}

export function AdvancedSection({ base, task }: { base: string; task: TaskSpec }) {
  return (
    <Section title="Advanced" path={join(base, 'advanced')} open={task.advanced !== undefined}>
      <div className="row2">
        <TextField path={join(base, 'advanced.retries')} label="Retries" type="int" placeholder="0" hint="whole-gang restarts" />
        <TextField path={join(base, 'advanced.maxLifetime')} label="Max lifetime" type="quantity" placeholder="no limit" hint="seconds, or 2h" />
        <TextField path={join(base, 'advanced.retention')} label="Retention" type="quantity" placeholder="86400" hint="keep finished replicas and logs" />
        <SelectField path={join(base, 'advanced.cleanup')} label="Cleanup" options={['running', 'none', 'all']} defaultLabel="running (default)" />
      </div>
    </Section>
  );
}
