#pragma once
// Human tables: left-aligned columns, upper-case headers, two spaces apart (kubectl style).
// Cells carry text users chose (job names in an audit target, reasons, token descriptions):
// a control character in one is shown escaped (logSafe), so a newline cannot forge a row and
// an escape sequence cannot drive the reader's terminal.

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "common/util/log_text.h"

namespace yard::ctl {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : rows_{std::move(headers)} {}
  void row(std::vector<std::string> cells) {
    for (auto& c : cells) c = logSafe(c);
    rows_.push_back(std::move(cells));
  }

  // The width of each column: its widest cell, header included.
  std::vector<size_t> widths() const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    return width;
  }

  // One row padded to `widths` (a cell wider than its column pushes the rest right). A
  // stream (job list --watch, job events -f) prints later rows with the first table's widths.
  static std::string line(std::vector<std::string> cells, const std::vector<size_t>& widths) {
    for (auto& c : cells) c = logSafe(c);  // a stream's row does not pass row()
    return join(cells, widths);
  }

  void print(std::ostream& out) const { print(out, widths()); }
  // With columns at least as wide as `width` (a stream that reserves room for later rows).
  void print(std::ostream& out, const std::vector<size_t>& width) const {
    for (const auto& r : rows_) out << join(r, width) << "\n";  // escaped by row()
  }

 private:
  static std::string join(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      out += cells[i];
      size_t width = i < widths.size() ? widths[i] : 0;
      if (i + 1 < cells.size()) out += std::string(width > cells[i].size() ? width - cells[i].size() + 2 : 2, ' ');
    }
    return out;
  }

  std::vector<std::vector<std::string>> rows_;
};

}  // namespace yard::ctl
