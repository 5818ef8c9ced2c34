// Create job: drag kinds from the palette onto the canvas, connect tasks into a DAG, fill
// each task's form; the spec is validated by the master as the user types (debounced) and
// every error is shown at its field and counted on its task's node. YAML import/export;
// Submit sends the same spec object. The draft survives a reload (localStorage).

import {
  Background,
  Controls,
  MarkerType,
  ReactFlow,
  ReactFlowProvider,
  useEdgesState,
  useNodesState,
  useReactFlow,
  type Connection,
  type Edge,
} from '@xyflow/react';
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent } from 'react';
import { api, ApiError } from '../api/client';
import type { DatasetJson, QueueJson, SubmitAnswer, ValidateAnswer } from '../api/types';
import { Confirm, Modal } from '../components/Confirm';
import { EDIT_W, EDIT_H, EditTaskNode, type EditNode } from '../components/EditTaskNode';
import { FieldErrors, FormContext, type FormApi, SelectField, Section, TextField } from '../components/form';
import { TaskForm } from '../components/TaskForm';
import {
  addTask,
  connect,
  disconnect,
  edgesOf,
  emptyModel,
  modelFromSpec,
  removeTasks,
  setField,
  type EditorModel,
  type XY,
} from '../lib/editor';
import { errorCountByTask, errorsByField, specFieldPaths, type SpecError } from '../lib/fields';
import { cpuText, freeOf, memText, countText } from '../lib/format';
import { layoutInWorker } from '../lib/layoutClient';
import { formatPath, getAt, parsePath, taskIndexOf } from '../lib/path';
import { KINDS, type Kind } from '../lib/spec';
import { exportYaml, importYaml } from '../lib/yamlio';
import { navigate } from '../router';

const DRAFT_KEY = 'yard.console.draft';
const VALIDATE_MS = 400;
const KIND_MIME = 'application/x-yard-kind';

interface Draft {
  spec: unknown;
  positions: (XY | null)[];
}

function loadDraft(): EditorModel {
  try {
    const raw = localStorage.getItem(DRAFT_KEY);
    if (!raw) return emptyModel();
    const d = JSON.parse(raw) as Draft;
    const m = modelFromSpec(d.spec);
    m.ids.forEach((id, i) => {
      const p = d.positions?.[i];
      if (p) m.positions[id] = p;
    });
    return m;
  } catch {
    return emptyModel();
  }
}

interface Validation {
  errors: SpecError[];
  spec: unknown; // the spec the errors are about
  failure?: string; // the validation call itself failed
}

const nodeTypes = { edit: EditTaskNode };

