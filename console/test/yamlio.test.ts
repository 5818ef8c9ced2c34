import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { modelFromSpec, setField } from '../src/lib/editor';
import { modeNames } from '../src/lib/kinds';
import { newTask, withKind, withMode, type JobSpec, type TaskSpec } from '../src/lib/spec';
import { exportYaml, importYaml } from '../src/lib/yamlio';
import { examples } from './examples';
import { KINDS } from './kinds';

describe('YAML import and export', () => {
  it.each(examples().map((e) => [e.file, e.text]))('round-trips %s', (_file, text) => {
    const first = importYaml(text);
    expect(first.error).toBeUndefined();
    const model = modelFromSpec(first.spec);
    const yaml = exportYaml(model.spec);
    const again = importYaml(yaml);
    expect(again.error).toBeUndefined();
    expect(again.spec).toEqual(model.spec);
    // and once more: export is stable
    expect(exportYaml(modelFromSpec(again.spec).spec)).toBe(yaml);
  });

  it('expands merge keys and copies aliased containers', () => {
    const dag = examples().find((e) => e.file === 'dag.yaml')!;
    const m = modelFromSpec(importYaml(dag.text).spec);
    const evaluate = m.spec.tasks[2];
    expect(evaluate.roles!.worker.container!.image).toBe('host');
    expect(evaluate.roles!.worker.container!.resources).toEqual({ cpu: '500m', memory: '256Mi' });
    expect(evaluate.roles!.worker.container!.args).toBe("'echo TF_CONFIG=$TF_CONFIG'");
    // master and worker shared one anchor; editing one leaves the other alone
    const x = setField(m, 'tasks[1].roles.worker.container.image', 'busybox');
    expect(x.spec.tasks[1].roles!.master.container!.image).toBe('host');
    expect(exportYaml(x.spec)).not.toMatch(/[&*]\w+/);
  });

  it('keeps multi-line scripts as block literals', () => {
    const mpi = examples().find((e) => e.file === 'openmpi.yaml')!;
    const yaml = exportYaml(modelFromSpec(importYaml(mpi.text).spec).spec);
    expect(yaml).toContain('- |\n');
    expect(yaml).toContain('from mpi4py import MPI');
  });

  it('reports bad YAML and non-specs', () => {
    expect(importYaml('name: [unclosed').error).toMatch(/^YAML: /);
    expect(importYaml('name: a\nname: b\n').error).toMatch(/^YAML: .*[Mm]ap keys must be unique/);
    expect(importYaml('- a\n- b\n').error).toMatch(/a spec is a mapping/);
    expect(importYaml('').error).toBe('the YAML holds no spec');
    const two = importYaml('name: one-job\ntasks: []\n---\nname: two-job\ntasks: []\n');
    expect(two.spec!.name).toBe('one-job');
    expect(two.warning).toMatch(/holds 2 specs/);
  });
});

// With yardctl built (YARDCTL, or build/bin/yardctl of this repo), the real loader and
// validator check what the console produces: an exported example normalises exactly as the
// original file does, and every task the palette makes is valid as dropped.
const yardctl = process.env.YARDCTL ?? path.resolve(__dirname, '../../build/bin/yardctl');
const haveYardctl = existsSync(yardctl);
const dir = mkdtempSync(path.join(tmpdir(), 'yard-console-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function normalised(text: string, name: string): unknown {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return JSON.parse(execFileSync(yardctl, ['validate', '-o', 'json', file], { encoding: 'utf8' }));
}

function validate(spec: JobSpec, name: string): { ok: boolean; out: string } {
  const file = path.join(dir, name);
  writeFileSync(file, exportYaml(spec));
  try {
    return { ok: true, out: execFileSync(yardctl, ['validate', file], { encoding: 'utf8', stdio: 'pipe' }) };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string };
    return { ok: false, out: `${err.stdout ?? ''}${err.stderr ?? ''}` };
  }
}

