// Create job: drag kinds from the palette onto the canvas, connect tasks into a DAG, fill
// each task's form; the spec is validated by the master as the user types (debounced) and
// every error is shown at its field and counted on its task's node. YAML import/export;
// Submit sends the same spec object. The draft survives a reload (localStorage). The parts
// are in pages/create/; the kinds, queues and datasets come from the query cache.

import { Background, Controls, ReactFlow, ReactFlowProvider, type Connection } from '@xyflow/react';
import { useCallback, useEffect, useMemo, useRef, useState, type DragEvent } from 'react';
import { useDatasets } from '../api/queries';
import { Confirm } from '../components/Confirm';
import { EDIT_W, EDIT_H, EditTaskNode } from '../components/EditTaskNode';
import { FormContext } from '../components/form';
import { KindsContext, useKindsData } from '../components/KindsContext';
import { addTask, connect, disconnect, emptyModel, modelFromSpec, removeTasks, type EditorModel, type XY } from '../lib/editor';
import { errorCountByTask, errorsByField, specFieldPaths, type SpecError } from '../lib/fields';
import { kindOf } from '../lib/kinds';
import { taskIndexOf } from '../lib/path';
import { exportYaml } from '../lib/yamlio';
import { clearDraft, loadDraft, saveDraft } from './create/draft';
import { KIND_MIME, Palette } from './create/Palette';
import { SidePanel, type EdgeSel } from './create/SidePanel';
import { StatusBar } from './create/StatusBar';
import { useCanvas } from './create/useCanvas';
import { useFormApi } from './create/useFormApi';
import { useSubmit } from './create/useSubmit';
import { NO_VALIDATION, useValidation } from './create/useValidation';
import { ExportDialog, ImportDialog } from './create/YamlDialogs';

const nodeTypes = { edit: EditTaskNode };

