// The Create page's draft (spec and node positions) in the browser's localStorage, so a
// reload or a visit to another page loses nothing.

import { emptyModel, modelFromSpec, type EditorModel, type XY } from '../../lib/editor';

const DRAFT_KEY = 'yard.console.draft';

interface Draft {
  spec: unknown;
  positions: (XY | null)[];
}

export function loadDraft(): EditorModel {
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

// `pos`: where each node is on the canvas now (the model's own positions are where tasks
// were placed or laid out).
export function saveDraft(model: EditorModel, pos: Map<string, XY>): void {
  const draft: Draft = { spec: model.spec, positions: model.ids.map((id) => pos.get(id) ?? model.positions[id] ?? null) };
  try {
    localStorage.setItem(DRAFT_KEY, JSON.stringify(draft));
  } catch {
    /* storage full or disabled: the draft is just not kept */
  }
}

export function clearDraft(): void {
  localStorage.removeItem(DRAFT_KEY);
}