function Editor() {
  const [model, setModel] = useState<EditorModel>(loadDraft);
  const modelRef = useRef(model);
  modelRef.current = model;
  const [nodes, setNodes, onNodesChange] = useNodesState<EditNode>([]);
  const [edges, setEdges, onEdgesChange] = useEdgesState<Edge>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [selectedEdge, setSelectedEdge] = useState<string | null>(null);
  const [message, setMessage] = useState('');
  const [validation, setValidation] = useState<Validation>({ errors: [], spec: null });
  const [checking, setChecking] = useState(false);
  const [touched, setTouched] = useState(model.spec.tasks.length > 0);
  const [queues, setQueues] = useState<QueueJson[]>([]);
  const [datasets, setDatasets] = useState<string[]>([]);
  const [showImport, setShowImport] = useState(false);
  const [showExport, setShowExport] = useState(false);
  const [showProblems, setShowProblems] = useState(false);
  const [confirmClear, setConfirmClear] = useState(false);
  const [submitting, setSubmitting] = useState(false);
  const [submitError, setSubmitError] = useState('');
  const flow = useReactFlow();
  const wrapper = useRef<HTMLDivElement>(null);

  const update = useCallback((f: (m: EditorModel) => EditorModel) => {
    setTouched(true);
    setModel(f);
  }, []);

  useEffect(() => {
    api<{ items: QueueJson[] }>('/queues')
      .then((r) => setQueues(r.items))
      .catch(() => undefined);
    api<{ items: DatasetJson[] }>('/datasets')
      .then((r) => setDatasets(r.items.map((d) => d.name)))
      .catch(() => undefined);
  }, []);

  // a message (a refused edge) goes away by itself
  useEffect(() => {
    if (!message) return undefined;
    const t = setTimeout(() => setMessage(''), 6000);
    return () => clearTimeout(t);
  }, [message]);

  // validation by the master, once typing pauses
  useEffect(() => {
    if (!touched) return undefined;
    const ctl = new AbortController();
    const spec = model.spec;
    const t = setTimeout(async () => {
      setChecking(true);
      try {
        const r = await api<ValidateAnswer>('/validate', { json: spec, signal: ctl.signal });
        setValidation({ errors: r.errors ?? [], spec });
      } catch (e) {
        if ((e as Error).name === 'AbortError') return;
        if (e instanceof ApiError && e.errors.length) setValidation({ errors: e.errors, spec });
        else setValidation({ errors: [], spec, failure: `validation failed: ${(e as Error).message}` });
      } finally {
        if (!ctl.signal.aborted) setChecking(false);
      }
    }, VALIDATE_MS);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [model.spec, touched]);

  // the draft survives reloads and navigation
  useEffect(() => {
    const t = setTimeout(() => {
      const pos = new Map(nodes.map((n) => [n.id, n.position]));
      const draft: Draft = { spec: model.spec, positions: model.ids.map((id) => pos.get(id) ?? model.positions[id] ?? null) };
      try {
        localStorage.setItem(DRAFT_KEY, JSON.stringify(draft));
      } catch {
        /* storage full or disabled: the draft is just not kept */
      }
    }, 500);
    return () => clearTimeout(t);
  }, [model, nodes]);

  const errorsMap = useMemo(
    () => (validation.errors.length ? errorsByField(validation.errors, specFieldPaths(validation.spec as EditorModel['spec'])) : new Map<string, SpecError[]>()),
    [validation],
  );
  const errorCounts = useMemo(() => errorCountByTask(validation.errors), [validation]);

  // canvas nodes follow the model; an unchanged task keeps its node object (no re-render)
  useEffect(() => {
    setNodes((prev) => {
      const byId = new Map(prev.map((n) => [n.id, n]));
      return model.spec.tasks.map((task, i) => {
        const id = model.ids[i];
        const old = byId.get(id);
        const errors = errorCounts.get(i) ?? 0;
        if (old && old.data.task === task && old.data.errors === errors) return old;
        if (old) return { ...old, data: { task, errors } };
        return { id, type: 'edit' as const, position: model.positions[id] ?? { x: 0, y: 0 }, data: { task, errors } };
      });
    });
  }, [model, errorCounts, setNodes]);

  useEffect(() => {
    setEdges((prev) => {
      const sel = new Set(prev.filter((e) => e.selected).map((e) => e.id));
      return edgesOf(model).map((e) => ({
        ...e,
        selected: sel.has(e.id),
        markerEnd: { type: MarkerType.ArrowClosed },
        data: {},
      }));
    });
  }, [model, setEdges]);

  const autoLayout = useCallback(
    async (m: EditorModel) => {
      const r = await layoutInWorker(
        m.ids.map((id) => ({ id, width: EDIT_W, height: EDIT_H })),
        edgesOf(m).map((e) => ({ source: e.source, target: e.target })),
      );
      setNodes((prev) => prev.map((n) => (r.positions[n.id] ? { ...n, position: r.positions[n.id] } : n)));
      setModel((cur) => ({ ...cur, positions: { ...cur.positions, ...r.positions } }));
      setTimeout(() => flow.fitView({ padding: 0.2, maxZoom: 1 }), 50);
    },
    [flow, setNodes],
  );

  // a restored draft is shown whole (laid out first if it has no positions); once, at mount
  useEffect(() => {
    if (!model.ids.length) return;
    if (model.ids.some((id) => !model.positions[id])) void autoLayout(model);
    else setTimeout(() => flow.fitView({ padding: 0.2, maxZoom: 1 }), 50);
  }, []);

  const addAt = useCallback(
    (kind: Kind, at: XY) => {
      const r = addTask(modelRef.current, kind, at);
      update(() => r.model);
      setSelected(r.id);
      setSelectedEdge(null);
    },
    [update],
  );

  const onDrop = useCallback(
    (e: DragEvent) => {
      e.preventDefault();
      const kind = e.dataTransfer.getData(KIND_MIME) as Kind;
      if (!KINDS.some((k) => k.kind === kind)) return;
      const p = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
      addAt(kind, { x: p.x - EDIT_W / 2, y: p.y - EDIT_H / 2 });
    },
    [flow, addAt],
  );

  // the palette's click (or Enter): place the task below the lowest one
  const addByClick = (kind: Kind) => {
    const ys = nodes.map((n) => n.position.y);
    const x = nodes.length ? nodes[nodes.length - 1].position.x : 0;
    addAt(kind, { x, y: ys.length ? Math.max(...ys) + EDIT_H + 50 : 0 });
  };

  const onConnect = useCallback(
    (c: Connection) => {
      const r = connect(modelRef.current, c.source, c.target);
      if (r.error !== undefined) setMessage(r.error);
      else update(() => r.model);
    },
    [update],
  );

  const deleteTasks = useCallback(
    (ids: string[]) => {
      update((m) => removeTasks(m, ids));
      setSelected((s) => (s && ids.includes(s) ? null : s));
    },
    [update],
  );

  const deleteEdges = useCallback(
    (list: { source: string; target: string }[]) => {
      update((m) => list.reduce((acc, e) => disconnect(acc, e.source, e.target), m));
      setSelectedEdge(null);
    },
    [update],
  );

  const form: FormApi = useMemo(
    () => ({
      get: (path) => getAt(model.spec, path),
      set: (path, value) =>
        update((m) => {
          let next = setField(m, path, value);
          // an emptied hook is removed with its mapping (`postStart: {}` would need an exec)
          const segs = parsePath(path);
          if (segs[segs.length - 1] === 'exec' && (value === undefined || (Array.isArray(value) && value.length === 0)))
            next = setField(next, formatPath(segs.slice(0, -1)), undefined);
          return next;
        }),
      errorsAt: (path) => errorsMap.get(path),
      datasets,
    }),
    [model.spec, update, errorsMap, datasets],
  );

  const importSpec = (spec: unknown) => {
    const m = modelFromSpec(spec);
    setMessage('');
    setModel(m);
    setTouched(true);
    setSelected(null);
    setNodes([]);
    void autoLayout(m);
  };

  const submit = async () => {
    setSubmitting(true);
    setSubmitError('');
    try {
      const r = await api<SubmitAnswer>('/jobs', { json: model.spec });
      localStorage.removeItem(DRAFT_KEY);
      const jobs = r.jobs ?? [];
      navigate(jobs.length === 1 ? `/jobs/${encodeURIComponent(jobs[0])}` : `/jobs?q=${encodeURIComponent(model.spec.name ?? '')}`);
    } catch (e) {
      if (e instanceof ApiError && e.errors.length) {
        setValidation({ errors: e.errors, spec: model.spec });
        setSubmitError(`The master refused the spec: ${e.errors.length} ${e.errors.length === 1 ? 'problem' : 'problems'}.`);
      } else setSubmitError((e as Error).message);
    } finally {
      setSubmitting(false);
    }
  };

  const selIndex = selected ? model.ids.indexOf(selected) : -1;
  const selTask = selIndex >= 0 ? model.spec.tasks[selIndex] : undefined;
  const edge = selectedEdge ? edges.find((e) => e.id === selectedEdge) : undefined;
  const nameOf = (id: string) => model.spec.tasks[model.ids.indexOf(id)]?.name ?? id;
  const stale = validation.spec !== model.spec;
  // errors no field shows: those without one, and the job's while a task's form is open
  const generalErrors = [
    ...(errorsMap.get('') ?? []),
    ...(selTask || edge ? [...errorsMap.entries()].filter(([f]) => f !== '' && taskIndexOf(f) < 0).flatMap(([, list]) => list) : []),
  ];
  const count = validation.errors.length;

  const runningQueues = queues.filter((q) => q.state === 'running');
  const queueOptions = runningQueues.map((q) => ({
    value: q.name,
    label: `${q.name} (free: ${cpuText(freeOf(q.quota.cpuMillis, q.used.cpuMillis))} cpu, ${memText(freeOf(q.quota.memoryBytes, q.used.memoryBytes))}, ${countText(freeOf(q.quota.gpu, q.used.gpu))} gpu)`,
  }));

  return (
    <FormContext.Provider value={form}>
      <div className="create">
        <aside className="palette" aria-label="Task kinds">
          <h3>Task kinds</h3>
          <p className="hint">Drag onto the canvas (or click).</p>
          {KINDS.map((k) => (
            <div
              key={k.kind}
              className={`palette-item kind-${k.kind}`}
              data-testid={`palette-${k.kind}`}
              draggable
              role="button"
              tabIndex={0}
              onDragStart={(e) => {
                e.dataTransfer.setData(KIND_MIME, k.kind);
                e.dataTransfer.effectAllowed = 'copy';
              }}
              onClick={() => addByClick(k.kind)}
              onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && addByClick(k.kind)}
            >
              <span className={`kind-dot kind-${k.kind}`} aria-hidden="true" />
              {k.label}
            </div>
          ))}
          <h3>Spec</h3>
          <button data-testid="import-open" onClick={() => setShowImport(true)}>
            Import YAML
          </button>
          <button data-testid="export-open" onClick={() => setShowExport(true)}>
            Export YAML
          </button>
          <button data-testid="auto-layout" disabled={!model.ids.length} onClick={() => void autoLayout(model)}>
            Auto layout
          </button>
          <button data-testid="editor-clear" onClick={() => (model.spec.tasks.length ? setConfirmClear(true) : undefined)}>
            New job
          </button>
        </aside>

        <div className="create-center">
          <div className="create-bar">
            <span className="validation" data-testid="validation-status" data-state={checking || stale ? 'checking' : count ? 'invalid' : 'valid'}>
              {!touched
                ? 'Drop a task to start.'
                : checking || stale
                  ? 'Checking…'
                  : validation.failure
                    ? validation.failure
                    : count
                      ? `${count} ${count === 1 ? 'problem' : 'problems'}`
                      : 'Valid'}
            </span>
            {count > 0 && (
              <button className="link" data-testid="problems-toggle" onClick={() => setShowProblems((v) => !v)}>
                {showProblems ? 'hide' : 'show all'}
              </button>
            )}
            <span className="spacer" />
            <button className="primary" data-testid="submit-job" disabled={submitting || model.spec.tasks.length === 0} onClick={() => void submit()}>
              {submitting ? 'Submitting…' : 'Submit'}
            </button>
          </div>
          {submitError && (
            <div className="error-banner" data-testid="submit-error">
              {submitError}
            </div>
          )}
          {generalErrors.length > 0 && (
            <div className="error-banner">
              {generalErrors.map((e, i) => (
                <div key={i} data-testid={`error-${e.path}`}>
                  {e.path ? <code>{e.path}: </code> : null}
                  {e.message}
                </div>
              ))}
            </div>
          )}
          {showProblems && count > 0 && (
            <ul className="problems" data-testid="problems-list">
              {validation.errors.map((e, i) => {
                const ti = /^tasks\[(\d+)\]/.exec(e.path);
                return (
                  <li key={i} data-testid={`problem-${e.path}`}>
                    <button className="link" onClick={() => (ti ? setSelected(model.ids[Number(ti[1])] ?? null) : setSelected(null))}>
                      {e.path || '(spec)'}
                    </button>
                    : {e.message}
                  </li>
                );
              })}
            </ul>
          )}
          {message && (
            <div className="canvas-message" role="alert" data-testid="canvas-message">
              {message}
            </div>
          )}
          <div className="canvas" data-testid="canvas" ref={wrapper} onDragOver={(e) => {
            e.preventDefault();
            e.dataTransfer.dropEffect = 'copy';
          }} onDrop={onDrop}>
            <ReactFlow
              nodes={nodes}
              edges={edges}
              nodeTypes={nodeTypes}
              onNodesChange={onNodesChange}
              onEdgesChange={onEdgesChange}
              onConnect={onConnect}
              onNodesDelete={(ns) => deleteTasks(ns.map((n) => n.id))}
              onEdgesDelete={(es) => deleteEdges(es)}
              onNodeClick={(_, n) => {
                setSelected(n.id);
                setSelectedEdge(null);
              }}
              onEdgeClick={(_, e) => {
                setSelectedEdge(e.id);
                setSelected(null);
              }}
              onPaneClick={() => {
                setSelected(null);
                setSelectedEdge(null);
              }}
              deleteKeyCode={['Backspace', 'Delete']}
              onlyRenderVisibleElements
              minZoom={0.05}
              defaultViewport={{ x: 40, y: 30, zoom: 1 }}
              proOptions={{ hideAttribution: true }}
            >
              <Background gap={20} size={1} />
              <Controls showInteractive={false} />
            </ReactFlow>
            {model.spec.tasks.length === 0 && <div className="canvas-empty">Drag a task kind here.</div>}
          </div>
        </div>

        <aside className="form-panel" aria-label="Settings">
          <datalist id="yard-datasets">
            {datasets.map((d) => (
              <option key={d} value={d} />
            ))}
          </datalist>
          {edge ? (
            <div className="edge-panel" data-testid="edge-panel">
              <h3>Dependency</h3>
              <p>
                <b>{nameOf(edge.target)}</b> runs after <b>{nameOf(edge.source)}</b> has succeeded.
              </p>
              <button className="danger" data-testid="edge-remove" onClick={() => deleteEdges([edge])}>
                Remove dependency
              </button>
            </div>
          ) : selTask ? (
            <>
              <button className="link" data-testid="job-settings" onClick={() => setSelected(null)}>
                ← Job settings
              </button>
              <TaskForm key={selected!} index={selIndex} task={selTask} tasks={model.spec.tasks} onDelete={() => deleteTasks([selected!])} />
            </>
          ) : (
            <div className="job-form" data-testid="job-form">
              <Section title="Job" path={undefined}>
                <TextField path="name" label="Name" placeholder="resnet-train" hint="4-25 characters: a-z, 0-9 and -; starts with a letter" />
                <SelectField path="type" label="Type" options={['training', 'vm']} defaultLabel="training (default)" />
                <SelectField path="queue" label="Queue" options={queueOptions} defaultLabel={model.spec.queue === undefined ? 'default (default)' : undefined} />
                {queues.length > 0 && runningQueues.length === 0 && <div className="hint">No queue is running: the master will refuse a submission.</div>}
                <TextField path="priority" label="Priority" type="int" placeholder="0" hint="within the queue, higher goes first" />
                <FieldErrors path="tasks" />
              </Section>
              <Section title="Job array (optional)" path="array" open={model.spec.array !== undefined}>
                <p className="hint">One job per index, named NAME-INDEX. Give a count or a range.</p>
                <TextField path="array.count" label="Count" type="int" placeholder="indexes 0..count-1" />
                <TextField path="array.range" label="Range" placeholder="0-99:2,200" />
                <TextField path="array.maxRunning" label="Max running" type="int" placeholder="no limit" />
              </Section>
              <p className="hint">Select a task on the canvas to edit it. Delete a task or an edge with the Delete key.</p>
            </div>
          )}
        </aside>
      </div>

      {showImport && <ImportDialog onClose={() => setShowImport(false)} onImport={(s) => (setShowImport(false), importSpec(s))} />}
      {showExport && <ExportDialog yaml={exportYaml(model.spec)} name={model.spec.name} onClose={() => setShowExport(false)} />}
      {confirmClear && (
        <Confirm
          title="Start a new job?"
          body="The tasks on the canvas are removed. Export the YAML first to keep them."
          okLabel="Clear"
          danger
          onOk={() => {
            setConfirmClear(false);
            setModel(emptyModel());
            setNodes([]);
            setSelected(null);
            setValidation({ errors: [], spec: null });
            setTouched(false);
            localStorage.removeItem(DRAFT_KEY);
          }}
          onCancel={() => setConfirmClear(false)}
        />
      )}
    </FormContext.Provider>
  );
}

