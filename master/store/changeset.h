#pragma once
// What one committed batch of the store changed, as the statements that changed it: the
// unit a replicated store ships to the other masters (issue 26, docs/ha.md "Replicated
// replicated"). Internal to master/store.
//
// While the writer connection captures (sql::Connection::startCapture), every statement that
// writes (not read-only, SAVEPOINT/RELEASE/ROLLBACK TO included) is recorded as it runs: its
// SQL, its bound values and whether it succeeded. Applying the record to a database in the
// same state runs the same statements with the same values in the same order, so it reaches the
// same state: rows, the ids SQLite assigned, a write rolled back to its savepoint. A statement
// whose outcome differs from the recorded one (success, rows changed, an INSERT's rowid) means
// the two databases were not in the same state (they diverged): the apply fails and changes
// nothing.
//
// Nothing in the store's SQL reads the clock or random(): every value comes bound.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/result.h"

namespace yard::store {

struct CapturedValue {
  enum Kind : uint8_t { Null = 0, Int = 1, Real = 2, Text = 3, Blob = 4 };
  Kind kind = Null;
  int64_t i = 0;
  double r = 0;
  std::string s;  // Text and Blob
  friend bool operator==(const CapturedValue&, const CapturedValue&) = default;
};

struct CapturedStatement {
  std::string sql;
  std::vector<CapturedValue> params;  // by position, 1..N
  bool ok = true;                     // it succeeded where it was captured
  int64_t changes = -1;               // the rows it changed there (-1: not a row change)
  int64_t rowid = 0;                  // an INSERT's new rowid there (0: none)
  friend bool operator==(const CapturedStatement&, const CapturedStatement&) = default;
};

using Changeset = std::vector<CapturedStatement>;

// A compact binary form (little endian, length-prefixed), and back. Decoding refuses
// anything it did not write: truncated, trailing bytes, an unknown kind.
std::string encodeChangeset(const Changeset& changes);
Result<Changeset> decodeChangeset(std::string_view bytes);

}  // namespace yard::store
