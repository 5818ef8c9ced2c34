// The side form of one task: every field of the spec for its kind and mode (docs/spec.md,
// docs/design.md §2). The fields it renders are the ones src/lib/fields.ts lists, so
// validation errors land on them.

import { memo } from 'react';
import { showsElastic, showsReplicas } from '../lib/fields';
import { cycleIfConnected } from '../lib/graph';
import { join } from '../lib/path';
import type { Container, Kind, TaskSpec } from '../lib/spec';
import { clone, defaultContainer, effectiveMode, isFramework, KINDS, kindInfo, roleRules, withKind, withMode } from '../lib/spec';
import { CheckField, FieldErrors, Section, SelectField, TextField, useForm, WordsField } from './form';

function ListSection({
  path,
  title,
  empty,
  items,
  newItem,
  render,
}: {
  path: string;
  title: string;
  empty: string;
  items: unknown[] | undefined;
  newItem: () => unknown;
  render: (itemPath: string, j: number) => JSX.Element;
}) {
  const form = useForm();
  const list = Array.isArray(items) ? items : [];
  return (
    <div className="subsection">
      <div className="field-row">
        <span className="label">{title}</span>
        <button type="button" data-testid={`add-${path}`} onClick={() => form.set(join(path, list.length), newItem())}>
          + add
        </button>
      </div>
      <FieldErrors path={path} />
      {list.length === 0 && <div className="hint">{empty}</div>}
      {list.map((_, j) => (
        <div className="list-item boxed" key={j} data-testid={`item-${join(path, j)}`}>
          <div className="grow">
            <FieldErrors path={join(path, j)} />
            {render(join(path, j), j)}
          </div>
          <button type="button" className="icon-button" aria-label="Remove" data-testid={`remove-${join(path, j)}`} onClick={() => form.set(join(path, j), undefined)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}

export function ContainerForm({ path, container }: { path: string; container: Container | undefined }) {
  const form = useForm();
  const useFlavor = container?.flavor !== undefined;
  const showResources = !useFlavor || container?.resources !== undefined;
  const setSizing = (v: string) => {
    if (v === 'flavor') {
      form.set(join(path, 'resources'), undefined);
      form.set(join(path, 'flavor'), '');
    } else {
      form.set(join(path, 'flavor'), undefined);
      form.set(join(path, 'resources'), container?.resources ?? { cpu: '500m', memory: '256Mi' });
    }
  };
  return (
    <Section title="Container" path={path}>
      <TextField path={join(path, 'image')} label="Image" placeholder="registry/repo:tag, or host" hint="host runs on the node's OS, without an image" />
      <div className="field">
        <label>Sizing</label>
        <select data-testid={`sizing-${path}`} value={useFlavor ? 'flavor' : 'resources'} onChange={(e) => setSizing(e.target.value)}>
          <option value="resources">resources</option>
          <option value="flavor">flavor (defined by an admin)</option>
        </select>
      </div>
      {showResources && (
        <div className="row3">
          <FieldErrors path={join(path, 'resources')} />
          <TextField path={`${path}.resources.cpu`} label="CPU" type="quantity" placeholder="4 or 500m" />
          <TextField path={`${path}.resources.memory`} label="Memory" type="quantity" placeholder="512Mi" />
          <TextField path={`${path}.resources.gpu`} label="GPU" type="int" placeholder="0" />
        </div>
      )}
      {useFlavor && <TextField path={join(path, 'flavor')} label="Flavor" placeholder="gpu-1x8c64g" />}
      <WordsField path={join(path, 'command')} label="Command" hint="python3 train.py" />
      <WordsField path={join(path, 'args')} label="Args" hint="--epochs 10" />
      <details className="subsection" open={!!(container?.postStart || container?.preStop)}>
        <summary>Hooks (postStart, preStop)</summary>
        <FieldErrors path={join(path, 'postStart')} />
        <WordsField path={`${path}.postStart.exec`} label="postStart exec" hint="sh -c 'echo started'" />
        <FieldErrors path={join(path, 'preStop')} />
        <WordsField path={`${path}.preStop.exec`} label="preStop exec" hint="sh -c 'touch /ckpt/stop'" />
      </details>
      <ListSection
        path={join(path, 'ports')}
        title="Ports"
        empty="No ports. Each named port becomes YARD_PORT_<NAME>."
        items={container?.ports}
        newItem={() => ({ name: '', port: '' })}
        render={(p) => (
          <div className="row3">
            <TextField path={join(p, 'name')} label="Name" placeholder="metrics" />
            <TextField path={join(p, 'port')} label="Port" type="int" placeholder="9100" />
            <SelectField path={join(p, 'protocol')} label="Protocol" options={['TCP', 'UDP']} defaultLabel="TCP" />
          </div>
        )}
      />
      <ListSection
        path={join(path, 'env')}
        title="Environment"
        empty="No variables."
        items={container?.env}
        newItem={() => ({ name: '', value: '' })}
        render={(p) => (
          <div className="row2">
            <TextField path={join(p, 'name')} label="Name" placeholder="EPOCHS" />
            <TextField path={join(p, 'value')} label="Value" placeholder="90" keepEmpty />
          </div>
        )}
      />
      <ListSection
        path={join(path, 'mounts')}
        title="Dataset mounts"
        empty="No datasets mounted."
        items={container?.mounts}
        newItem={() => ({ dataset: '', path: '' })}
        render={(p) => (
          <div className="row3">
            <TextField path={join(p, 'dataset')} label="Dataset" list="yard-datasets" placeholder="imagenet" />
            <TextField path={join(p, 'path')} label="Mount path" placeholder="/data" />
            <CheckField path={join(p, 'readOnly')} label="read-only" dflt />
          </div>
        )}
      />
      <TextField path={join(path, 'workingDir')} label="Working directory" placeholder="the image's" />
    </Section>
  );
}

function RoleForm({ base, name, task, required }: { base: string; name: string; task: TaskSpec; required: boolean }) {
  const form = useForm();
  const rp = join(join(base, 'roles'), name);
  const role = task.roles?.[name];
  return (
    <Section
      title={`Role: ${name}`}
      path={rp}
      actions={
        !required && (
          <button type="button" className="link" data-testid={`remove-${rp}`} onClick={() => form.set(rp, undefined)}>
            remove role
          </button>
        )
      }
    >
      {showsReplicas(task, name) && (
        <TextField
          path={join(rp, 'replicas')}
          label="Replicas"
          type="int"
          placeholder="1"
          hint={effectiveMode(task) === 'elastic' ? 'not used in elastic mode: remove it' : undefined}
        />
      )}
      <ContainerForm path={join(rp, 'container')} container={role?.container} />
    </Section>
  );
}

function DependsOn({ base, task, tasks }: { base: string; task: TaskSpec; tasks: readonly TaskSpec[] }) {
  const form = useForm();
  const deps = task.dependsOn ?? [];
  const path = join(base, 'dependsOn');
  const candidates = tasks
    .map((t) => t.name ?? '')
    .filter((n) => n && n !== task.name && !deps.includes(n) && !cycleIfConnected(tasks, n, task.name ?? ''));
  return (
    <div className="field">
      <label>Runs after</label>
      <div className="chips">
        {deps.map((d, j) => (
          <span className="chip" key={`${d}/${j}`} data-testid={`dep-${task.name}-${d}`}>
            {d}
            <button type="button" aria-label={`Remove dependency on ${d}`} data-testid={`remove-${path}[${j}]`} onClick={() => form.set(path, deps.length > 1 ? deps.filter((_, k) => k !== j) : undefined)}>
              ×
            </button>
            <FieldErrors path={`${path}[${j}]`} />
          </span>
        ))}
        {candidates.length > 0 && (
          <select data-testid={`add-${path}`} value="" onChange={(e) => e.target.value && form.set(path, [...deps, e.target.value])}>
            <option value="">+ after…</option>
            {candidates.map((c) => (
              <option key={c}>{c}</option>
            ))}
          </select>
        )}
        {deps.length === 0 && candidates.length === 0 && <span className="hint">Draw an edge from another task's bottom handle.</span>}
      </div>
      <FieldErrors path={path} />
    </div>
  );
}

function withoutMode(t: TaskSpec): TaskSpec {
  const out = { ...t };
  delete out.mode;
  return out;
}

export const TaskForm = memo(function TaskForm({
  index,
  task,
  tasks,
  onDelete,
}: {
  index: number;
  task: TaskSpec;
  tasks: readonly TaskSpec[];
  onDelete: () => void;
}) {
  const form = useForm();
  const b = `tasks[${index}]`;
  const info = kindInfo(task.kind);
  const mode = effectiveMode(task);
  const rules = roleRules(task.kind, mode);
  const present = Object.keys(task.roles ?? {});
  const addable = rules.allowed.filter((r) => !present.includes(r));
  const elastic = mode === 'elastic';

  const addRole = (name: string) => {
    const seed = Object.values(task.roles ?? {}).find((r) => r?.container)?.container ?? defaultContainer();
    form.set(join(join(b, 'roles'), name), elastic ? { container: clone(seed) } : { replicas: 1, container: clone(seed) });
  };

  return (
    <div className="task-form" data-testid={`task-form-${index}`}>
      <Section title={`Task ${index + 1}`} path={b}>
        <TextField path={join(b, 'name')} label="Name" placeholder="train" hint="4-32 characters: a-z, 0-9 and -; starts with a letter" />
        <SelectField
          path={join(b, 'kind')}
          label="Kind"
          options={KINDS.map((k) => ({ value: k.kind, label: k.label }))}
          onChange={(v) => form.set(b, withKind(task, v as Kind))}
        />
        {info && info.modes.length > 0 && (
          <SelectField
            path={join(b, 'mode')}
            label="Mode"
            options={info.modes}
            defaultLabel={`${mode} (default)`}
            onChange={(v) => form.set(b, v ? withMode(task, v) : withoutMode(withMode(task, mode)))}
          />
        )}
        <DependsOn base={b} task={task} tasks={tasks} />
        {task.kind === 'pytorch' && <TextField path={join(b, 'nprocPerNode')} label="Processes per node (nprocPerNode)" type="int" placeholder="1" />}
        {task.kind === 'openmpi' && <TextField path={join(b, 'slotsPerWorker')} label="Slots per worker" type="int" placeholder="1" />}
        {task.kind === 'tensorflow' && <CheckField path={join(b, 'evaluatorInCluster')} label="Put the evaluator in TF_CONFIG's cluster" dflt={false} />}
      </Section>

      {task.kind === 'container-job' && (
        <>
          <Section title="Runs" path={undefined}>
            <div className="row2">
              <TextField path={join(b, 'completions')} label="Completions" type="int" placeholder="1" hint="successful runs needed" />
              <TextField path={join(b, 'parallelism')} label="Parallelism" type="int" placeholder="1" hint="runs at the same time" />
              <TextField path={join(b, 'timeout')} label="Timeout per run" type="quantity" placeholder="none" hint="seconds, or 10m, 1h30m" />
              <TextField path={join(b, 'retries')} label="Retries" type="int" placeholder="0" hint="failed runs tolerated" />
            </div>
            <SelectField path={join(b, 'restartPolicy')} label="Restart policy" options={['OnFailure', 'Never']} defaultLabel="OnFailure (default)" />
          </Section>
          <ContainerForm path={join(b, 'container')} container={task.container} />
        </>
      )}

      {isFramework(task) && (
        <>
          <Section
            title="Roles"
            path={join(b, 'roles')}
            actions={
              addable.length > 0 && (
                <select data-testid={`add-${b}.roles`} value="" onChange={(e) => e.target.value && addRole(e.target.value)} onClick={(e) => e.stopPropagation()}>
                  <option value="">+ role…</option>
                  {addable.map((r) => (
                    <option key={r}>{r}</option>
                  ))}
                </select>
              )
            }
          >
            {present.map((name) => (
              <RoleForm key={name} base={b} name={name} task={task} required={rules.required.includes(name) && rules.allowed.includes(name)} />
            ))}
          </Section>
          {showsElastic(task) && (
            <Section title="Elastic" path={join(b, 'elastic')}>
              <div className="row2">
                <SelectField
                  path={join(b, 'elastic.backend')}
                  label="Backend"
                  options={task.kind === 'paddle' ? ['etcd'] : ['c10d', 'etcd']}
                  defaultLabel={`${task.kind === 'paddle' ? 'etcd' : 'c10d'} (default)`}
                />
                <TextField path={join(b, 'elastic.metric')} label="Metric" placeholder="cpu" />
                <TextField path={join(b, 'elastic.target')} label="Target %" type="int" placeholder="80" />
                <TextField path={join(b, 'elastic.scaleTimeout')} label="Scale timeout" type="quantity" placeholder="none" hint="seconds, or 5m" />
                <TextField path={join(b, 'elastic.minReplicas')} label="Min replicas" type="int" placeholder="1" />
                <TextField path={join(b, 'elastic.maxReplicas')} label="Max replicas" type="int" placeholder="1" />
              </div>
            </Section>
          )}
          <Section title="Advanced" path={join(b, 'advanced')} open={task.advanced !== undefined}>
            <div className="row2">
              <TextField path={join(b, 'advanced.retries')} label="Retries" type="int" placeholder="0" hint="whole-gang restarts" />
              <TextField path={join(b, 'advanced.maxLifetime')} label="Max lifetime" type="quantity" placeholder="no limit" hint="seconds, or 2h" />
              <TextField path={join(b, 'advanced.retention')} label="Retention" type="quantity" placeholder="86400" hint="keep finished replicas and logs" />
              <SelectField path={join(b, 'advanced.cleanup')} label="Cleanup" options={['running', 'none', 'all']} defaultLabel="running (default)" />
            </div>
          </Section>
        </>
      )}

      <div className="form-actions">
        <button type="button" className="danger" data-testid="delete-task" onClick={onDelete}>
          Delete task
        </button>
      </div>
    </div>
  );
});
