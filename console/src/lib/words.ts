// Command and args are a string (split into words as a shell would, without running one)
// or a list. The form switches between the two; these convert, with the same splitting rules
// as the loader (common/spec/shell_words.cpp), so a switch never changes the argv.

export function splitWords(text: string): { words?: string[]; error?: string } {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      i++;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) return { error: `unterminated single quote at character ${i + 1}` };
      word += text.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      const start = i;
      i++;
      let closed = false;
      while (i < text.length) {
        const d = text[i];
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === '\\' && i + 1 < text.length) {
          const e = text[i + 1];
          if (e === '"' || e === '\\' || e === '$' || e === '`') {
            word += e;
            i += 2;
            continue;
          }
          if (e === '\n') {
            i += 2;
            continue;
          }
        }
        word += d;
        i++;
      }
      if (!closed) return { error: `unterminated double quote at character ${start + 1}` };
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 >= text.length) return { error: 'trailing backslash' };
      if (text[i + 1] !== '\n') {
        word += text[i + 1];
        inWord = true;
      }
      i += 2;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  return { words };
}

// One string that splitWords turns back into `words`.
export function joinWords(words: readonly string[]): string {
  return words.map((w) => (w !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}
