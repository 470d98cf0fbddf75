// The process table against the real agent: background processes, listing, output replay and
// follow with offsets, stdin, signals, kill, tags, and reattaching after a streaming client
// went away.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/wait.h"
#include "common/client/exec.h"
#include "tests/support/test_agent.h"

using namespace berth;
using protocol::ExecEvent;
using protocol::ExecRequest;

namespace {

ExecRequest Cmd(protocol::Command cmd, std::optional<std::string> tag = std::nullopt) {
  ExecRequest req;
  req.cmd = std::move(cmd);
  req.tag = std::move(tag);
  return req;
}

using berth::testing::WaitFor;

// The stdout buffered for `id` right now (no follow).
std::string BufferedStdout(client::ApiClient& client, const std::string& id) {
  std::string out;
  auto r = client::ProcessOutput(client, "/v1", id, {}, [&](const ExecEvent& e) -> Status {
    if (e.type == ExecEvent::Type::kStdout) out += e.data;
    return {};
  });
  return r ? out : "<error: " + r.error().message + ">";
}

}  // namespace

TEST_CASE("background process: list, get, stdin, output replay and follow", "[process]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto started = client::StartBackground(
      client, "/v1", Cmd("while read line; do echo got:$line; done; echo bye >&2", "worker"));
  REQUIRE(started);
  CHECK(started->tag == "worker");
  std::string pid = std::to_string(started->pid);

  auto by_pid = client::GetProcess(client, "/v1", pid);
  REQUIRE(by_pid);
  CHECK(by_pid->running);
  CHECK(by_pid->tag == "worker");
  CHECK(by_pid->cmd == "while read line; do echo got:$line; done; echo bye >&2");
  CHECK(by_pid->user == testing::CurrentUserName());
  CHECK_FALSE(by_pid->pty);
  CHECK(by_pid->started_at.ends_with("Z"));
  CHECK_FALSE(by_pid->ended_at);
  auto by_tag = client::GetProcess(client, "/v1", "worker");
  REQUIRE(by_tag);
  CHECK(by_tag->pid == started->pid);
  auto list = client::ListProcesses(client, "/v1");
  REQUIRE(list);
  CHECK(std::any_of(list->begin(), list->end(),
                    [&](const auto& p) { return p.pid == started->pid && p.running; }));

  REQUIRE(client::SendStdin(client, "/v1", "worker", "a\n"));
  CHECK(WaitFor([&] { return BufferedStdout(client, "worker") == "got:a\n"; }));
  REQUIRE(client::SendStdin(client, "/v1", pid, "b\n", /*close=*/true));

  std::string out, err;
  std::vector<uint64_t> offsets;
  auto end = client::ProcessOutput(client, "/v1", "worker", {.follow = true},
                                   [&](const ExecEvent& e) -> Status {
                                     if (e.type == ExecEvent::Type::kStdout) {
                                       offsets.push_back(e.offset.value_or(999));
                                       out += e.data;
                                     }
                                     if (e.type == ExecEvent::Type::kStderr) err += e.data;
                                     return {};
                                   });
  REQUIRE(end);
  REQUIRE(*end);
  CHECK((*end)->exit_code == 0);
  CHECK(out == "got:a\ngot:b\n");
  CHECK(err == "bye\n");
  REQUIRE_FALSE(offsets.empty());
  CHECK(offsets[0] == 0);

  // Replay from an offset skips what was seen; the end event comes since it exited.
  std::string tail;
  auto replay = client::ProcessOutput(client, "/v1", pid,
                                      {.follow = false, .stdout_offset = 8, .stderr_offset = 4},
                                      [&](const ExecEvent& e) -> Status {
                                        if (e.type != ExecEvent::Type::kKeepalive) tail += e.data;
                                        return {};
                                      });
  REQUIRE(replay);
  REQUIRE(*replay);
  CHECK(tail == "t:b\n");  // stdout from 8 ("got:a\n" is 6 bytes); stderr: all 4 skipped

  auto done = client::GetProcess(client, "/v1", "worker");
  REQUIRE(done);
  CHECK_FALSE(done->running);
  CHECK(done->exit.exit_code == 0);
  CHECK(done->ended_at);
  CHECK(done->stdout_bytes == 12);

  auto late = client::SendStdin(client, "/v1", "worker", "c\n");
  REQUIRE_FALSE(late);
  CHECK(late.error().code == ErrorCode::kFailedPrecondition);
}

