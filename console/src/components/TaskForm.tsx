// The side form of one task: every field of the spec for its kind and mode (docs/spec.md,
// docs/design.md §2). Which fields, modes and roles a kind takes comes from its descriptor
// (GET /api/v1/kinds, lib/kinds.ts); the fields it renders are the ones src/lib/fields.ts
// lists, so validation errors land on them.

import { memo } from 'react';
import { showsReplicas, taskFields } from '../lib/fields';
import { cycleIfConnected } from '../lib/graph';
import { effectiveMode, isElastic, kindOf, modeNames, roleRules, startReplicas } from '../lib/kinds';
import { join } from '../lib/path';
import type { TaskSpec } from '../lib/spec';
import { clone, defaultContainer, withKind, withMode } from '../lib/spec';
import { ContainerForm } from './ContainerForm';
import { FieldErrors, Section, SelectField, TextField, useForm } from './form';
import { useKindsContext } from './KindsContext';
import { AdvancedSection, ElasticSection, RunsSection, TopFields } from './TaskSections';

function RoleForm({ base, name, task, required }: { base: string; name: string; task: TaskSpec; required: boolean }) {
  const form = useForm();
  const kinds = useKindsContext();
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
      {showsReplicas(kinds, task, name) && (
        <TextField
          path={join(rp, 'replicas')}
          label="Replicas"
          type="int"
          placeholder="1"
          hint={isElastic(kinds, task) ? 'not used in elastic mode: remove it' : undefined}
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

// `topology:` (docs/topology.md, "Cluster levels"): the whole gang within one domain of a level
// of the master's topology_levels (required), or there if one has room (preferred).
function TopologyField({ base, task }: { base: string; task: TaskSpec }) {
  const form = useForm();
  const path = join(base, 'topology');
  const t = task.topology;
  const mode = t?.required !== undefined ? 'required' : t?.preferred !== undefined ? 'preferred' : '';
  const level = (mode === 'required' ? t?.required : t?.preferred) ?? '';
  const set = (m: string, l: string) => form.set(path, m ? { [m]: l } : undefined);
  return (
    <div className="field">
      <label htmlFor={`${path}.mode`}>Topology</label>
      <div className="field-row">
        <select id={`${path}.mode`} data-testid={`field-${path}.mode`} value={mode} onChange={(e) => set(e.target.value, level || 'rack')}>
          <option value="">anywhere (default)</option>
          <option value="required">required: within one</option>
          <option value="preferred">preferred: within one</option>
        </select>
        {mode && <input data-testid={`field-${path}.level`} value={level} placeholder="rack" onChange={(e) => set(mode, e.target.value)} />}
      </div>
      <div className="hint">a level of the master's topology_levels, like rack or block</div>
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
  const kinds = useKindsContext();
  const b = `tasks[${index}]`;
  const modes = modeNames(kindOf(kinds, task.kind));
  const mode = effectiveMode(kinds, task);
  const rules = roleRules(kinds, task.kind, mode);
  const fields = taskFields(kinds, task);
  const present = Object.keys(task.roles ?? {});
  const addable = rules.allowed.filter((r) => !present.includes(r));
  const elastic = isElastic(kinds, task);

  const addRole = (name: string) => {
    const seed = Object.values(task.roles ?? {}).find((r) => r?.container)?.container ?? defaultContainer();
    const replicas = startReplicas(rules.rules.find((r) => r.role === name));
    form.set(join(join(b, 'roles'), name), elastic ? { container: clone(seed) } : { replicas, container: clone(seed) });
  };

  return (
    <div className="task-form" data-testid={`task-form-${index}`}>
      <Section title={`Task ${index + 1}`} path={b}>
        <TextField path={join(b, 'name')} label="Name" placeholder="train" hint="4-32 characters: a-z, 0-9 and -; starts with a letter" />
        <SelectField
          path={join(b, 'kind')}
          label="Kind"
          options={kinds.map((k) => ({ value: k.kind, label: k.label }))}
          onChange={(v) => form.set(b, withKind(kinds, task, v))}
        />
        {fields.includes('mode') && modes.length > 0 && (
          <SelectField
            path={join(b, 'mode')}
            label="Mode"
            options={modes}
            defaultLabel={`${mode} (default)`}
            onChange={(v) => form.set(b, v ? withMode(kinds, task, v) : withoutMode(withMode(kinds, task, mode)))}
          />
        )}
        <DependsOn base={b} task={task} tasks={tasks} />
        <TopologyField base={b} task={task} />
        <TopFields base={b} fields={fields} />
      </Section>

      <RunsSection base={b} fields={fields} />
      {fields.includes('container') && <ContainerForm path={join(b, 'container')} container={task.container} />}

      {fields.includes('roles') && (
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
          {rules.rule && <div className="hint">{rules.rule}</div>}
          {present.map((name) => (
            <RoleForm key={name} base={b} name={name} task={task} required={rules.required.includes(name) && rules.allowed.includes(name)} />
          ))}
        </Section>
      )}
      {fields.includes('elastic') && <ElasticSection base={b} task={task} />}
      {fields.includes('advanced') && <AdvancedSection base={b} task={task} />}

      <div className="form-actions">
        <button type="button" className="danger" data-testid="delete-task" onClick={onDelete}>
          Delete task
        </button>
      </div>
    </div>
  );
});
