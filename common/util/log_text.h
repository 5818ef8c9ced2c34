#pragma once
// Log lines carry text that peers chose (node names, refusal reasons, addresses): a newline in
// it would start a forged line ("yard-master: node x joined ..."), an escape sequence would
// drive the reader's terminal. Each daemon's log sink passes every line through logSafe.

#include <string>
#include <string_view>

namespace yard {

// `text` with each control character (below 0x20, and 0x7f) written as \n, \r, \t or \xNN,
// so that it stays one line and prints as it came; the C1 controls in UTF-8 (U+0080-U+009F,
// bytes C2 80-C2 9F: a terminal may take U+009B as CSI) as \xc2\xNN. Everything else is kept
// as is: a backslash (the shown() of a message may already have escaped a value JSON's way)
// and other bytes from 0x80 up (UTF-8 stays readable).
inline std::string logSafe(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    auto c = static_cast<unsigned char>(ch);
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      auto next = static_cast<unsigned char>(text[++i]);
      out += "\\xc2\\x";
      out += kHex[next >> 4];
      out += kHex[next & 0xf];
    } else if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace yard
