#include "controller/store/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace berth::store {

namespace {

// Makes `path` the owner's only, creating it 0600 when it is missing (never readable by others,
// not even for a moment). An existing file (a database made before berthd's umask was 077 is
// 0644) is narrowed. Never through a symlink. ENOENT for a -wal or -shm that is not there is fine.
Status MakePrivate(const std::string& path, bool create) {
  int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | (create ? O_CREAT : 0);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) {
    if (!create && errno == ENOENT) return {};
    return Fail(ErrnoError(errno, "open " + path));
  }
  struct stat st {};
  int rc = ::fstat(fd, &st);
  if (rc == 0 && (st.st_mode & 077) != 0) rc = ::fchmod(fd, st.st_mode & 0700);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Fail(ErrnoError(err, "make " + path + " private"));
  return {};
}

// The database file and its companions: SQLite gives -wal and -shm the main file's mode (and
// owner), so a private main file keeps the ones it creates private; those left by an earlier
// run are narrowed here.
Status MakeDatabasePrivate(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.starts_with("file:")) return {};
  if (auto s = MakePrivate(path, true); !s) return s;
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    if (auto s = MakePrivate(path + suffix, false); !s) return s;
  }
  return {};
}

}  // namespace

Error SqliteError(sqlite3* db, std::string_view what) {
  int code = sqlite3_extended_errcode(db);
  ErrorCode mapped = ErrorCode::kInternal;
  if ((code & 0xff) == SQLITE_CONSTRAINT) mapped = ErrorCode::kAlreadyExists;
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    mapped = ErrorCode::kUnavailable;
  }
  if ((code & 0xff) == SQLITE_FULL) mapped = ErrorCode::kNoSpace;
  return Error(mapped, fmt::format("{}: {}", what, sqlite3_errmsg(db)));
}

// ---------------------------------------------------------------------------------------------

Statement& Statement::Bind(int index, std::nullptr_t) {
  if (sqlite3_bind_null(stmt_.get(), index) != SQLITE_OK && bind_status_) {
    bind_status_ = Fail(SqliteError(db_, "bind"));
  }
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_.get(), index, value) != SQLITE_OK && bind_status_) {
    bind_status_ = Fail(SqliteError(db_, "bind"));
  }
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  if (sqlite3_bind_double(stmt_.get(), index, value) != SQLITE_OK && bind_status_) {
    bind_status_ = Fail(SqliteError(db_, "bind"));
  }
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  if (sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT,
                          SQLITE_UTF8) != SQLITE_OK &&
      bind_status_) {
    bind_status_ = Fail(SqliteError(db_, "bind"));
  }
  return *this;
}

Statement& Statement::Bind(int index, const std::optional<std::string>& value) {
  return value ? Bind(index, std::string_view(*value)) : Bind(index, nullptr);
}

Statement& Statement::Bind(int index, const std::optional<int64_t>& value) {
  return value ? Bind(index, *value) : Bind(index, nullptr);
}

Result<bool> Statement::Step() {
  if (!bind_status_) return Fail(bind_status_.error());
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Fail(SqliteError(db_, sqlite3_sql(stmt_.get())));
}

Status Statement::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return Fail(row.error());
    if (!*row) return {};
  }
}

std::string Statement::Text(int column) const {
  const auto* text = sqlite3_column_text(stmt_.get(), column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), column)));
}

std::optional<std::string> Statement::OptText(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Text(column);
}

std::optional<int64_t> Statement::OptInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}

// ---------------------------------------------------------------------------------------------

Result<Database> Database::Open(const std::string& path) {
  // The database holds key hashes and every workspace's env: its files are 0600 (issue 12).
  if (auto s = MakeDatabasePrivate(path); !s) {
    return Fail(ErrorCode::kUnavailable, fmt::format("open database {}: {}", path, s.error().message));
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  Unique<sqlite3> db(raw);
  if (rc != SQLITE_OK) {
    return Fail(ErrorCode::kUnavailable,
                fmt::format("open database {}: {}", path,
                            raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  // Waits for a writer instead of failing at once; berthd is the only writer in practice.
  sqlite3_busy_timeout(db.get(), 5000);
  Database database(std::move(db));
  // WAL: readers never block the writer; synchronous=FULL: a committed transition survives a
  // power cut, which the reconciler relies on.
  auto status = database.Exec(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
  if (!status) return Fail(status.error());
  return database;
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr) !=
      SQLITE_OK) {
    return Fail(SqliteError(db_.get(), fmt::format("prepare '{}'", sql.substr(0, 60))));
  }
  return Statement(db_.get(), Unique<sqlite3_stmt>(raw));
}

Status Database::Exec(std::string_view sql) {
  std::string owned(sql);
  char* message = nullptr;
  if (sqlite3_exec(db_.get(), owned.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return Fail(ErrorCode::kInternal, fmt::format("sql '{}': {}", owned.substr(0, 60), text));
  }
  return {};
}

Result<int> Database::SchemaVersion() {
  auto stmt = Prepare("PRAGMA user_version");
  if (!stmt) return Fail(stmt.error());
  auto row = stmt->Step();
  if (!row) return Fail(row.error());
  return static_cast<int>(stmt->Int(0));
}

Status Database::Migrate(const std::vector<std::string_view>& migrations) {
  auto version = SchemaVersion();
  if (!version) return Fail(version.error());
  if (*version > static_cast<int>(migrations.size())) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("database schema version {} is newer than this berthd knows ({})",
                            *version, migrations.size()));
  }
  for (size_t i = static_cast<size_t>(*version); i < migrations.size(); ++i) {
    Transaction tx(*this);
    if (!tx.ok()) return Fail(SqliteError(db_.get(), "begin migration"));
    if (auto s = Exec(migrations[i]); !s) return s;
    if (auto s = Exec(fmt::format("PRAGMA user_version = {}", i + 1)); !s) return s;
    if (auto s = tx.Commit(); !s) return s;
  }
  return {};
}

// ---------------------------------------------------------------------------------------------

Transaction::Transaction(Database& db) : db_(db) { began_ = db_.Exec("BEGIN IMMEDIATE").has_value(); }

Transaction::~Transaction() {
  if (began_ && !done_) (void)db_.Exec("ROLLBACK");
}

Status Transaction::Commit() {
  if (!began_) return Fail(ErrorCode::kInternal, "transaction did not begin");
  auto status = db_.Exec("COMMIT");
  if (status) done_ = true;
  return status;
}

}  // namespace berth::store
