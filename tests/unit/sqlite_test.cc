#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "controller/store/schema.h"
#include "controller/store/sqlite.h"
#include "tests/support/temp_dir.h"

using namespace berth;
using namespace berth::store;

TEST_CASE("migrations apply once, in order, and survive reopening", "[store]") {
  testing::TempDir dir;
  std::string path = dir / "berth.db";
  {
    auto db = Database::Open(path);
    REQUIRE(db);
    REQUIRE(db->Migrate(Migrations()));
    CHECK(db->SchemaVersion().value() == static_cast<int>(Migrations().size()));
    REQUIRE(db->Exec("INSERT INTO tenants VALUES ('t_1', 'default', 1)"));
  }
  auto db = Database::Open(path);
  REQUIRE(db);
  REQUIRE(db->Migrate(Migrations()));  // nothing to do, nothing lost
  auto stmt = db->Prepare("SELECT name FROM tenants WHERE id = ?");
  REQUIRE(stmt);
  stmt->Bind(1, "t_1");
  REQUIRE(stmt->Step().value());
  CHECK(stmt->Text(0) == "default");

  auto mode = db->Prepare("PRAGMA journal_mode");
  REQUIRE(mode->Step().value());
  CHECK(mode->Text(0) == "wal");
  auto fk = db->Prepare("PRAGMA foreign_keys");
  REQUIRE(fk->Step().value());
  CHECK(fk->Int(0) == 1);
}

namespace {

unsigned ModeOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Sets the process umask for one scope (tests share the process).
struct ScopedUmask {
  explicit ScopedUmask(mode_t m) : old(::umask(m)) {}
  ~ScopedUmask() { ::umask(old); }
  mode_t old;
};

}  // namespace

TEST_CASE("the database and its -wal and -shm are created 0600 even under a umask of 022",
          "[store][modes]") {
  ScopedUmask loose(022);
  testing::TempDir dir;
  std::string path = dir / "berth.db";
  auto db = Database::Open(path);
  REQUIRE(db);
  REQUIRE(db->Migrate(Migrations()));
  REQUIRE(db->Exec("INSERT INTO tenants VALUES ('t_1', 'default', 1)"));
  // The connection is open: the write-ahead log and the shared-memory index exist now.
  REQUIRE(access((path + "-wal").c_str(), F_OK) == 0);
  REQUIRE(access((path + "-shm").c_str(), F_OK) == 0);
  CHECK(ModeOf(path) == 0600);
  CHECK(ModeOf(path + "-wal") == 0600);
  CHECK(ModeOf(path + "-shm") == 0600);
}

TEST_CASE("a database an earlier berthd left 0644, with its -wal and -shm, is narrowed to 0600",
          "[store][modes]") {
  testing::TempDir dir;
  std::string path = dir / "berth.db";
  {
    auto db = Database::Open(path);
    REQUIRE(db);
    REQUIRE(db->Migrate(Migrations()));
  }
  // As a berthd before the umask left them (empty -wal and -shm are valid to SQLite).
  for (const std::string& p : {path, path + "-wal", path + "-shm"}) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::fchmod(fd, 0644) == 0);
    ::close(fd);
    REQUIRE(ModeOf(p) == 0644);
  }
  auto db = Database::Open(path);
  REQUIRE(db);
  CHECK(db->SchemaVersion().value() == static_cast<int>(Migrations().size()));
  CHECK(ModeOf(path) == 0600);
  CHECK(ModeOf(path + "-wal") == 0600);
  CHECK(ModeOf(path + "-shm") == 0600);
}

TEST_CASE("a symlink in the database's place is refused, and its target left alone", "[store][modes]") {
  testing::TempDir dir;
  std::string target = dir / "elsewhere";
  {
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::fchmod(fd, 0644) == 0);
    ::close(fd);
  }
  std::string path = dir / "berth.db";
  REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
  auto db = Database::Open(path);
  REQUIRE_FALSE(db);
  CHECK(db.error().message.find("berth.db") != std::string::npos);
  CHECK(ModeOf(target) == 0644);
}

TEST_CASE("a database newer than the code is refused, not silently used", "[store]") {
  auto db = Database::Open(":memory:");
  REQUIRE(db);
  REQUIRE(db->Exec("PRAGMA user_version = 99"));
  auto status = db->Migrate(Migrations());
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::kFailedPrecondition);
}

TEST_CASE("a transaction rolls back unless committed", "[store]") {
  auto db = Database::Open(":memory:");
  REQUIRE(db->Migrate(Migrations()));
  {
    Transaction tx(*db);
    REQUIRE(tx.ok());
    REQUIRE(db->Exec("INSERT INTO tenants VALUES ('t_1', 'a', 1)"));
  }
  {
    Transaction tx(*db);
    REQUIRE(db->Exec("INSERT INTO tenants VALUES ('t_2', 'b', 1)"));
    REQUIRE(tx.Commit());
  }
  auto stmt = db->Prepare("SELECT group_concat(id) FROM tenants");
  REQUIRE(stmt->Step().value());
  CHECK(stmt->Text(0) == "t_2");
}

TEST_CASE("constraints surface as typed errors", "[store]") {
  auto db = Database::Open(":memory:");
  REQUIRE(db->Migrate(Migrations()));
  REQUIRE(db->Exec("INSERT INTO tenants VALUES ('t_1', 'a', 1)"));
  auto dup = db->Prepare("INSERT INTO tenants VALUES ('t_2', 'a', 1)");
  auto status = dup->Run();
  REQUIRE_FALSE(status);
  CHECK(status.error().code == ErrorCode::kAlreadyExists);
  // Foreign keys are enforced: a key for a tenant that does not exist is refused.
  auto orphan = db->Prepare(
      "INSERT INTO api_keys (id, tenant_id, hash, prefix, scope, created_at) "
      "VALUES ('k', 't_missing', 'h', 'p', 'admin', 1)");
  CHECK_FALSE(orphan->Run());
}
