// What berthd writes is its own (issue 12): before, berth.db and its -wal (every workspace's
// env) and every workspace's disks were 0644, readable by any local user who read their paths
// off QEMU's command line. The files here are the ones the daemon under test made; another
// uid's attempt to read them is made for real (a forked child drops to that uid).
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/integration/berthd_hardening_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using http::bhttp::verb;
using testing::HardeningBerthd;

struct stat Lstat(const fs::path& path) {
  struct stat st {};
  INFO(path.string());
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

unsigned ModeOf(const fs::path& path) { return Lstat(path).st_mode & 07777; }

// The errno of open(path, O_RDONLY) in a child running as `uid` (gid the same, no groups); 0
// when the open succeeded.
int OpenErrnoAs(uid_t uid, const fs::path& path) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      ::_exit(200);
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    ::_exit(fd >= 0 ? 0 : (errno & 0x7f));
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) != 200);
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("berthd's files are private: the database, its -wal and -shm, the key, the disks and "
          "the token are 0600, directories give others traversal only, and another uid reads none",
          "[berthd][modes]") {
  REQUIRE(::geteuid() == 0);  // the other-uid reads below need root to drop to that uid
  auto& d = HardeningBerthd();
  auto api = d.Admin();
  auto made = api.Json(verb::post, "/v1/workspaces", nlohmann::json{{"name", "modes"}});
  REQUIRE(made);
  std::string id = (*made)["id"].get<std::string>();
  REQUIRE(api.Json(verb::post, "/v1/workspaces/modes/wait", nlohmann::json{{"state", "running"}}));

  // The umask berthd set at start-up, for everything it and its children create.
  mode_t current = ::umask(077);
  CHECK(current == 077);

  const fs::path data = d.data_dir();
  const fs::path ws = data / "workspaces" / id;
  // Traversal for QEMU (another uid) to reach a workspace's files; no listing, no writing.
  for (const auto& dir : {data, data / "workspaces", ws}) {
    INFO(dir.string());
    CHECK(ModeOf(dir) == 0711);
  }
  // The database is written while the daemon runs, so its -wal and -shm are there.
  std::vector<fs::path> secret = {data / "berth.db", data / "berth.db-wal", data / "berth.db-shm",
                                  data / "admin.key", ws / "root.qcow2", ws / "data.qcow2",
                                  ws / "token"};
  for (const auto& path : secret) {
    INFO(path.string());
    CHECK(ModeOf(path) == 0600);
  }
  // Nothing else berthd made under its data directory is open to others either. Left out: the
  // stand-in image (the image builder's, world-readable on purpose: images hold no secrets), and
  // what the unix transport's host agent makes as the guest would, under the guest's rules:
  // guest/ (the stand-in guest file system, with the modes API clients ask for) and the local
  // socket every guest user may reach (0666 in a real guest).
  // Other tests' workspaces may be going away meanwhile (deletes finish asynchronously): what
  // vanishes during the walk is skipped.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(data, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    auto name = it->path().filename();
    if (it->path() == data / "images" || (name == "guest" && it->path().parent_path().parent_path() == data / "workspaces")) {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode) || name == "agent-local.sock") continue;
    INFO(it->path().string() << " mode " << std::oct << (st.st_mode & 07777));
    if (S_ISDIR(st.st_mode)) {
      CHECK((st.st_mode & 066) == 0);  // at most traversal
    } else {
      CHECK((st.st_mode & 077) == 0);
    }
  }
  // Another local user (nobody, and a workspace uid of the reserved range that is not this
  // workspace's) opens none of them.
  for (uid_t other : {uid_t{65534}, uid_t{2000999}}) {
    for (const auto& path : secret) {
      INFO("uid " << other << " opens " << path.string());
      CHECK(OpenErrnoAs(other, path) == EACCES);
    }
  }
  REQUIRE(api.Request(verb::delete_, "/v1/workspaces/modes", "", ""));
}

}  // namespace berth
