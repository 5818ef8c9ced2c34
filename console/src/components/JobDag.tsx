// The Job page's DAG. The graph's shape is fixed for a job, so nodes are built and laid out
// (in the layout worker) once; live states come from a TaskStore that each node subscribes
// to by name, so a state change re-renders that node alone. Only the nodes in view are
// rendered (onlyRenderVisibleElements), which keeps a 1,000-task job usable.

import {
  Background,
  Controls,
  Handle,
  MarkerType,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useEdgesState,
  useNodesState,
  useReactFlow,
  useStore,
  useStoreApi,
  type Edge,
  type Node,
  type NodeProps,
  type ReactFlowInstance,
  type Viewport,
} from '@xyflow/react';
import { createContext, memo, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import type { TaskDetail } from '../api/types';
import { kindLabel } from '../lib/kinds';
import { layoutInWorker } from '../lib/layoutClient';
import { stateLook } from '../lib/states';
import type { TaskStore } from '../lib/taskStore';
import { KindsContext, useKindsContext, useKindsData } from './KindsContext';
import { StateIcon } from './StateIcon';

// A box holds its name, state and kind, progress, and a failed task's exit and reason (two
// lines at most); every box is this size, so the layout never has to change with a state.
export const NODE_W = 220;
export const NODE_H = 100;

// Each dependency edge ends in an arrowhead at the task that runs after. (The marker's size is
// in stroke widths, and its arrow a quarter of it: 24 x 1.5 draws a 9-pixel arrow.)
const EDGE_COLOR = '#7d8791';
const EDGE_STYLE = { stroke: EDGE_COLOR, strokeWidth: 1.5 };
const ARROW = { type: MarkerType.ArrowClosed, width: 24, height: 24, color: EDGE_COLOR } as const;

type LiveData = { name: string; kind: string; mode: string };
type LiveNode = Node<LiveData, 'live'>;

const StoreContext = createContext<TaskStore | null>(null);

const LiveTaskNode = memo(function LiveTaskNode({ data, selected }: NodeProps<LiveNode>) {
  const store = useContext(StoreContext)!;
  const kinds = useKindsContext();
  const live = useSyncExternalStore(
    (cb) => store.subscribe(data.name, cb),
    () => store.get(data.name),
  );
  const state = live?.state ?? 'Waiting';
  const look = stateLook(state);
  const failed = live?.state === 'Failed' ? live : null;
  return (
    <div
      className={`task-node live${selected ? ' selected' : ''}`}
      data-testid={`task-node-${data.name}`}
      data-state={state}
      style={{ borderColor: look.color, borderStyle: look.border, background: look.background }}
      title={live?.reason || state}
    >
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <div className="task-node-head">
        <StateIcon state={state} />
        <span className="task-node-name">{data.name}</span>
      </div>
      <div className="task-node-sub">
        <span className="task-state" data-testid={`task-state-${data.name}`} style={{ color: look.color }}>
          {state}
        </span>
        {live && live.attempt > 0 && <span className="muted"> · attempt {live.attempt}</span>}
        <span className="muted"> · {kindLabel(kinds, data.kind)}</span>
      </div>
      {live?.progress && (
        <div className="task-node-progress" data-testid={`task-progress-${data.name}`}>
          {live.progress}
        </div>
      )}
      {failed && (failed.exit || failed.reason) && (
        <div className="task-node-failure" data-testid={`task-failure-${data.name}`}>
          {failed.exit && <b data-testid={`task-exit-${data.name}`}>{failed.exit}</b>}
          {failed.exit && failed.reason && ' · '}
          {failed.reason && <span data-testid={`task-reason-${data.name}`}>{failed.reason}</span>}
        </div>
      )}
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  );
});

const nodeTypes = { live: LiveTaskNode };

// The first view of a graph: all of it when it fits at a readable zoom; otherwise (a sweep
// of hundreds of tasks side by side) its top, around the first task, at a readable zoom,
// rather than a line of dots. The controls' "fit view" still shows the whole.
const READABLE_ZOOM = 0.3;
function showStart(
  flow: Pick<ReactFlowInstance, 'fitView' | 'setViewport'>,
  positions: Record<string, { x: number; y: number }>,
  first: string | undefined,
  width: number,
  height: number,
): Promise<unknown> {
  const ps = Object.values(positions);
  if (!ps.length) return Promise.resolve();
  const minX = Math.min(...ps.map((p) => p.x));
  const minY = Math.min(...ps.map((p) => p.y));
  const w = Math.max(...ps.map((p) => p.x)) + NODE_W - minX;
  const h = Math.max(...ps.map((p) => p.y)) + NODE_H - minY;
  if (Math.min(width / w, height / h) >= READABLE_ZOOM) return flow.fitView({ padding: 0.1, maxZoom: 1.2 });
  const zoom = 0.75;
  const at = (first && positions[first]) || { x: minX, y: minY };
  return flow.setViewport({ x: width / 2 - (at.x + NODE_W / 2) * zoom, y: 20 - minY * zoom, zoom });
}

function structureKey(tasks: readonly TaskDetail[]): string {
  return tasks.map((t) => `${t.name}:${t.dependsOn.join(',')}`).join(';');
}

// A viewport the user moved away from the one the page last set (a pan or zoom of a few pixels
// while clicking is not a move).
function movedFrom(a: Viewport, b: Viewport): boolean {
  return Math.abs(a.x - b.x) > 4 || Math.abs(a.y - b.y) > 4 || Math.abs(a.zoom / b.zoom - 1) > 0.01;
}

function DagInner({ tasks, onSelect }: { tasks: readonly TaskDetail[]; onSelect: (name: string | null) => void }) {
  const [nodes, setNodes, onNodesChange] = useNodesState<LiveNode>([]);
  const [edges, setEdges, onEdgesChange] = useEdgesState<Edge>([]);
  const [laying, setLaying] = useState(false);
  const flow = useReactFlow();
  const storeApi = useStoreApi();
  const key = useMemo(() => structureKey(tasks), [tasks]);
  // The graph area's size: it shrinks when the task panel opens beside it (and grows back when
  // it closes, or with the window), and the graph is fitted to it again, so every task stays in
  // view, unless the user has panned or zoomed since the page last fitted it.
  const width = useStore((s) => s.width);
  const height = useStore((s) => s.height);
  const laidOut = useRef<{ positions: Record<string, { x: number; y: number }>; first: string | undefined } | null>(null);
  const placed = useRef<Viewport | null>(null); // the viewport the page (or the controls) last set
  const userMoved = useRef(false);

  useEffect(() => {
    let current = true;
    const names = new Set(tasks.map((t) => t.name));
    const edgeList = tasks.flatMap((t) =>
      t.dependsOn.filter((d) => names.has(d)).map((d) => ({ id: `${d}->${t.name}`, source: d, target: t.name })),
    );
    setLaying(true);
    layoutInWorker(
      tasks.map((t) => ({ id: t.name, width: NODE_W, height: NODE_H })),
      edgeList,
    ).then((r) => {
      if (!current) return;
      setNodes(
        tasks.map((t) => ({
          id: t.name,
          type: 'live' as const,
          position: r.positions[t.name] ?? { x: 0, y: 0 },
          width: NODE_W,
          height: NODE_H,
          data: { name: t.name, kind: t.kind, mode: t.mode },
          draggable: true,
          connectable: false,
        })),
      );
      setEdges(edgeList.map((e) => ({ ...e, focusable: false, selectable: false, markerEnd: ARROW, style: EDGE_STYLE })));
      setLaying(false);
      laidOut.current = { positions: r.positions, first: tasks[0]?.name };
      userMoved.current = false;
      requestAnimationFrame(() => fit());
    });
    return () => {
      current = false;
    };
    // `tasks` changes on every re-fetch; the layout only when the shape does
  }, [key]);

  // (the store's size now, not this render's: the layout's callback runs later)
  function fit() {
    const l = laidOut.current;
    const { width: w, height: h } = storeApi.getState();
    if (l && w && h) void showStart(flow, l.positions, l.first, w, h).then(() => (placed.current = flow.getViewport()));
  }

  useEffect(() => {
    if (!userMoved.current) fit();
  }, [width, height]);

  return (
    <div className="dag" data-testid="job-dag">
      {laying && <div className="dag-overlay">Laying out {tasks.length} tasks…</div>}
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onNodeClick={(_, n) => onSelect(n.id)}
        onPaneClick={() => onSelect(null)}
        onMoveEnd={(event, viewport) => {
          // no event: the page or the controls moved it; else the user's pan or zoom
          if (!event) placed.current = viewport;
          else if (!placed.current || movedFrom(viewport, placed.current)) userMoved.current = true;
        }}
        nodesConnectable={false}
        onlyRenderVisibleElements
        minZoom={0.02}
        maxZoom={2}
        proOptions={{ hideAttribution: true }}
      >
        <Background gap={24} size={1} />
        <Controls
          showInteractive={false}
          onZoomIn={() => (userMoved.current = true)}
          onZoomOut={() => (userMoved.current = true)}
          onFitView={() => (userMoved.current = false)}
        />
      </ReactFlow>
    </div>
  );
}

export function JobDag({ tasks, store, onSelect }: { tasks: readonly TaskDetail[]; store: TaskStore; onSelect: (name: string | null) => void }) {
  const kinds = useKindsData(); // the kinds' labels
  return (
    <StoreContext.Provider value={store}>
      <KindsContext.Provider value={kinds}>
        <ReactFlowProvider>
          <DagInner tasks={tasks} onSelect={onSelect} />
        </ReactFlowProvider>
      </KindsContext.Provider>
    </StoreContext.Provider>
  );
}
