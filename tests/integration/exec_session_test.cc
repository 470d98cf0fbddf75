// Interactive sessions over GET /v1/exec/ws against the real agent: PTYs (a real controlling
// terminal, resize), pipes with stdout and stderr channels, signals, EOF, attach and reattach.
#include <unistd.h>

#include <chrono>
#include <regex>

#include <catch2/catch.hpp>

#include "common/client/exec.h"
#include "tests/support/test_agent.h"

using namespace berth;
using client::ExecSession;

namespace {

constexpr auto kWait = std::chrono::seconds(10);

// Reads output until `out` (everything so far) matches `pattern`; false on end or timeout.
bool ReadUntil(ExecSession& session, const std::string& pattern, std::string& out,
               std::string* err = nullptr) {
  std::regex re(pattern);
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!std::regex_search(out, re)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    auto event = session.ReadEvent(left);
    if (!event) return false;
    if (event->kind == ExecSession::Event::Kind::kStdout) out += event->data;
    if (event->kind == ExecSession::Event::Kind::kStderr && err != nullptr) *err += event->data;
    if (event->kind == ExecSession::Event::Kind::kEnd) return false;
  }
  return true;
}

protocol::SessionStart Start(protocol::Command cmd, bool pty) {
  protocol::SessionStart start;
  start.cmd = std::move(cmd);
  if (pty) start.pty = protocol::PtySize(80, 24);
  return start;
}

std::string Shell() { return access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh"; }

}  // namespace

TEST_CASE("a PTY session is a real terminal that resizes", "[session]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto start = Start(std::vector<std::string>{Shell(), "--norc"}, true);
  if (Shell() == "/bin/sh") start.cmd = std::vector<std::string>{"/bin/sh"};
  start.env["PS1"] = "$ ";
  auto session = client::OpenSession(client, "/v1", start);
  REQUIRE(session);
  CHECK((*session)->pid() > 0);

  std::string out;
  REQUIRE((*session)->WriteStdin("tty; echo TERM=$TERM\n"));
  bool is_tty = ReadUntil(**session, R"(/dev/pts/\d+\s+TERM=xterm-256color)", out);
  INFO(out);
  CHECK(is_tty);

  REQUIRE((*session)->Resize(100, 40));
  out.clear();
  REQUIRE((*session)->WriteStdin("stty size\n"));
  bool resized = ReadUntil(**session, R"((^|[^0-9])40 100\r?\n)", out);
  INFO(out);
  CHECK(resized);

  auto info = client::GetProcess(client, "/v1", std::to_string((*session)->pid()));
  REQUIRE(info);
  CHECK(info->pty);
  CHECK(info->running);

  REQUIRE((*session)->WriteStdin("exit 3\n"));
  auto end = (*session)->WaitEnd(kWait);
  REQUIRE(end);
  CHECK(end->exit_code == 3);
}

TEST_CASE("a pipe session has stdout and stderr channels and EOF", "[session]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto session = client::OpenSession(client, "/v1", Start("echo err >&2; cat", false));
  REQUIRE(session);
  std::string out, err;
  CHECK(ReadUntil(**session, "^$", out, &err));  // nothing needed yet
  REQUIRE((*session)->WriteStdin("hello\n"));
  CHECK(ReadUntil(**session, "hello\n", out, &err));
  REQUIRE((*session)->CloseStdin());
  // Every event up to the end, stderr included: "err\n" may come at any point before it.
  std::optional<protocol::ExitStatus> end;
  while (!end) {
    auto event = (*session)->ReadEvent(kWait);
    REQUIRE(event);
    REQUIRE(event->kind != ExecSession::Event::Kind::kError);
    if (event->kind == ExecSession::Event::Kind::kStdout) out += event->data;
    if (event->kind == ExecSession::Event::Kind::kStderr) err += event->data;
    if (event->kind == ExecSession::Event::Kind::kEnd) end = event->exit;
  }
  CHECK(end->exit_code == 0);
  CHECK(out == "hello\n");
  CHECK(err == "err\n");
}

TEST_CASE("a session forwards signals to the process group", "[session]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto session = client::OpenSession(client, "/v1", Start("sleep 1000 & sleep 1000", true));
  REQUIRE(session);
  REQUIRE((*session)->Signal("KILL"));
  auto end = (*session)->WaitEnd(kWait);
  REQUIRE(end);
  CHECK(end->signal == "KILL");
}

TEST_CASE("sessions that cannot start say why", "[session]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  auto bad_user = Start("true", false);
  bad_user.user = "berth-no-such-user";
  auto refused = client::OpenSession(client, "/v1", bad_user);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kNotFound);
  auto no_such = client::AttachSession(client, "/v1", "no-such-tag");
  REQUIRE_FALSE(no_such);
  CHECK(no_such.error().code == ErrorCode::kNotFound);
}

TEST_CASE("attach replays output and survives a dropped WebSocket", "[session]") {
  testing::TestAgent agent;
  auto client = agent.Client();
  protocol::ExecRequest bg;
  bg.cmd = "echo ready; cat";
  bg.tag = "attachme";
  auto started = client::StartBackground(client, "/v1", bg);
  REQUIRE(started);

  std::string out;
  {
    auto first = client::AttachSession(client, "/v1", "attachme");
    REQUIRE(first);
    CHECK((*first)->pid() == started->pid);
    CHECK(ReadUntil(**first, "ready\n", out));
    REQUIRE((*first)->WriteStdin("one\n"));
    CHECK(ReadUntil(**first, "one\n", out));
    // Dropped without a close handshake: the process must not notice.
  }
  auto info = client::GetProcess(client, "/v1", "attachme");
  REQUIRE(info);
  CHECK(info->running);

  auto second = client::AttachSession(client, "/v1", std::to_string(started->pid));
  REQUIRE(second);
  out.clear();
  CHECK(ReadUntil(**second, "ready\none\n", out));  // the replay
  REQUIRE((*second)->WriteStdin("two\n"));
  REQUIRE((*second)->CloseStdin());
  auto end = (*second)->WaitEnd(kWait, &out);
  REQUIRE(end);
  CHECK(end->exit_code == 0);
  CHECK(out == "ready\none\ntwo\n");
}
