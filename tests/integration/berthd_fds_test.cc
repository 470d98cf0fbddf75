// What berthd's children inherit (issue 12): nothing but stdin, stdout and stderr. Asio opens
// sockets without SOCK_CLOEXEC; before common/child_fds.h a host-process agent (like passt on
// a real host) held berthd's listening socket, its database and its clients' connections, so a
// berthd killed with SIGKILL could not bind its port again while any child ran.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "tests/integration/berthd_hardening_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using http::bhttp::verb;
using testing::HardeningBerthd;

// fd number -> what it is (readlink of /proc/PID/fd/N: "socket:[123]", a path, ...).
std::map<int, std::string> OpenDescriptors(const std::string& pid) {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + pid + "/fd", ec)) {
    auto target = fs::read_symlink(entry.path(), ec);
    if (!ec) out[std::stoi(entry.path().filename().string())] = target.string();
  }
  return out;
}

}  // namespace

TEST_CASE("berthd's children inherit none of its descriptors: not its listening socket, not "
          "its database",
          "[berthd][fds]") {
  auto& d = HardeningBerthd();
  auto api = d.Admin();
  auto made = api.Json(verb::post, "/v1/workspaces", nlohmann::json{{"name", "fds"}});
  REQUIRE(made);
  std::string id = (*made)["id"].get<std::string>();
  REQUIRE(api.Json(verb::post, "/v1/workspaces/fds/wait", nlohmann::json{{"state", "running"}}));
  // An exec through berthd first: a client connection is open in berthd while the agent runs.
  auto exec = api.Request(verb::post, "/v1/workspaces/fds/exec", R"({"cmd":["true"]})",
                          "application/json");
  REQUIRE(exec);
  REQUIRE(exec->status == 200);

  std::string agent_pid;
  std::ifstream(d.data_dir() / "workspaces" / id / "agent.pid") >> agent_pid;
  REQUIRE_FALSE(agent_pid.empty());
  auto child = OpenDescriptors(agent_pid);
  REQUIRE_FALSE(child.empty());  // /proc is readable: the check below means something
  auto parent = OpenDescriptors("self");

  // What berthd holds that matters most: its listening socket and its SQLite files.
  std::set<std::string> berthd_sockets;
  bool parent_has_db = false;
  for (const auto& [fd, what] : parent) {
    if (what.starts_with("socket:")) berthd_sockets.insert(what);
    if (what.find("berth.db") != std::string::npos) parent_has_db = true;
  }
  REQUIRE(parent_has_db);
  REQUIRE_FALSE(berthd_sockets.empty());
  for (const auto& [fd, what] : child) {
    INFO("agent fd " << fd << " -> " << what);
    CHECK(what.find("berth.db") == std::string::npos);
    CHECK_FALSE(berthd_sockets.contains(what));
  }
  REQUIRE(api.Request(verb::delete_, "/v1/workspaces/fds", "", ""));
}

}  // namespace berth
