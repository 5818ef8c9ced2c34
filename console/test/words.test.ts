import { describe, expect, it } from 'vitest';
import { joinWords, splitWords } from '../src/lib/words';

describe('shell words', () => {
  it('splits as the loader does', () => {
    expect(splitWords(`sh -c 'echo "hi there"; exit 1'`).words).toEqual(['sh', '-c', 'echo "hi there"; exit 1']);
    expect(splitWords(`a "b \\"c\\" \\$d" e\\ f`).words).toEqual(['a', 'b "c" $d', 'e f']);
    expect(splitWords(`'unterminated`).error).toMatch(/unterminated single quote/);
    expect(splitWords('x \\').error).toBe('trailing backslash');
  });
  it('joins into a string that splits back to the same words', () => {
    for (const words of [['python3', '-c', 'import os\nprint(os.environ)'], ["it's", '', 'a b', '$HOME', 'plain-word_1.0']]) {
      expect(splitWords(joinWords(words)).words).toEqual(words);
    }
  });
});
