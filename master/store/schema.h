#pragma once
// The store's versioned schema: an ordered list of migrations and the checks a database
// file passes before the master uses it. Internal to master/store (tests use it to build
// old-version files).
//
// Rules for changing the schema:
//  - A shipped migration is never edited; a change is a new migration appended to the list.
//    Migration i (0-based) takes a database from user_version i to i+1.
//  - Each migration runs in its own transaction together with the user_version bump, so a
//    crash mid-upgrade leaves the file at the previous version, never in between.
//  - A file whose user_version is newer than kSchemaVersion is refused (an older master must
//    not write rows it does not understand).

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/util/result.h"
#include "master/store/sqlite.h"

namespace yard::store::schema {

// PRAGMA application_id of every Yard store ("YARD" in ASCII), so a SQLite file that belongs
// to another program is refused rather than migrated into a mess.
inline constexpr int32_t kApplicationId = 0x59415244;

struct Migration {
  int version;      // user_version after this migration
  const char* sql;  // one or more statements
};

// Every migration, oldest first; migrations()[i].version == i + 1.
std::span<const Migration> migrations();
// The version this build writes and understands: migrations().back().version.
int currentVersion();

// Opens `path` for writing, creating an empty Yard database when the file is missing, then
// verifies and upgrades it:
//  - an existing file that is empty (0 bytes) or cannot be read is refused: only a missing
//    file means "new";
//  - a file that is not SQLite, or fails PRAGMA quick_check, is refused (names the file);
//  - a SQLite file with another application_id (or tables but no Yard id) is refused;
//  - a user_version newer than currentVersion() is refused;
//  - pending migrations are applied, each in its own transaction.
// Sets the connection's durable pragmas (WAL, synchronous=FULL, foreign_keys, busy_timeout).
// A refused file is not modified. A migration that fails is rolled back whole.
Result<std::unique_ptr<sql::Connection>> openForWrite(const std::string& path);

// Brings a database this process did not open with openForWrite to currentVersion(): a raft
// snapshot just restored, made by a master of an older version (or before this one was
// upgraded), would otherwise hold an older schema than this build writes. Refused, changing
// nothing, when it is not a Yard database or is newer than this build; else applies the
// pending migrations as openForWrite does. Returns the version it held before.
Result<int64_t> upgrade(sql::Connection& conn);

// The per-connection settings every store connection uses (busy timeout, foreign keys).
Result<bool> configureConnection(sql::Connection& conn);

}  // namespace yard::store::schema