TEST_CASE("signals go to the process group; kill answers the ended process", "[process]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto sleeper = client::StartBackground(client, "/v1", Cmd("sleep 1000", "sleeper"));
  REQUIRE(sleeper);
  auto bad = client::Signal(client, "/v1", "sleeper", "NOPE");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ErrorCode::kInvalidArgument);
  REQUIRE(client::Signal(client, "/v1", "sleeper", "TERM"));
  CHECK(WaitFor([&] {
    auto p = client::GetProcess(client, "/v1", "sleeper");
    return p && !p->running;
  }));
  auto ended = client::GetProcess(client, "/v1", "sleeper");
  REQUIRE(ended);
  CHECK(ended->exit.signal == "TERM");
  auto again = client::Signal(client, "/v1", "sleeper", "TERM");
  REQUIRE_FALSE(again);
  CHECK(again.error().code == ErrorCode::kFailedPrecondition);

  // A group: the shell and its child both die.
  auto group = client::StartBackground(client, "/v1", Cmd("sleep 1000 & sleep 1000; echo no"));
  REQUIRE(group);
  auto killed = client::Kill(client, "/v1", std::to_string(group->pid));
  REQUIRE(killed);
  CHECK_FALSE(killed->running);
  CHECK(killed->exit.signal == "KILL");
  CHECK(BufferedStdout(client, std::to_string(group->pid)).empty());
}

TEST_CASE("tags are unique among running processes and name them", "[process]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto first = client::StartBackground(client, "/v1", Cmd("sleep 1000", "dup"));
  REQUIRE(first);
  auto second = client::StartBackground(client, "/v1", Cmd("sleep 1000", "dup"));
  REQUIRE_FALSE(second);
  CHECK(second.error().code == ErrorCode::kAlreadyExists);
  auto wait_mode = client::Exec(client, "/v1", Cmd("true", "dup"));
  REQUIRE_FALSE(wait_mode);
  CHECK(wait_mode.error().code == ErrorCode::kAlreadyExists);

  REQUIRE(client::Kill(client, "/v1", "dup"));
  auto third = client::StartBackground(client, "/v1", Cmd("sleep 1000", "dup"));
  REQUIRE(third);
  CHECK(third->pid != first->pid);
  auto found = client::GetProcess(client, "/v1", "dup");
  REQUIRE(found);
  CHECK(found->pid == third->pid);  // the running one wins over the ended one
  CHECK(found->running);
  REQUIRE(client::Kill(client, "/v1", "dup"));
}

TEST_CASE("unknown processes are 404 everywhere", "[process]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto get = client::GetProcess(client, "/v1", "nobody-here");
  REQUIRE_FALSE(get);
  CHECK(get.error().code == ErrorCode::kNotFound);
  CHECK(client::SendStdin(client, "/v1", "999999999", "x").error().code == ErrorCode::kNotFound);
  CHECK(client::Signal(client, "/v1", "nobody-here", "TERM").error().code == ErrorCode::kNotFound);
  CHECK(client::Kill(client, "/v1", "nobody-here").error().code == ErrorCode::kNotFound);
  auto out = client::ProcessOutput(client, "/v1", "nobody-here", {}, {});
  REQUIRE_FALSE(out);
  CHECK(out.error().code == ErrorCode::kNotFound);
}

TEST_CASE("a streamed process outlives its client and can be followed again", "[process]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto flag = agent.dir() / "go-on";
  auto req = Cmd(fmt::format("echo one; while [ ! -e {} ]; do sleep 0.02; done; echo two",
                             flag.string()),
                 "reattach");
  int pid = 0;
  auto cut = client::ExecStream(client, "/v1", req, [&](const ExecEvent& e) -> Status {
    if (e.type == ExecEvent::Type::kStart) pid = e.pid;
    if (e.type == ExecEvent::Type::kStdout) return Fail(ErrorCode::kInternal, "the test hangs up");
    return {};
  });
  REQUIRE_FALSE(cut);
  REQUIRE(pid > 0);
  auto running = client::GetProcess(client, "/v1", "reattach");
  REQUIRE(running);
  CHECK(running->running);
  CHECK(running->pid == pid);

  std::ofstream(flag).put('x');
  std::string out;
  auto end = client::ProcessOutput(client, "/v1", "reattach", {.follow = true},
                                   [&](const ExecEvent& e) -> Status {
                                     if (e.type == ExecEvent::Type::kStdout) out += e.data;
                                     return {};
                                   });
  REQUIRE(end);
  REQUIRE(*end);
  CHECK((*end)->exit_code == 0);
  CHECK(out == "one\ntwo\n");
}
