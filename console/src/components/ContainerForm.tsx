// A container's form (image, sizing, command, hooks, ports, env, mounts), for a container
// job's `container` and each role's. The fields are the ones src/lib/fields.ts lists.

import { join } from '../lib/path';
import type { Container } from '../lib/spec';
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
