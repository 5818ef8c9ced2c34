// What the form's fields read and write (components/form.tsx): the spec by path, the errors
// placed at each field, the registered datasets.

import { useMemo } from 'react';
import type { FormApi } from '../../components/form';
import { setField, type EditorModel } from '../../lib/editor';
import type { SpecError } from '../../lib/fields';
import { formatPath, getAt, parsePath } from '../../lib/path';

export function useFormApi(
  spec: EditorModel['spec'],
  update: (f: (m: EditorModel) => EditorModel) => void,
  errorsMap: Map<string, SpecError[]>,
  datasets: string[],
): FormApi {
  return useMemo(
    () => ({
      get: (path) => getAt(spec, path),
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
    [spec, update, errorsMap, datasets],
  );
}
