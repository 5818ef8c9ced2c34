// The canvas's nodes and edges follow the editor model: an unchanged task keeps its node
// object (no re-render); the automatic layout runs in a worker.

import { MarkerType, useEdgesState, useNodesState, useReactFlow, type Edge } from '@xyflow/react';
import { useCallback, useEffect, type Dispatch, type SetStateAction } from 'react';
import { EDIT_H, EDIT_W, type EditNode } from '../../components/EditTaskNode';
import { edgesOf, type EditorModel } from '../../lib/editor';
import { layoutInWorker } from '../../lib/layoutClient';

export function useCanvas(model: EditorModel, errorCounts: Map<number, number>, setModel: Dispatch<SetStateAction<EditorModel>>) {
  const [nodes, setNodes, onNodesChange] = useNodesState<EditNode>([]);
  const [edges, setEdges, onEdgesChange] = useEdgesState<Edge>([]);
  const flow = useReactFlow();

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

  const fit = useCallback(() => setTimeout(() => flow.fitView({ padding: 0.2, maxZoom: 1 }), 50), [flow]);

  const autoLayout = useCallback(
    async (m: EditorModel) => {
      const r = await layoutInWorker(
        m.ids.map((id) => ({ id, width: EDIT_W, height: EDIT_H })),
        edgesOf(m).map((e) => ({ source: e.source, target: e.target })),
      );
      setNodes((prev) => prev.map((n) => (r.positions[n.id] ? { ...n, position: r.positions[n.id] } : n)));
      setModel((cur) => ({ ...cur, positions: { ...cur.positions, ...r.positions } }));
      fit();
    },
    [fit, setNodes, setModel],
  );

  return { nodes, setNodes, onNodesChange, edges, onEdgesChange, autoLayout, fit, flow };
}