describe.skipIf(!haveYardctl)(`against yardctl validate (${yardctl})`, () => {
  it.each(examples().map((e) => [e.file, e.text]))('exported %s normalises as the original', (file, text) => {
    const exported = exportYaml(modelFromSpec(importYaml(text).spec).spec);
    expect(normalised(exported, `out-${file}`)).toEqual(normalised(text, `in-${file}`));
  });

  it('accepts every task the palette makes, in every mode', () => {
    for (const k of KINDS) {
      const variants = [newTask(KINDS, k.kind, 'task-one'), ...modeNames(k).map((mode) => withMode(KINDS, newTask(KINDS, k.kind, 'task-one'), mode))];
      for (const t of variants) {
        const r = validate({ name: 'palette-job', type: 'training', queue: 'default', tasks: [t] }, `p-${k.kind}-${t.mode ?? ''}.yaml`);
        expect(r.out, `${k.kind} ${t.mode ?? ''}`).toMatch(/^OK /);
      }
      for (const other of KINDS) {
        const t = withKind(KINDS, newTask(KINDS, k.kind, 'task-one'), other.kind);
        const r = validate({ name: 'palette-job', tasks: [t] }, `k-${k.kind}-${other.kind}.yaml`);
        expect(r.out, `${k.kind} -> ${other.kind}`).toMatch(/^OK /);
      }
    }
  });

  it('agrees with the fixture of the kinds descriptors on the roles', () => {
    // each mode's required roles are required, its optional ones allowed (TensorFlow's chief
    // needs a ps as well: its rule), and a role it does not list is refused
    for (const k of KINDS.filter((x) => x.framework))
      for (const m of k.modes) {
        const base = m.mode ? withMode(KINDS, newTask(KINDS, k.kind, 'task-one'), m.mode) : newTask(KINDS, k.kind, 'task-one');
        const check = (roles: Record<string, unknown>, ok: boolean, what: string) => {
          const r = validate({ name: 'roles-job', tasks: [{ ...base, roles: roles as TaskSpec['roles'] }] }, `r-${k.kind}-${m.mode}-${what}.yaml`);
          expect(r.ok, `${k.kind} ${m.mode}: ${what}: ${r.out}`).toBe(ok);
          if (!ok) expect(r.out).toMatch(/tasks\[0\]\.roles/);
        };
        const seed = Object.values(base.roles!)[0];
        for (const rule of m.roles) {
          const roles = { ...base.roles } as Record<string, unknown>;
          if (rule.required) {
            delete roles[rule.role];
            check(roles, false, `without ${rule.role}`);
          } else {
            roles[rule.role] = { ...seed, ...(m.elastic ? {} : { replicas: Math.max(rule.min, 1) }) };
            if (rule.role === 'chief') roles.ps = roles.ps ?? { ...seed };
            check(roles, true, `with ${rule.role}`);
          }
        }
        check({ ...base.roles, bogus: seed }, false, 'with an unknown role');
        // and the replicas bounds (min, max; null is unbounded)
        if (!m.elastic)
          for (const rule of m.roles) {
            const at = (n: number) => ({ ...base.roles, [rule.role]: { ...seed, replicas: n }, ...(rule.role === 'chief' ? { ps: seed } : {}) });
            check(at(rule.min), true, `${rule.role} x${rule.min}`);
            if (rule.min > 0) check(at(rule.min - 1), false, `${rule.role} x${rule.min - 1}`);
            if (rule.max !== null) check(at(rule.max + 1), false, `${rule.role} x${rule.max + 1}`);
          }
      }
  });

  it('reports the error paths the console maps to fields', () => {
    const t = newTask(KINDS, 'pytorch', 'train');
    const spec = setField(modelFromSpec({ name: 'bad-job', tasks: [t] }), 'tasks[0].roles.worker.container.ports', [{ name: 'ab', port: 80 }]).spec;
    const r = validate(spec, 'bad.yaml');
    expect(r.ok).toBe(false);
    expect(r.out).toContain('tasks[0].roles.worker.container.ports[0].name: "ab" must be 4-32 characters');
  });
});

describe('export key order', () => {
  it('writes job and task keys in the order a person does', () => {
    const spec = { tasks: [{ kind: 'container-job', container: { image: 'host' }, dependsOn: ['a'], name: 'later' }], queue: 'q', name: 'named-last' } as unknown as JobSpec;
    expect(exportYaml(spec)).toBe('name: named-last\nqueue: q\ntasks:\n  - name: later\n    kind: container-job\n    dependsOn: [ a ]\n    container: { image: host }\n');
  });
});
