// The example specs of configs/examples, which the console must import and export exactly.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const EXAMPLES = path.resolve(__dirname, '../../configs/examples');

export function examples(): { file: string; text: string }[] {
  return readdirSync(EXAMPLES)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ file: f, text: readFileSync(path.join(EXAMPLES, f), 'utf8') }));
}
