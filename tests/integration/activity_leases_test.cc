// Keep-awake leases on the local token-less socket and the authenticated API, the activity
// snapshot, and the real `berth-agent keepawake` binary against an in-process agent.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/wait.h"
#include "common/client/ports.h"
#include "tests/support/test_agent.h"

using namespace berth;
using namespace std::chrono_literals;
using http::bhttp::verb;

extern char** environ;

namespace {

client::ApiClient LocalClient(const testing::TestAgent& agent) {
  Endpoint ep;
  ep.kind = Endpoint::Kind::kUnix;
  ep.path = agent.local_socket();
  return client::ApiClient(ep, "");
}

using berth::testing::WaitFor;

nlohmann::json Leases(client::ApiClient& client) {
  auto activity = client::GetActivity(client, "/v1");
  REQUIRE(activity);
  return (*activity)["leases"];
}

// Runs the real berth-agent binary with `args`; stdout goes to `out_file` if given.
pid_t SpawnAgentBinary(const std::vector<std::string>& args, const std::string& out_file = {}) {
  std::vector<std::string> all = {BERTH_AGENT_BIN};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!out_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  pid_t pid = 0;
  int err = posix_spawn(&pid, all[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(err == 0);
  return pid;
}

// Waits for `pid` with a deadline; its exit code (128+N for a signal), or -1 on timeout.
int WaitExit(pid_t pid, std::chrono::seconds limit = 30s) {
  int status = 0;
  bool done = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("leases on the local socket: take, show with reason, renew, delete", "[leases]") {
  testing::TestAgent agent;
  auto local = LocalClient(agent);
  auto lease = client::TakeLease(local, "/v1", {"make test", 7200s});
  REQUIRE(lease);
  CHECK(lease->id > 0);
  CHECK(lease->reason == "make test");
  CHECK(lease->until.size() == 20);  // 2024-05-01T12:00:00Z

  auto raw = local.Request(verb::post, "/v1/leases", R"({"reason":"x","duration_s":60})",
                           "application/json");
  REQUIRE(raw);
  CHECK(raw->status == 201);

  auto activity = client::GetActivity(local, "/v1");
  REQUIRE(activity);
  REQUIRE((*activity)["leases"].size() == 2);
  CHECK((*activity)["leases"][0]["id"] == lease->id);
  CHECK((*activity)["leases"][0]["reason"] == "make test");
  CHECK((*activity)["leases"][0]["remaining_s"].get<int>() > 7100);
  CHECK((*activity)["active"] == true);
  CHECK((*activity)["reasons"].dump().find("keepawake_leases") != std::string::npos);
  CHECK((*activity)["details"].dump().find("make test") != std::string::npos);

  // The authenticated API shows the same leases.
  auto api = agent.Client();
  CHECK(Leases(api).size() == 2);

  auto renewed = client::RenewLease(local, "/v1", lease->id, 30s);
  REQUIRE(renewed);
  CHECK(Leases(local)[0]["remaining_s"].get<int>() <= 30);

  REQUIRE(client::ReleaseLease(local, "/v1", lease->id));
  auto again = client::ReleaseLease(local, "/v1", lease->id);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == ErrorCode::kNotFound);
  auto status = local.Request(verb::delete_, "/v1/leases/999");
  REQUIRE(status);
  CHECK(status->status == 404);
  CHECK(Leases(local).size() == 1);
}

TEST_CASE("leases expire on their own", "[leases]") {
  testing::TestAgent agent;
  auto local = LocalClient(agent);
  auto lease = client::TakeLease(local, "/v1", {"short", 1s});
  REQUIRE(lease);
  CHECK(Leases(local).size() == 1);
  CHECK(WaitFor([&] { return Leases(local).empty(); }, 5s));
  auto renew = client::RenewLease(local, "/v1", lease->id, 60s);
  REQUIRE_FALSE(renew);
  CHECK(renew.error().code == ErrorCode::kNotFound);
}

TEST_CASE("lease requests are validated", "[leases]") {
  testing::TestAgent agent;
  auto local = LocalClient(agent);
  for (const char* body : {R"({"duration_s":0})", R"({"duration_s":604801})", R"({"reason":"x"})",
                           R"({"duration_s":"60"})", R"([1,2])", "not json",
                           R"({"duration_s":60,"reason":7})"}) {
    auto r = local.Request(verb::post, "/v1/leases", body, "application/json");
    INFO(body);
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(client::ApiClient::ErrorFrom(*r).code == ErrorCode::kInvalidArgument);
  }
  auto bad_id = local.Request(verb::delete_, "/v1/leases/abc");
  REQUIRE(bad_id);
  CHECK(bad_id->status == 400);
  CHECK(Leases(local).empty());
}

TEST_CASE("the local socket grants leases and activity only; the API wants its token",
          "[leases]") {
  testing::TestAgent agent;
  auto mode = std::filesystem::status(agent.local_socket()).permissions();
  CHECK((mode & std::filesystem::perms::others_write) != std::filesystem::perms::none);
  auto local = LocalClient(agent);
  for (const char* target : {"/v1/ports", "/v1/tunnel?port=22", "/v1/exec", "/v1/files/etc"}) {
    auto r = local.Request(verb::get, target);
    INFO(target);
    REQUIRE(r);
    CHECK(r->status == 404);
  }
  auto anonymous = agent.ClientWithToken("");
  auto denied = client::TakeLease(anonymous, "/v1", {"x", 60s});
  REQUIRE_FALSE(denied);
  CHECK(denied.error().code == ErrorCode::kUnauthenticated);
  auto api = agent.Client();
  auto lease = client::TakeLease(api, "/v1", {"from the controller", 60s});
  REQUIRE(lease);
  REQUIRE(client::ReleaseLease(api, "/v1", lease->id));
}

TEST_CASE("keepawake without a command takes a lease and prints it", "[keepawake]") {
  testing::TestAgent agent;
  std::string out = agent.dir() / "out.txt";
  pid_t pid = SpawnAgentBinary(
      {"keepawake", "--for", "2h", "--reason", "long build", "--socket", agent.local_socket()},
      out);
  CHECK(WaitExit(pid) == 0);
  auto local = LocalClient(agent);
  auto leases = Leases(local);
  REQUIRE(leases.size() == 1);
  CHECK(leases[0]["reason"] == "long build");
  CHECK(leases[0]["remaining_s"].get<int>() > 7100);
  CHECK(ReadAll(out).starts_with(fmt::format("lease {} until ", leases[0]["id"].get<uint64_t>())));

  pid_t bad = SpawnAgentBinary({"keepawake", "--for", "forever", "--socket", agent.local_socket()});
  CHECK(WaitExit(bad) == 2);
  pid_t nosock = SpawnAgentBinary({"keepawake", "--for", "1m", "--socket", agent.dir() / "none"});
  CHECK(WaitExit(nosock) == 1);
}

TEST_CASE("keepawake -- CMD holds a lease while CMD runs and exits with its code",
          "[keepawake]") {
  testing::TestAgent agent;
  auto local = LocalClient(agent);
  pid_t quick = SpawnAgentBinary(
      {"keepawake", "--for", "1m", "--socket", agent.local_socket(), "--", "sh", "-c", "exit 3"});
  CHECK(WaitExit(quick) == 3);
  CHECK(Leases(local).empty());

  // A command that waits for the test: the lease is visible while it runs.
  std::string started = agent.dir() / "started";
  std::string go = agent.dir() / "go";
  pid_t slow = SpawnAgentBinary(
      {"keepawake", "--for", "1m", "--socket", agent.local_socket(), "--", "sh", "-c",
       fmt::format("touch {}; while [ ! -e {} ]; do sleep 0.02; done; exit 7", started, go)});
  REQUIRE(WaitFor([&] { return std::filesystem::exists(started); }));
  auto leases = Leases(local);
  REQUIRE(leases.size() == 1);
  CHECK(leases[0]["reason"].get<std::string>().starts_with("sh -c touch"));
  // The lease held while a command runs is a short slice, renewed, never the whole --for.
  CHECK(leases[0]["remaining_s"].get<int>() <= 60);
  std::ofstream(go).put('x');
  CHECK(WaitExit(slow) == 7);
  CHECK(Leases(local).empty());

  pid_t killed = SpawnAgentBinary({"keepawake", "--for", "1m", "--socket", agent.local_socket(),
                                   "--", "sh", "-c", "kill -TERM $$"});
  CHECK(WaitExit(killed) == 128 + SIGTERM);
  pid_t missing = SpawnAgentBinary({"keepawake", "--for", "1m", "--socket", agent.local_socket(),
                                    "--", "/nonexistent/command"});
  CHECK(WaitExit(missing) == 127);
  CHECK(Leases(local).empty());
}
