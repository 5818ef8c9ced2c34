// The Job page's DAG. The graph's shape is fixed for a job, so nodes are built and laid out
// (in the layout worker) once; live states come from a TaskStore that each node subscribes
// to by name, so a state change re-renders that node alone. Only the nodes in view are
// rendered (onlyRenderVisibleElements), which keeps a 1,000-task job usable.

import {
  Background,
  Controls,
  Handle,
  Position,
  ReactFlow,
  ReactFlowProvider,
  useEdgesState,
  useNodesState,
  useReactFlow,
  type Edge,
  type Node,
  type NodeProps,
  type ReactFlowInstance,
} from '@xyflow/react';
import { createContext, memo, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import type { TaskDetail } from '../api/types';
import { kindLabel } from '../lib/kinds';
import { layoutInWorker } from '../lib/layoutClient';
import { stateLook } from '../lib/states';
import type { TaskStore } from '../lib/taskStore';
import { KindsContext, useKindsContext, useKindsData } from './KindsContext';
import { StateIcon } from './StateIcon';

export const NODE_W = 210;
export const NODE_H = 62;

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
) {
  const ps = Object.values(positions);
  if (!ps.length) return;
  const minX = Math.min(...ps.map((p) => p.x));
  const minY = Math.min(...ps.map((p) => p.y));
  const w = Math.max(...ps.map((p) => p.x)) + NODE_W - minX;
  const h = Math.max(...ps.map((p) => p.y)) + NODE_H - minY;
  if (Math.min(width / w, height / h) >= READABLE_ZOOM) {
    void flow.fitView({ padding: 0.1, maxZoom: 1.2 });
    return;
  }
  const zoom = 0.75;
  const at = (first && positions[first]) || { x: minX, y: minY };
  void flow.setViewport({ x: width / 2 - (at.x + NODE_W / 2) * zoom, y: 20 - minY * zoom, zoom });
}

function structureKey(tasks: readonly TaskDetail[]): string {
  return tasks.map((t) => `${t.name}:${t.dependsOn.join(',')}`).join(';');
}

function DagInner({ tasks, onSelect }: { tasks: readonly TaskDetail[]; onSelect: (name: string | null) => void }) {
  const [nodes, setNodes, onNodesChange] = useNodesState<LiveNode>([]);
  const [edges, setEdges, onEdgesChange] = useEdgesState<Edge>([]);
  const [laying, setLaying] = useState(false);
  const flow = useReactFlow();
  const wrapper = useRef<HTMLDivElement>(null);
  const key = useMemo(() => structureKey(tasks), [tasks]);

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
      setEdges(edgeList.map((e) => ({ ...e, focusable: false, selectable: false })));
      setLaying(false);
      const box = wrapper.current;
      requestAnimationFrame(() => showStart(flow, r.positions, tasks[0]?.name, box?.clientWidth ?? 800, box?.clientHeight ?? 600));
    });
    return () => {
      current = false;
    };
    // `tasks` changes on every re-fetch; the layout only when the shape does
  }, [key]);

  return (
    <div className="dag" data-testid="job-dag" ref={wrapper}>
      {laying && <div className="dag-overlay">Laying out {tasks.length} tasks…</div>}
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onNodeClick={(_, n) => onSelect(n.id)}
        onPaneClick={() => onSelect(null)}
        nodesConnectable={false}
        onlyRenderVisibleElements
        minZoom={0.02}
        maxZoom={2}
        proOptions={{ hideAttribution: true }}
      >
        <Background gap={24} size={1} />
        <Controls showInteractive={false} />
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
