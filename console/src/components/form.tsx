// Form primitives keyed by spec path. Every input's test id is `field-<path>` and every
// error shown at it is `error-<error path>`; values are written back into the spec object
// in the type the YAML would have (numbers as numbers, so the exported YAML reads as a
// person would write it; text that is not a number stays text and the validator names it).

import { createContext, useContext, useEffect, useId, useState, type ReactNode } from 'react';
import type { SpecError } from '../lib/fields';
import { join } from '../lib/path';
import type { Words } from '../lib/spec';
import { joinWords, splitWords } from '../lib/words';

export interface FormApi {
  get(path: string): unknown;
  set(path: string, value: unknown): void;
  errorsAt(path: string): SpecError[] | undefined;
  datasets: string[];
}

export const FormContext = createContext<FormApi | null>(null);

export function useForm(): FormApi {
  return useContext(FormContext)!;
}

export type ValueType = 'string' | 'int' | 'quantity';

export function parseInput(text: string, type: ValueType, keepEmpty = false): unknown {
  if (text === '') return keepEmpty ? '' : undefined;
  if (type === 'int' && /^-?\d+$/.test(text.trim())) {
    const n = Number(text.trim());
    if (Number.isSafeInteger(n)) return n;
  }
  if (type === 'quantity' && /^\d+(\.\d+)?$/.test(text.trim())) return Number(text.trim());
  return text;
}

function shown(v: unknown): string {
  return v === undefined || v === null ? '' : String(v);
}

export function FieldErrors({ path }: { path: string }) {
  const errs = useForm().errorsAt(path);
  if (!errs?.length) return null;
  return (
    <>
      {errs.map((e, i) => (
        <div key={i} className="field-error" role="alert" data-testid={`error-${e.path}`}>
          {e.path !== path && <code>{e.path.slice(e.path.lastIndexOf('.') + 1)}: </code>}
          {e.message}
        </div>
      ))}
    </>
  );
}

export function TextField({
  path,
  label,
  type = 'string',
  placeholder,
  hint,
  list,
  multiline,
  keepEmpty,
}: {
  path: string;
  label: string;
  type?: ValueType;
  placeholder?: string;
  hint?: string;
  list?: string;
  multiline?: boolean;
  keepEmpty?: boolean; // an empty input is the value "" (env values, list words), not "absent"
}) {
  const form = useForm();
  const value = form.get(path);
  const [draft, setDraft] = useState(shown(value));
  const id = useId();
  // keep what the user typed ("1." on the way to "1.5") unless the spec changed underneath
  useEffect(() => {
    if (parseInput(draft, type, keepEmpty) !== value) setDraft(shown(value));
  }, [value]); // the draft is compared, not watched
  const change = (text: string) => {
    setDraft(text);
    form.set(path, parseInput(text, type, keepEmpty));
  };
  const bad = !!form.errorsAt(path)?.length;
  const common = {
    id,
    'data-testid': `field-${path}`,
    value: draft,
    placeholder,
    'aria-invalid': bad,
    className: bad ? 'invalid' : undefined,
  };
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {multiline ? (
        <textarea {...common} rows={Math.min(8, Math.max(2, draft.split('\n').length))} onChange={(e) => change(e.target.value)} />
      ) : (
        <input {...common} list={list} inputMode={type === 'int' ? 'numeric' : undefined} onChange={(e) => change(e.target.value)} />
      )}
      {hint && <div className="hint">{hint}</div>}
      <FieldErrors path={path} />
    </div>
  );
}

export function SelectField({
  path,
  label,
  options,
  defaultLabel,
  onChange,
}: {
  path: string;
  label: string;
  options: (string | { value: string; label: string })[];
  defaultLabel?: string; // shown for "key absent"; without it the field always has a value
  onChange?: (v: string) => void;
}) {
  const form = useForm();
  const value = form.get(path);
  const id = useId();
  const opts = options.map((o) => (typeof o === 'string' ? { value: o, label: o } : o));
  const v = shown(value);
  if (v && !opts.some((o) => o.value === v)) opts.push({ value: v, label: `${v} (not a known value)` });
  const bad = !!form.errorsAt(path)?.length;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select
        id={id}
        data-testid={`field-${path}`}
        value={v}
        aria-invalid={bad}
        className={bad ? 'invalid' : undefined}
        onChange={(e) => (onChange ? onChange(e.target.value) : form.set(path, e.target.value === '' ? undefined : e.target.value))}
      >
        {defaultLabel !== undefined && <option value="">{defaultLabel}</option>}
        {opts.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
      <FieldErrors path={path} />
    </div>
  );
}

export function CheckField({ path, label, dflt }: { path: string; label: string; dflt: boolean }) {
  const form = useForm();
  const value = form.get(path);
  const checked = typeof value === 'boolean' ? value : dflt;
  return (
    <div className="field check">
      <label>
        <input type="checkbox" data-testid={`field-${path}`} checked={checked} onChange={(e) => form.set(path, e.target.checked)} />
        {label}
      </label>
      {value !== undefined && typeof value !== 'boolean' && <div className="hint">spec has {JSON.stringify(value)}</div>}
      <FieldErrors path={path} />
    </div>
  );
}

// A command, args or hook `exec`: one string (shell-style words) or a list of words.
export function WordsField({ path, label, hint }: { path: string; label: string; hint?: string }) {
  const form = useForm();
  const value = form.get(path) as Words | undefined;
  const isList = Array.isArray(value);
  const [convError, setConvError] = useState('');
  const toggle = () => {
    setConvError('');
    if (isList) {
      form.set(path, (value as string[]).length ? joinWords(value as string[]) : undefined);
    } else {
      const r = splitWords(typeof value === 'string' ? value : '');
      if (r.error) setConvError(`cannot split into words: ${r.error}`);
      else form.set(path, r.words);
    }
  };
  return (
    <div className="field words">
      <div className="field-row">
        <span className="label">{label}</span>
        <button type="button" className="link" data-testid={`words-mode-${path}`} onClick={toggle}>
          {isList ? 'as one string' : 'as a list'}
        </button>
      </div>
      {isList ? (
        <div className="list">
          {(value as string[]).map((_, j) => (
            <div className="list-item" key={j}>
              <TextField path={join(path, j)} label={`${j}`} multiline keepEmpty />
              <button type="button" className="icon-button" aria-label="Remove" data-testid={`remove-${join(path, j)}`} onClick={() => form.set(join(path, j), undefined)}>
                ×
              </button>
            </div>
          ))}
          <button type="button" data-testid={`add-${path}`} onClick={() => form.set(join(path, (value as string[]).length), '')}>
            + word
          </button>
        </div>
      ) : (
        <TextField path={path} label="" multiline placeholder={hint} />
      )}
      {convError && <div className="field-error">{convError}</div>}
      {isList && <FieldErrors path={path} />}
    </div>
  );
}

export function Section({ title, path, children, open = true, actions }: { title: string; path?: string; children: ReactNode; open?: boolean; actions?: ReactNode }) {
  const form = useForm();
  const bad = path ? !!form.errorsAt(path)?.length : false;
  return (
    <details className={`section${bad ? ' invalid' : ''}`} open={open} data-testid={path ? `section-${path}` : undefined}>
      <summary>
        {title}
        {actions && <span className="section-actions">{actions}</span>}
      </summary>
      {path && <FieldErrors path={path} />}
      {children}
    </details>
  );
}
