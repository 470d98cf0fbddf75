// POST /v1/exec in wait and NDJSON modes against the real agent: argv and shell commands,
// environment, cwd, stdin, exit codes and signals, output caps, missing binaries, users,
// timeouts that kill the whole process group, and streaming order.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/support/wait.h"
#include "common/client/exec.h"
#include "guest-agent/process_spawn.h"
#include "tests/support/test_agent.h"
#include "tests/support/skip.h"

using namespace berth;
using protocol::ExecEvent;
using protocol::ExecRequest;

namespace {

ExecRequest Cmd(protocol::Command cmd) {
  ExecRequest req;
  req.cmd = std::move(cmd);
  return req;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True when `pid` no longer runs (gone, or a zombie waiting for whoever inherited it).
bool ProcessGone(int pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

using berth::testing::WaitFor;

}  // namespace

TEST_CASE("exec runs an argv and a shell string", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();

  auto argv = client::Exec(client, "/v1", Cmd(std::vector<std::string>{"echo", "hello", "a b"}));
  REQUIRE(argv);
  CHECK(argv->stdout_data == "hello a b\n");
  CHECK(argv->stderr_data.empty());
  CHECK(argv->exit.exit_code == 0);
  CHECK_FALSE(argv->exit.signal);
  CHECK_FALSE(argv->exit.timed_out);
  CHECK_FALSE(argv->truncated);
  CHECK(argv->pid > 0);

  auto shell = client::Exec(client, "/v1", Cmd("echo out; echo err >&2; exit 3"));
  REQUIRE(shell);
  CHECK(shell->stdout_data == "out\n");
  CHECK(shell->stderr_data == "err\n");
  CHECK(shell->exit.exit_code == 3);
}

TEST_CASE("exec sets env and cwd over a clean environment", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  setenv("BERTH_TEST_LEAK", "leaked", 1);
  auto req = Cmd("echo \"$FOO|$HOME|$PATH|$LANG|${BERTH_TEST_LEAK:-clean}|${USER:-unset}\"; pwd");
  req.env["FOO"] = "bar baz";
  req.env["USER"] = std::nullopt;  // null removes a variable
  req.cwd = agent.dir().string();
  auto r = client::Exec(client, "/v1", req);
  REQUIRE(r);
  auto home = testing::CurrentUserName() == "root" ? "/root" : std::string(getenv("HOME"));
  CHECK(r->stdout_data ==
        fmt::format("bar baz|{}|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|"
                    "C.UTF-8|clean|unset\n{}\n",
                    home, agent.dir().string()));

  auto missing = Cmd("true");
  missing.cwd = (agent.dir() / "nope").string();
  auto err = client::Exec(client, "/v1", missing);
  REQUIRE_FALSE(err);
  CHECK(err.error().code == ErrorCode::kNotFound);
  INFO(err.error().message);
  CHECK(err.error().message.find("nope") != std::string::npos);
}

TEST_CASE("exec takes defaults from the Berth-Env header, under its own env", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  client::Headers env_header = {
      {std::string(protocol::kDefaultEnvHeader),
       protocol::EnvHeaderValue({{"FROM_HEADER", "h\u00e9"}, {"BOTH", "header"}})}};
  CHECK(env_header[0].second.find("\\u00e9") != std::string::npos);  // ASCII on the wire
  nlohmann::json body = {{"cmd", "echo \"$FROM_HEADER|$BOTH\""}, {"env", {{"BOTH", "request"}}}};
  auto r = client.Json(http::bhttp::verb::post, "/v1/exec", body, env_header);
  REQUIRE(r);
  CHECK((*r)["stdout"] == "h\u00e9|request\n");

  for (std::string bad : {"not json", "[1]", "{\"A\": 1}", "{\"A=B\": \"x\"}"}) {
    INFO(bad);
    auto refused = client.Json(http::bhttp::verb::post, "/v1/exec", body,
                               {{std::string(protocol::kDefaultEnvHeader), bad}});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    // The WebSocket session refuses it before the upgrade.
    auto ws = client.OpenWebSocket("/v1/exec/ws", {{std::string(protocol::kDefaultEnvHeader), bad}});
    REQUIRE_FALSE(ws);
    CHECK(ws.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("exec feeds stdin and closes it", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto req = Cmd(std::vector<std::string>{"sh", "-c", "wc -c; cat"});
  req.stdin_data = "12345";
  auto r = client::Exec(client, "/v1", req);
  REQUIRE(r);
  CHECK(r->stdout_data == "5\n");
  CHECK(r->exit.exit_code == 0);

  // Without stdin the process reads /dev/null: an immediate end, not a hang.
  auto none = client::Exec(client, "/v1", Cmd("cat; echo done"));
  REQUIRE(none);
  CHECK(none->stdout_data == "done\n");
}

TEST_CASE("exec reports exit codes and deaths by signal", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto r = client::Exec(client, "/v1", Cmd("kill -TERM $$"));
  REQUIRE(r);
  CHECK(r->exit.signal == "TERM");
  CHECK(r->exit.exit_code == 128 + SIGTERM);
  auto seven = client::Exec(client, "/v1", Cmd(std::vector<std::string>{"sh", "-c", "exit 7"}));
  REQUIRE(seven);
  CHECK(seven->exit.exit_code == 7);
  CHECK_FALSE(seven->exit.signal);
}

TEST_CASE("exec caps output and says it truncated", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto req = Cmd("head -c 300000 /dev/zero | tr '\\0' x; echo tail >&2");
  req.max_output_bytes = 1000;
  auto r = client::Exec(client, "/v1", req);
  REQUIRE(r);
  CHECK(r->stdout_data == std::string(1000, 'x'));
  CHECK(r->stderr_data == "tail\n");
  CHECK(r->truncated);
  CHECK(r->exit.exit_code == 0);

  auto too_big = Cmd("true");
  too_big.max_output_bytes = 1ull << 40;
  auto err = client::Exec(client, "/v1", too_big);
  REQUIRE_FALSE(err);
  CHECK(err.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("exec of a missing binary is exit code 127 with a message", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto r = client::Exec(client, "/v1", Cmd(std::vector<std::string>{"berth-no-such-binary", "x"}));
  REQUIRE(r);
  CHECK(r->exit.exit_code == 127);
  CHECK(r->stderr_data.find("berth-no-such-binary") != std::string::npos);
  CHECK(r->stderr_data.find("not found") != std::string::npos);

  // The same in stream mode.
  std::string err;
  auto end = client::ExecStream(client, "/v1", Cmd(std::vector<std::string>{"/no/such/thing"}),
                                [&](const ExecEvent& e) -> Status {
                                  if (e.type == ExecEvent::Type::kStderr) err += e.data;
                                  return {};
                                });
  REQUIRE(end);
  CHECK(end->exit_code == 127);
  CHECK(err.find("/no/such/thing") != std::string::npos);
}

TEST_CASE("exec rejects bad commands", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  for (const char* body : {R"({"cmd":""})", R"({"cmd":[]})", R"({"cmd":[1,2]})", R"({})",
                           R"({"cmd":{"a":1}})", R"({"cmd":"x","tag":"123"})"}) {
    auto r = client.Request(http::bhttp::verb::post, "/v1/exec", body, "application/json");
    REQUIRE(r);
    CHECK(r->status == 400);
  }
}

TEST_CASE("exec runs as another user; an unknown user is 404", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto unknown = Cmd("id -u");
  unknown.user = "berth-no-such-user";
  auto err = client::Exec(client, "/v1", unknown);
  REQUIRE_FALSE(err);
  CHECK(err.error().code == ErrorCode::kNotFound);

  if (geteuid() != 0) {
    BERTH_SKIP("needs root to run as nobody");
  }
  auto req = Cmd("id -u; pwd; echo $USER");
  req.user = "nobody";
  auto r = client::Exec(client, "/v1", req);
  REQUIRE(r);
  CHECK(r->stdout_data == "65534\n/\nnobody\n");
}

TEST_CASE("a timeout kills the whole process group", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto pid_file = agent.dir() / "grandchild.pid";
  auto req = Cmd(fmt::format("sleep 1000 & echo $! > {}; sleep 1000", pid_file.string()));
  req.timeout_ms = 500;
  auto started = std::chrono::steady_clock::now();
  auto r = client::Exec(client, "/v1", req);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(r);
  CHECK(r->exit.timed_out);
  CHECK(r->exit.signal == "KILL");
  CHECK(took < std::chrono::seconds(5));
  int grandchild = std::stoi(ReadFile(pid_file));
  REQUIRE(grandchild > 0);
  CHECK(WaitFor([&] { return ProcessGone(grandchild); }));
}

TEST_CASE("NDJSON streaming delivers output before the process ends", "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto flag = agent.dir() / "go";
  auto req = Cmd(fmt::format(
      "echo first; while [ ! -e {} ]; do sleep 0.02; done; echo second >&2; exit 4",
      flag.string()));
  req.tag = "streamer";
  std::vector<ExecEvent> events;
  auto end = client::ExecStream(client, "/v1", req, [&](const ExecEvent& e) -> Status {
    events.push_back(e);
    // The process is still waiting for the file: output really streams.
    if (e.type == ExecEvent::Type::kStdout) std::ofstream(flag).put('x');
    return {};
  });
  REQUIRE(end);
  CHECK(end->exit_code == 4);
  std::vector<ExecEvent::Type> types;
  for (const auto& e : events) {
    if (e.type != ExecEvent::Type::kKeepalive) types.push_back(e.type);
  }
  REQUIRE(types.size() == 4);
  CHECK(types[0] == ExecEvent::Type::kStart);
  CHECK(events[0].pid > 0);
  CHECK(events[0].tag == "streamer");
  CHECK(types[1] == ExecEvent::Type::kStdout);
  CHECK(types[2] == ExecEvent::Type::kStderr);
  CHECK(types[3] == ExecEvent::Type::kEnd);
  CHECK(events[1].data == "first\n");
  CHECK(events[1].offset == 0u);
  CHECK(events[2].data == "second\n");
}

TEST_CASE("NDJSON carries bytes that are not UTF-8 as base64, and split characters whole",
          "[exec]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  // "é" split across two writes, then invalid bytes.
  auto req = Cmd(R"(printf '\303'; sleep 0.1; printf '\251\n'; sleep 0.1; printf '\377\376')");
  std::string out;
  int events = 0;
  auto end = client::ExecStream(client, "/v1", req, [&](const ExecEvent& e) -> Status {
    if (e.type == ExecEvent::Type::kStdout) {
      out += e.data;
      ++events;
    }
    return {};
  });
  REQUIRE(end);
  CHECK(out == "\xc3\xa9\n\xff\xfe");
  CHECK(events >= 2);
  // The raw line shows how it travelled.
  auto raw = client.Request(http::bhttp::verb::post, "/v1/exec", req.ToJson().dump(),
                            "application/json", {{"Accept", "application/x-ndjson"}});
  REQUIRE(raw);
  CHECK(raw->body.find("\"data\":\"\xc3\xa9\\n\"") != std::string::npos);
  CHECK(raw->body.find("\"data_b64\":\"//4=\"") != std::string::npos);
}

TEST_CASE("the agent raises its own file limit to the hard one; what it starts keeps the soft one",
          "[exec]") {
  struct rlimit original {};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &original) == 0);
  // Started as systemd starts it: a soft limit below the hard one. berth-agent's main() raises
  // it first thing (the agent is in-process here, so the test does what main() does).
  struct rlimit started = original;
  started.rlim_cur = std::min<rlim_t>(512, original.rlim_max);
  REQUIRE(started.rlim_cur < started.rlim_max);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &started) == 0);
  struct Restore {
    struct rlimit limit;
    ~Restore() {
      setrlimit(RLIMIT_NOFILE, &limit);
      (void)agent::RaiseOwnFileLimit();  // children get the process's limits again
    }
  } restore{original};
  auto raised = agent::RaiseOwnFileLimit();
  REQUIRE(raised);
  CHECK(*raised == started.rlim_max);
  struct rlimit now {};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
  CHECK(now.rlim_cur == started.rlim_max);

  testing::TestAgent agent;
  auto client = agent.Client();
  auto r = client::Exec(client, "/v1", Cmd("ulimit -Sn; ulimit -Hn"));
  REQUIRE(r);
  CHECK(r->stdout_data == fmt::format("{}\n{}\n", started.rlim_cur, started.rlim_max));
}