function Editor() {
  const kinds = useKindsData();
  const datasets = useDatasets().data;
  const [model, setModel] = useState<EditorModel>(loadDraft);
  const modelRef = useRef(model);
  modelRef.current = model;
  const [selected, setSelected] = useState<string | null>(null);
  const [selectedEdge, setSelectedEdge] = useState<string | null>(null);
  const [message, setMessage] = useState('');
  const [touched, setTouched] = useState(model.spec.tasks.length > 0);
  const [dialog, setDialog] = useState<'import' | 'export' | 'clear' | null>(null);
  const { validation, setValidation, checking, stale } = useValidation(model.spec, touched);

  const update = useCallback((f: (m: EditorModel) => EditorModel) => {
    setTouched(true);
    setModel(f);
  }, []);

  // errors by field: the fields depend on the kinds' descriptors (lib/fields.ts)
  const errorsMap = useMemo(
    () => (validation.errors.length ? errorsByField(validation.errors, specFieldPaths(kinds, validation.spec as EditorModel['spec'])) : new Map<string, SpecError[]>()),
    [validation, kinds],
  );
  const errorCounts = useMemo(() => errorCountByTask(validation.errors), [validation]);
  const { nodes, setNodes, onNodesChange, edges, onEdgesChange, autoLayout, fit, flow } = useCanvas(model, errorCounts, setModel);

  // a message (a refused edge) goes away by itself
  useEffect(() => {
    if (!message) return undefined;
    const t = setTimeout(() => setMessage(''), 6000);
    return () => clearTimeout(t);
  }, [message]);

  // the draft survives reloads and navigation
  useEffect(() => {
    const t = setTimeout(() => saveDraft(model, new Map(nodes.map((n) => [n.id, n.position]))), 500);
    return () => clearTimeout(t);
  }, [model, nodes]);

  // a restored draft is shown whole (laid out first if it has no positions); once, at mount
  useEffect(() => {
    if (!model.ids.length) return;
    if (model.ids.some((id) => !model.positions[id])) void autoLayout(model);
    else fit();
  }, []);

  const addAt = useCallback(
    (kind: string, at: XY) => {
      const r = addTask(kinds, modelRef.current, kind, at);
      update(() => r.model);
      setSelected(r.id);
      setSelectedEdge(null);
    },
    [kinds, update],
  );

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    const kind = e.dataTransfer.getData(KIND_MIME);
    if (!kindOf(kinds, kind)) return;
    const p = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
    addAt(kind, { x: p.x - EDIT_W / 2, y: p.y - EDIT_H / 2 });
  };

  // the palette's click (or Enter): place the task below the lowest one
  const addByClick = (kind: string) => {
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
    (list: EdgeSel[]) => {
      update((m) => list.reduce((acc, e) => disconnect(acc, e.source, e.target), m));
      setSelectedEdge(null);
    },
    [update],
  );

  const datasetNames = useMemo(() => datasets?.map((d) => d.name) ?? [], [datasets]);
  const form = useFormApi(model.spec, update, errorsMap, datasetNames);

  const reset = (m: EditorModel, isTouched: boolean) => {
    setMessage('');
    setModel(m);
    setTouched(isTouched);
    setSelected(null);
    setNodes([]);
  };

  const { submit, error: submitError } = useSubmit(setValidation);

  const selTask = selected ? model.spec.tasks[model.ids.indexOf(selected)] : undefined;
  const edge = selectedEdge ? edges.find((e) => e.id === selectedEdge) : undefined;
  // errors no field shows: those without one, and the job's while a task's form is open
  const generalErrors = [
    ...(errorsMap.get('') ?? []),
    ...(selTask || edge ? [...errorsMap.entries()].filter(([f]) => f !== '' && taskIndexOf(f) < 0).flatMap(([, list]) => list) : []),
  ];

  return (
    <KindsContext.Provider value={kinds}>
      <FormContext.Provider value={form}>
        <div className="create">
          <Palette
            onAdd={addByClick}
            hasTasks={model.ids.length > 0}
            onImport={() => setDialog('import')}
            onExport={() => setDialog('export')}
            onLayout={() => void autoLayout(model)}
            onClear={() => model.spec.tasks.length > 0 && setDialog('clear')}
          />
          <div className="create-center">
            <StatusBar
              touched={touched}
              checking={checking || stale}
              validation={validation}
              generalErrors={generalErrors}
              submitting={submit.isPending}
              canSubmit={model.spec.tasks.length > 0}
              onSubmit={() => submit.mutate(model.spec)}
              submitError={submitError}
              onPickTask={(i) => setSelected(i === null ? null : (model.ids[i] ?? null))}
              message={message}
            />
            <div
              className="canvas"
              data-testid="canvas"
              onDragOver={(e) => {
                e.preventDefault();
                e.dataTransfer.dropEffect = 'copy';
              }}
              onDrop={onDrop}
            >
              <ReactFlow
                nodes={nodes}
                edges={edges}
                nodeTypes={nodeTypes}
                onNodesChange={onNodesChange}
                onEdgesChange={onEdgesChange}
                onConnect={onConnect}
                onNodesDelete={(ns) => deleteTasks(ns.map((n) => n.id))}
                onEdgesDelete={(es) => deleteEdges(es)}
                onNodeClick={(_, n) => (setSelected(n.id), setSelectedEdge(null))}
                onEdgeClick={(_, e) => (setSelectedEdge(e.id), setSelected(null))}
                onPaneClick={() => (setSelected(null), setSelectedEdge(null))}
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
          <SidePanel
            spec={model.spec}
            ids={model.ids}
            selected={selected}
            edge={edge}
            onJob={() => setSelected(null)}
            onDeleteTask={(id) => deleteTasks([id])}
            onRemoveEdge={(e) => deleteEdges([e])}
          />
        </div>

        {dialog === 'import' && (
          <ImportDialog
            onClose={() => setDialog(null)}
            onImport={(spec) => {
              setDialog(null);
              const m = modelFromSpec(spec);
              reset(m, true);
              void autoLayout(m);
            }}
          />
        )}
        {dialog === 'export' && <ExportDialog yaml={exportYaml(model.spec)} name={model.spec.name} onClose={() => setDialog(null)} />}
        {dialog === 'clear' && (
          <Confirm
            title="Start a new job?"
            body="The tasks on the canvas are removed. Export the YAML first to keep them."
            okLabel="Clear"
            danger
            onOk={() => {
              setDialog(null);
              reset(emptyModel(), false);
              setValidation(NO_VALIDATION);
              submit.reset();
              clearDraft();
            }}
            onCancel={() => setDialog(null)}
          />
        )}
      </FormContext.Provider>
    </KindsContext.Provider>
  );
}

export default function CreatePage() {
  return (
    <ReactFlowProvider>
      <Editor />
    </ReactFlowProvider>
  );
}
