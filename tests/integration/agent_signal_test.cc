// A user's signal must reach only the process it is meant for. The real berth-agent binary
// runs as a child process (in-process agents have no asio signal_set for SIGTERM, which is
// what the race hits): 300 rounds of "start a background process, signal it at once".
// Without signals blocked around fork(), a signal can arrive in the child while it still has
// the agent's handlers; the handler writes into the self-pipe it shares with the agent, which
// then logs "signal 15: shutting down" and exits, and the child itself lives on.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/client/exec.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_agent.h"
#include "tests/support/wait.h"

extern char** environ;

using namespace berth;

namespace {

// The binary CMake built, or $BERTH_AGENT_BIN (to run the test against another build).
std::string AgentBinary() {
  const char* bin = std::getenv("BERTH_AGENT_BIN");
  return bin != nullptr && *bin != '\0' ? bin : BERTH_AGENT_BIN;
}

class AgentProcess {
 public:
  explicit AgentProcess(const testing::TempDir& dir)
      : socket_(dir / "agent.sock"), token_("agent-signal-test-token-0123456789") {
    std::string user = testing::CurrentUserName();
    std::string binary = AgentBinary();
    std::vector<std::string> args = {binary,          "--listen",       "unix:" + socket_,
                                     "--token-source", "env",          "--local-socket",
                                     "",               "--default-user", user,
                                     "--log-level",    "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = {"BERTH_AGENT_TOKEN=" + token_};
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) {
      pid_ = -1;
    }
  }
  ~AgentProcess() {
    if (pid_ > 0 && Alive()) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // False once the agent has exited (it is reaped here, so its pid is not reused meanwhile).
  bool Alive() {
    if (exited_) return false;
    int status = 0;
    pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) exited_ = true;
    return !exited_;
  }
  client::ApiClient Client() const {
    return client::ApiClient(*Endpoint::Parse("unix:" + socket_), token_);
  }

 private:
  std::string socket_;
  std::string token_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

protocol::ExecRequest Background(std::vector<std::string> argv) {
  protocol::ExecRequest req;
  req.cmd = std::move(argv);
  req.background = true;
  return req;
}

}  // namespace

TEST_CASE("a signal sent right after a spawn ends the child, never the agent (300 rounds)",
          "[process][signals]") {
  testing::TempDir dir("berth-signals");
  AgentProcess agent(dir);
  REQUIRE(agent.pid() > 0);
  auto api = agent.Client();
  REQUIRE(testing::WaitFor([&] { return api.Json(http::bhttp::verb::get, "/v1/info").has_value(); }));

  constexpr int kRounds = 300;
  constexpr int kBatch = 50;  // under the agent's 200 remembered finished processes
  std::vector<int> batch;
  for (int round = 0; round < kRounds; ++round) {
    // An argv, not a shell line: the process that gets the signal is the one forked.
    auto started = client::StartBackground(api, "/v1", Background({"sleep", "1000"}));
    INFO("round " << round);
    REQUIRE(started);
    // "At once": straight from here, the fastest a user's `kill` can follow the answer, or
    // through the API on every other round.
    if (round % 2 == 0) {
      REQUIRE(kill(started->pid, SIGTERM) == 0);
    } else {
      REQUIRE(client::Signal(api, "/v1", std::to_string(started->pid), "TERM"));
    }
    REQUIRE(agent.Alive());
    batch.push_back(started->pid);
    if (batch.size() == kBatch || round == kRounds - 1) {
      // Every child died of the TERM it was sent (a child that had run the agent's handler
      // instead would still be sleeping), and the agent still answers.
      for (int pid : batch) {
        INFO("pid " << pid);
        std::optional<protocol::ProcessInfo> last;
        CHECK(testing::WaitFor([&] {
          auto info = client::GetProcess(api, "/v1", std::to_string(pid));
          if (info) last = *info;
          return info && !info->running;
        }));
        REQUIRE(last);
        CHECK(last->exit.signal == "TERM");
      }
      batch.clear();
      REQUIRE(agent.Alive());
    }
  }
  CHECK(api.Json(http::bhttp::verb::get, "/v1/info").has_value());
}
