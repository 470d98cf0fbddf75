// The timeline's events for what goes through the agent routes (controller/api/agent_events.h),
// built from what berthd saw: the request body, the answer's status, exit header and tail.
#include <catch2/catch.hpp>

#include "common/protocol/exec.h"
#include "controller/agent_client/ws_tap.h"
#include "controller/api/agent_events.h"

namespace berth::api {
namespace {

using http::bhttp::verb;

agent_client::ProxyTrace Trace(std::optional<std::string> body, int status, std::string tail,
                               std::string exit_header = {}, bool complete = true) {
  agent_client::ProxyTrace t;
  t.request_body = std::move(body);
  t.answer.status = status;
  t.answer.tail = std::move(tail);
  t.answer.exit_header = std::move(exit_header);
  t.answer.complete = complete;
  return t;
}

AgentCall Exec(int64_t ms) {
  AgentCall c;
  c.kind = "exec";
  c.method = verb::post;
  c.duration_ms = ms;
  return c;
}

}  // namespace

TEST_CASE("agent events: an exec in wait mode ends as the agent's exit header says", "[timeline]") {
  auto e = AgentEvent(Exec(1500), Trace(R"({"cmd":"make test","cwd":"/w"})", 200,
                                        R"(...,"stdout":"exit_code 0 lies here"})", "2"));
  REQUIRE(e);
  CHECK(e->type == "exec");
  CHECK(e->data["cmd"] == "make test");
  CHECK(e->data["exit_code"] == 2);  // the header, not whatever the output says
  CHECK(e->data["cwd"] == "/w");
  CHECK(e->data["duration_ms"] == 1500);
  CHECK(e->message == "`make test` exited 2 after 1.5 s");

  auto killed = AgentEvent(Exec(30000), Trace(R"({"cmd":"sleep 99"})", 200, "{}", "137 KILL timed_out"));
  REQUIRE(killed);
  CHECK(killed->data["signal"] == "KILL");
  CHECK(killed->data["timed_out"] == true);
  CHECK(killed->message == "`sleep 99` killed by KILL (its timeout) after 30.0 s");
}

TEST_CASE("agent events: a streamed exec ends as its last NDJSON line says; cut streams do not",
          "[timeline]") {
  std::string tail = "{\"type\":\"stdout\",\"data\":\"x\"}\n{\"type\":\"end\",\"exit_code\":0,\"duration_ms\":5}\n";
  auto e = AgentEvent(Exec(5), Trace(R"({"cmd":["ls","-l","my dir"]})", 200, tail));
  REQUIRE(e);
  CHECK(e->data["cmd"] == "ls -l 'my dir'");
  CHECK(e->data["exit_code"] == 0);
  // The client left mid-stream: the end, if it came, is not known.
  auto cut = AgentEvent(Exec(5), Trace(R"({"cmd":"tail -f x"})", 200, tail, {}, /*complete=*/false));
  REQUIRE(cut);
  CHECK_FALSE(cut->data.contains("exit_code"));
  CHECK(cut->message.find("left") != std::string::npos);
  // A last line that is not an end (a guest that stopped talking) gives no exit.
  auto odd = AgentEvent(Exec(5), Trace(R"({"cmd":"x"})", 200, "{\"type\":\"stdout\",\"data\":\"x\"}\n"));
  REQUIRE(odd);
  CHECK_FALSE(odd->data.contains("exit_code"));
}

TEST_CASE("agent events: background starts, refusals, bodies berthd did not read", "[timeline]") {
  auto bg = AgentEvent(Exec(3), Trace(R"({"cmd":"npm run dev","background":true})", 202, R"({"pid":42,"tag":null})"));
  REQUIRE(bg);
  CHECK(bg->data["background"] == true);
  CHECK(bg->data["pid"] == 42);
  CHECK(bg->message == "`npm run dev` started in the background");
  auto refused = AgentEvent(Exec(1), Trace(R"({"cmd":"x","user":"ghost"})", 404,
                                           R"({"error":{"code":"not_found","message":"no user 'ghost'"}})"));
  REQUIRE(refused);
  CHECK(refused->data["status"] == 404);
  CHECK(refused->message == "`x` refused (404): no user 'ghost'");
  auto streamed_body = AgentEvent(Exec(1), Trace(std::nullopt, 200, "", "0"));
  REQUIRE(streamed_body);
  CHECK(streamed_body->data["cmd"] == "(a command berthd did not read)");
  auto unanswered = AgentEvent(Exec(1), Trace(R"({"cmd":"x"})", 0, "", {}, false));
  REQUIRE(unanswered);
  CHECK(unanswered->message.find("did not answer") != std::string::npos);
}

TEST_CASE("agent events: commands are shown quoted and cut on a character boundary", "[timeline]") {
  CHECK(CommandLine(nlohmann::json::array({"echo", "it's", ""})) == R"(echo 'it'\''s' '')");
  CHECK(CommandLine(nlohmann::json::array({"a", 1})) == "(not a command)");
  CHECK(CommandLine(nlohmann::json::object()) == "(not a command)");
  std::string long_cmd(kMaxCommandChars - 1, 'x');
  long_cmd += "é";  // two bytes across the cut
  std::string shown = CommandLine(long_cmd);
  CHECK(shown == std::string(kMaxCommandChars - 1, 'x') + "…");
}

TEST_CASE("agent events: file changes that succeeded, never reads or failures", "[timeline]") {
  AgentCall put;
  put.kind = "files";
  put.method = verb::put;
  put.path = "/workspace/a.txt";
  put.content_length = 12;
  auto written = AgentEvent(put, Trace(std::nullopt, 200, "{}"));
  REQUIRE(written);
  CHECK(written->type == "file_written");
  CHECK(written->data["bytes"] == 12);
  put.archive = true;
  CHECK(AgentEvent(put, Trace(std::nullopt, 200, "{}"))->type == "files_extracted");
  CHECK_FALSE(AgentEvent(put, Trace(std::nullopt, 507, "{}")));

  AgentCall move = put;
  move.method = verb::post;
  move.op = "move";
  move.to = "/workspace/b.txt";
  auto moved = AgentEvent(move, Trace(std::nullopt, 200, "{}"));
  REQUIRE(moved);
  CHECK(moved->type == "file_moved");
  CHECK(moved->data["to"] == "/workspace/b.txt");
  move.op = "frobnicate";
  CHECK_FALSE(AgentEvent(move, Trace(std::nullopt, 200, "{}")));

  AgentCall get = put;
  get.method = verb::get;
  CHECK_FALSE(AgentEvent(get, Trace(std::nullopt, 200, "{}")));
  AgentCall processes;
  processes.kind = "processes";
  processes.method = verb::post;
  CHECK_FALSE(AgentEvent(processes, Trace(std::nullopt, 200, "{}")));

  AgentCall session;
  session.kind = "session";
  session.duration_ms = 65000;
  CHECK(AgentEvent(session, Trace(std::nullopt, 101, ""))->message ==
        "an interactive session, 65.0 s (the connection closed before it ended)");
  CHECK_FALSE(AgentEvent(session, Trace(std::nullopt, 404, "")));
  auto ran = Trace(std::nullopt, 101, "");
  ran.answer.first_client_text = R"({"type":"start","cmd":["make","-j2"],"pty":{"cols":80,"rows":24},"cwd":"/w"})";
  ran.answer.last_agent_text = "{\"type\":\"end\",\"exit_code\":2}\n";
  auto made = AgentEvent(session, ran);
  REQUIRE(made);
  CHECK(made->message == "`make -j2` exited 2 after 65.0 s");
  CHECK(made->data["cmd"] == "make -j2");
  CHECK(made->data["pty"] == true);
  CHECK(made->data["cwd"] == "/w");
  ran.answer.first_client_text = R"({"type":"start"})";
  CHECK(AgentEvent(session, ran)->data["cmd"] == "(login shell)");
  session.attach = "dev-server";
  CHECK(AgentEvent(session, ran)->message == "a session attached to dev-server exited 2 after 65.0 s");
}

TEST_CASE("exit header: written by the agent, read back by berthd, anything else refused", "[timeline]") {
  protocol::ExitStatus exit;
  CHECK(protocol::ExitHeaderValue(exit).empty());
  exit.exit_code = 137;
  exit.signal = "KILL";
  exit.timed_out = true;
  auto round = protocol::ParseExitHeader(protocol::ExitHeaderValue(exit));
  REQUIRE(round);
  CHECK(round->exit_code == 137);
  CHECK(round->signal == "KILL");
  CHECK(round->timed_out);
  for (std::string bad : {"", "x", "-1", "256", "0 kill", "0 KILL TERM", "0  ", "1 timed_out extra"}) {
    INFO(bad);
    CHECK_FALSE(protocol::ParseExitHeader(bad));
  }
}

namespace {

// A WebSocket frame as a client (masked) or a server (not) sends it.
std::string Frame(uint8_t first_byte, std::string_view payload, bool masked) {
  std::string out(1, static_cast<char>(first_byte));
  uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    out.push_back(static_cast<char>(mask_bit | payload.size()));
  } else if (payload.size() <= 0xffff) {
    out.push_back(static_cast<char>(mask_bit | 126));
    out.push_back(static_cast<char>(payload.size() >> 8));
    out.push_back(static_cast<char>(payload.size() & 0xff));
  } else {
    out.push_back(static_cast<char>(mask_bit | 127));
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xff));
  }
  const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
  if (masked) out.append(reinterpret_cast<const char*>(key), 4);
  for (size_t i = 0; i < payload.size(); ++i) {
    out.push_back(masked ? static_cast<char>(static_cast<uint8_t>(payload[i]) ^ key[i % 4]) : payload[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("ws tap: the first and last whole text messages, however the bytes are cut", "[timeline]") {
  std::string stream = Frame(0x81, R"({"type":"start","cmd":"ls"})", true) + Frame(0x82, "binary stdin", true) +
                       Frame(0x89, "ping", true) + Frame(0x81, std::string(70000, 'x'), true) +  // too big: skipped
                       Frame(0x01, "frag", true) + Frame(0x80, "ment", true) +                     // fragmented: skipped
                       Frame(0x81, "last one", true) + Frame(0x88, "", true);
  for (size_t cut : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, stream.size()}) {
    agent_client::WsMessageTap tap;
    for (size_t at = 0; at < stream.size(); at += cut) tap.Feed(std::string_view(stream).substr(at, cut));
    INFO(cut);
    REQUIRE(tap.first_text());
    CHECK(*tap.first_text() == R"({"type":"start","cmd":"ls"})");
    REQUIRE(tap.last_text());
    CHECK(*tap.last_text() == "last one");
    CHECK_FALSE(tap.broken());
  }
  // Unmasked (the agent's side), and a compressed message (RSV1) is not read as text.
  agent_client::WsMessageTap server;
  server.Feed(Frame(0x81, "plain", false) + Frame(0xC1, "deflated?", false));
  CHECK(*server.last_text() == "plain");
  // A 64-bit length with its top bit set is no frame: the tap stops, and keeps what it had.
  agent_client::WsMessageTap hostile;
  std::string bad = Frame(0x81, "ok", false);
  bad += std::string("\x81\x7f\x80\x00\x00\x00\x00\x00\x00\x00", 10);
  hostile.Feed(bad + std::string(100, 'z'));
  CHECK(hostile.broken());
  CHECK(*hostile.last_text() == "ok");
}

}  // namespace berth::api
