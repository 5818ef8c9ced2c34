#include "common/spec/shell_words.h"

namespace yard::spec {

Result<std::vector<std::string>> splitShellWords(std::string_view text) {
  using R = Result<std::vector<std::string>>;
  std::vector<std::string> words;
  std::string word;
  bool inWord = false;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (inWord) words.push_back(std::move(word));
      word.clear();
      inWord = false;
      ++i;
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos)
        return R::fail("unterminated single quote at character " + std::to_string(i + 1));
      word.append(text.substr(i + 1, end - i - 1));
      inWord = true;
      i = end + 1;
    } else if (c == '"') {
      size_t start = i;
      ++i;
      bool closed = false;
      while (i < text.size()) {
        char d = text[i];
        if (d == '"') { closed = true; ++i; break; }
        if (d == '\\' && i + 1 < text.size()) {
          char e = text[i + 1];
          if (e == '"' || e == '\\' || e == '$' || e == '`') { word += e; i += 2; continue; }
          if (e == '\n') { i += 2; continue; }
        }
        word += d;
        ++i;
      }
      if (!closed)
        return R::fail("unterminated double quote at character " + std::to_string(start + 1));
      inWord = true;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return R::fail("trailing backslash");
      if (text[i + 1] != '\n') {  // backslash-newline is a line continuation
        word += text[i + 1];
        inWord = true;
      }
      i += 2;
    } else {
      word += c;
      inWord = true;
      ++i;
    }
  }
  if (inWord) words.push_back(std::move(word));
  return R::ok(std::move(words));
}

}  // namespace yard::spec
