// A thin layer over SQLite: owned handles, prepared statements with typed binds, a
// transaction that rolls back unless committed, and numbered migrations. Blocking: callers
// keep it off I/O threads.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.h"
#include "common/unique.h"

namespace berth {

template <>
struct Deleter<sqlite3> {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
template <>
struct Deleter<sqlite3_stmt> {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

}  // namespace berth

namespace berth::store {

using Value = std::variant<std::nullptr_t, int64_t, double, std::string>;

class Statement {
 public:
  Statement(sqlite3* db, Unique<sqlite3_stmt> stmt) : db_(db), stmt_(std::move(stmt)) {}
  Statement& Bind(int index, std::nullptr_t);
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const std::string& value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::optional<std::string>& value);
  Statement& Bind(int index, const std::optional<int64_t>& value);
  Statement& Bind(int index, bool value) { return Bind(index, static_cast<int64_t>(value)); }

  // Advances to the next row: true with a row, false when done.
  Result<bool> Step();
  // Runs to completion (for statements without rows).
  Status Run();

  int64_t Int(int column) const { return sqlite3_column_int64(stmt_.get(), column); }
  double Double(int column) const { return sqlite3_column_double(stmt_.get(), column); }
  std::string Text(int column) const;
  bool IsNull(int column) const { return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL; }
  std::optional<std::string> OptText(int column) const;
  std::optional<int64_t> OptInt(int column) const;

 private:
  sqlite3* db_;
  Unique<sqlite3_stmt> stmt_;
  Status bind_status_;
};

class Database {
 public:
  // Opens (creating) the file, or ":memory:". Sets WAL, foreign keys, a busy timeout. The file
  // and its -wal, -shm and -journal are the owner's only (0600): created so, and narrowed when
  // an earlier run left them readable by others. A symlink in the file's place is refused.
  static Result<Database> Open(const std::string& path);

  Result<Statement> Prepare(std::string_view sql);
  // Runs one or more statements without results.
  Status Exec(std::string_view sql);
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_.get()); }
  int Changes() const { return sqlite3_changes(db_.get()); }
  sqlite3* handle() const { return db_.get(); }

  // Applies migrations[i] as schema version i+1, each in its own transaction, skipping those
  // already applied (PRAGMA user_version). Never edit a published migration: append.
  Status Migrate(const std::vector<std::string_view>& migrations);
  Result<int> SchemaVersion();

 private:
  explicit Database(Unique<sqlite3> db) : db_(std::move(db)) {}
  Unique<sqlite3> db_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Status Commit();
  bool ok() const { return began_; }

 private:
  Database& db_;
  bool began_ = false;
  bool done_ = false;
};

// An Error from SQLite's current error on `db`.
Error SqliteError(sqlite3* db, std::string_view what);

}  // namespace berth::store
