// YAML import and export of a spec. Import resolves anchors, aliases and merge keys
// (`<<: *base`) as the loader does (docs/spec.md), and copies the result so that two roles
// that shared one anchor become two independent containers in the form. Export writes the
// spec object as it is, keys in the spec's order, strings quoted only where YAML needs it;
// small mappings and lists of plain values on one line, multi-line scripts as `|` blocks.

import { Document, isScalar, parseAllDocuments, visit } from 'yaml';
import { orderedSpec, type JobSpec } from './spec';

export interface ImportResult {
  spec?: JobSpec;
  error?: string;
  warning?: string;
}

export function importYaml(text: string): ImportResult {
  let docs;
  try {
    docs = parseAllDocuments(text, { merge: true, uniqueKeys: true, prettyErrors: true });
  } catch (e) {
    return { error: `YAML: ${(e as Error).message}` };
  }
  const list = Array.isArray(docs) ? docs : [docs];
  const real = list.filter((d) => d.contents !== null || d.errors.length > 0);
  if (real.length === 0) return { error: 'the YAML holds no spec' };
  const doc = real[0];
  if (doc.errors.length > 0) return { error: `YAML: ${doc.errors[0].message}` };
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 10000 });
  } catch (e) {
    return { error: `YAML: ${(e as Error).message}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { error: 'a spec is a mapping with name and tasks (like name: my-job, tasks: [...])' };
  const spec = JSON.parse(JSON.stringify(value)) as JobSpec;
  const warning = real.length > 1 ? `the file holds ${real.length} specs; the first (${spec.name ?? 'unnamed'}) was imported` : undefined;
  return { spec, warning };
}

const FLOW_MAX = 72; // a small mapping or list of plain values is written on one line

export function exportYaml(spec: JobSpec): string {
  const doc = new Document(orderedSpec(spec), { aliasDuplicateObjects: false });
  // `resources: { cpu: 500m, memory: 256Mi }`, `command: [python3, -c]`, as in the examples
  visit(doc, {
    Map(_, node) {
      if (node !== doc.contents && isSmall(node.items.flatMap((p) => [p.key, p.value]))) node.flow = true;
    },
    Seq(_, node) {
      if (isSmall(node.items)) node.flow = true;
    },
  });
  return doc.toString({ lineWidth: 0, blockQuote: 'literal', flowCollectionPadding: true });
}

function isSmall(items: unknown[]): boolean {
  let length = 0;
  for (const n of items) {
    if (!isScalar(n)) return false;
    const v = n.value;
    if (typeof v === 'string' && (v.includes('\n') || v.length > 40)) return false;
    length += String(v).length + 4;
  }
  return items.length > 0 && length <= FLOW_MAX;
}