function ImportDialog({ onClose, onImport }: { onClose: () => void; onImport: (spec: unknown) => void }) {
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const apply = (src: string) => {
    const r = importYaml(src);
    if (r.error) setError(r.error);
    else onImport(r.spec);
  };
  return (
    <Modal title="Import YAML" onClose={onClose} testid="import-dialog">
      <p className="hint">A job spec as yardctl job submit takes it (docs/spec.md). Anchors, aliases and merge keys are expanded.</p>
      <input
        type="file"
        accept=".yaml,.yml,.json,text/yaml,application/json"
        data-testid="import-file"
        onChange={async (e) => {
          const f = e.target.files?.[0];
          if (f) {
            const t = await f.text();
            setText(t);
            apply(t);
          }
        }}
      />
      <textarea data-testid="import-text" rows={16} value={text} onChange={(e) => setText(e.target.value)} placeholder="name: my-job&#10;tasks:&#10;  - name: train&#10;    kind: pytorch&#10;    ..." />
      {error && (
        <div className="error-text" data-testid="import-error">
          {error}
        </div>
      )}
      <div className="modal-actions">
        <button onClick={onClose}>Close</button>
        <button className="primary" data-testid="import-apply" onClick={() => apply(text)}>
          Import
        </button>
      </div>
    </Modal>
  );
}

function ExportDialog({ yaml, name, onClose }: { yaml: string; name?: string; onClose: () => void }) {
  const [copied, setCopied] = useState('');
  const download = () => {
    const url = URL.createObjectURL(new Blob([yaml], { type: 'application/yaml' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `${name || 'job'}.yaml`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(yaml);
      setCopied('Copied.');
    } catch {
      setCopied('The browser refused the clipboard: select the text and copy it.');
    }
  };
  return (
    <Modal title="Export YAML" onClose={onClose} testid="export-dialog">
      <textarea data-testid="export-text" rows={22} readOnly value={yaml} />
      <div className="modal-actions">
        {copied && <span className="muted">{copied}</span>}
        <button data-testid="export-copy" onClick={() => void copy()}>
          Copy
        </button>
        <button className="primary" data-testid="export-download" onClick={download}>
          Download
        </button>
      </div>
    </Modal>
  );
}

export default function CreatePage() {
  return (
    <ReactFlowProvider>
      <Editor />
    </ReactFlowProvider>
  );
}
