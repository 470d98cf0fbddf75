// One timeline per workspace (issue 15): what goes through the API is on it with who did it
// (each exec with its command, exit code and duration; file changes; lifecycle calls), and a
// reader picks by type, actor and time, in pages and live. berthd in-process on libvirt's test
// driver with a real berth-agent per workspace as a host process.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>

#include "common/client/berth_client.h"
#include "common/client/exec.h"
#include "common/client/files.h"
#include "common/unix_time.h"
#include "tests/support/mcp_exchange.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::TestBerthd;
using testing::WaitFor;

TestBerthd& Berthd() {
  static TestBerthd berthd;
  return berthd;
}

std::string Running(client::ApiClient& api, const std::string& name) {
  auto made = api.Json(verb::post, "/v1/workspaces", json{{"name", name}});
  REQUIRE(made.has_value());
  std::string id = (*made)["id"];
  auto running = api.Json(verb::post, "/v1/workspaces/" + id + "/wait",
                          json{{"state", "running"}, {"timeout_s", 30}});
  INFO((running ? running->dump() : running.error().message));
  REQUIRE(running.has_value());
  return id;
}

json Events(client::ApiClient& api, const std::string& id, const std::string& query) {
  auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000" + query);
  INFO(query << ": " << (events ? events->dump() : events.error().message));
  REQUIRE(events.has_value());
  return (*events)["events"];
}

std::vector<std::string> Types(const json& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["type"]);
  return out;
}

std::string KeyIdOf(client::ApiClient& api) {
  auto me = api.Json(verb::get, "/v1/me");
  REQUIRE(me.has_value());
  return (*me)["key"]["id"];
}

}  // namespace

TEST_CASE("berthd's timeline: each exec with its command, exit code and duration, file changes "
          "and lifecycle calls, each with the key that made it", "[berthd][timeline]") {
  auto admin = Berthd().Admin();
  std::string id = Running(admin, "timeline");
  std::string scope = "/v1/workspaces/" + id;
  const std::string admin_actor = KeyIdOf(admin);
  auto minted = admin.Json(verb::post, "/v1/keys", json{{"scope", "write"}, {"name", "agent"}});
  REQUIRE(minted.has_value());
  auto agent = Berthd().WithKey((*minted)["key"]);
  const std::string agent_actor = KeyIdOf(agent);
  REQUIRE(agent_actor != admin_actor);

  // The create and the start it asked for are the admin's; the boot finishing is berthd's.
  auto created = Events(admin, id, "&type=created");
  REQUIRE(created.size() == 1);
  CHECK(created[0]["actor"] == admin_actor);
  auto running = Events(admin, id, "&type=running,started");
  REQUIRE_FALSE(running.empty());
  CHECK(running.back()["actor"] == "system");

  // Wait mode (the agent's exit header), NDJSON (its last line), background (202), refused.
  protocol::ExecRequest waited;
  waited.cmd = std::string("sleep 0.3; exit 3");
  waited.cwd = "/tmp";
  auto result = client::Exec(agent, scope, waited);
  REQUIRE(result.has_value());
  REQUIRE(result->exit.exit_code == 3);
  protocol::ExecRequest streamed;
  streamed.cmd = std::vector<std::string>{"sh", "-c", "echo hi; kill -TERM $$"};
  auto ended = client::ExecStream(agent, scope, streamed, [](const protocol::ExecEvent&) { return Status{}; });
  REQUIRE(ended.has_value());
  protocol::ExecRequest background;
  background.cmd = std::string("sleep 0.1");
  background.background = true;
  REQUIRE(agent.Json(verb::post, scope + "/exec", background.ToJson()).has_value());
  auto refused = agent.Json(verb::post, scope + "/exec", json{{"cmd", "true"}, {"user", "nobody-here"}});
  REQUIRE_FALSE(refused.has_value());

  auto execs = Events(admin, id, "&type=exec");
  REQUIRE(execs.size() == 4);
  for (const auto& e : execs) CHECK(e["actor"] == agent_actor);
  CHECK(execs[0]["data"]["cmd"] == "sleep 0.3; exit 3");
  CHECK(execs[0]["data"]["exit_code"] == 3);
  CHECK(execs[0]["data"]["cwd"] == "/tmp");
  CHECK(execs[0]["data"]["duration_ms"].get<int64_t>() >= 300);
  CHECK(execs[0]["message"].get<std::string>().starts_with("`sleep 0.3; exit 3` exited 3 after"));
  CHECK(execs[1]["data"]["cmd"] == "sh -c 'echo hi; kill -TERM $$'");
  CHECK(execs[1]["data"]["signal"] == "TERM");
  CHECK(execs[1]["data"]["exit_code"] == 128 + 15);
  CHECK(execs[2]["data"]["background"] == true);
  CHECK(execs[2]["data"]["pid"].is_number_integer());
  CHECK_FALSE(execs[2]["data"].contains("exit_code"));
  CHECK(execs[3]["data"]["status"].get<int>() >= 400);
  CHECK(execs[3]["message"].get<std::string>().find("refused") != std::string::npos);

  // File changes through the API; reads are not events, and neither is a change that failed.
  auto dir = (Berthd().data_dir() / "workspaces" / id / "guest").string();
  REQUIRE(client::Mkdir(agent, scope, dir + "/app").has_value());
  REQUIRE(client::UploadBytes(agent, scope, dir + "/app/a.txt", "hello").has_value());
  REQUIRE(client::Stat(agent, scope, dir + "/app/a.txt").has_value());
  REQUIRE(client::Move(agent, scope, dir + "/app/a.txt", dir + "/app/b.txt").has_value());
  REQUIRE_FALSE(client::Move(agent, scope, dir + "/app/missing", dir + "/app/c.txt").has_value());
  REQUIRE(client::Remove(admin, scope, dir + "/app", /*recursive=*/true).has_value());
  // (A change's event is written as its exchange ends, which may be just after the answer.)
  json files;
  WaitFor([&] {
    files = Events(admin, id, "&type=file_*,dir_*");
    return files.size() >= 4;
  }, std::chrono::seconds(10));
  REQUIRE(Types(files) == std::vector<std::string>{"dir_created", "file_written", "file_moved", "file_deleted"});
  CHECK(files[0]["data"]["path"] == dir + "/app");
  CHECK(files[1]["data"]["bytes"] == 5);
  CHECK(files[2]["data"]["to"] == dir + "/app/b.txt");
  CHECK(files[3]["data"]["recursive"] == true);
  CHECK(files[3]["actor"] == admin_actor);

  // By actor: a key, or every key; and berthd's own.
  auto by_agent = Events(admin, id, "&actor=" + agent_actor);
  CHECK(by_agent.size() == 7);  // 4 execs, and mkdir, write, move
  auto by_keys = Events(admin, id, "&actor=key");
  for (const auto& e : by_keys) CHECK(e["actor"].get<std::string>().starts_with("key_"));
  CHECK(by_keys.size() > by_agent.size());
  for (const auto& e : Events(admin, id, "&actor=system")) CHECK(e["actor"] == "system");

  // A stop by the agent's key: "stopping" is its, "stopped" berthd's.
  REQUIRE(agent.Json(verb::post, scope + "/stop", json::object()).has_value());
  REQUIRE(agent.Json(verb::post, scope + "/wait", json{{"state", "stopped"}, {"timeout_s", 30}}).has_value());
  auto stops = Events(admin, id, "&type=stopping,stopped");
  REQUIRE(Types(stops) == std::vector<std::string>{"stopping", "stopped"});
  CHECK(stops[0]["actor"] == agent_actor);
  CHECK(stops[1]["actor"] == "system");

  // The CLI's and SDKs' client reads the same filters.
  client::BerthClient berth(Berthd().daemon().endpoint(), (*minted)["key"].get<std::string>());
  client::BerthClient::EventSelect select;
  select.types = "exec";
  select.actors = agent_actor;
  auto listed = berth.ListEvents(id, 0, 100, DeadlineIn(std::chrono::seconds(10)), select);
  REQUIRE(listed.has_value());
  REQUIRE(listed->size() == 4);
  CHECK((*listed)[0].actor == agent_actor);
}

TEST_CASE("berthd's timeline: ?since= picks by time, filters page with the cursor, a follower "
          "gets only what it asked for, and bad filters are refused", "[berthd][timeline]") {
  auto admin = Berthd().Admin();
  std::string id = Running(admin, "picky");
  std::string scope = "/v1/workspaces/" + id;

  // since: the future has nothing yet; the past has the create.
  auto future = Events(admin, id, "&since=" + std::to_string(UnixNow() + 3600));
  CHECK(future.empty());
  auto past = Events(admin, id, "&since=2020-01-01T00:00:00Z");
  REQUIRE_FALSE(past.empty());
  CHECK(past[0]["type"] == "created");

  // Pages of a filtered list go on from the last id of the page before.
  for (int i = 0; i < 5; ++i) {
    protocol::ExecRequest req;
    req.cmd = "exit " + std::to_string(i);
    REQUIRE(client::Exec(admin, scope, req).has_value());
  }
  auto first = admin.Json(verb::get, scope + "/events?type=exec&limit=2");
  REQUIRE(first.has_value());
  REQUIRE((*first)["events"].size() == 2);
  int64_t cursor = (*first)["events"][1]["id"];
  auto second = Events(admin, id, "&type=exec&after=" + std::to_string(cursor));
  REQUIRE(second.size() == 3);
  CHECK(second[0]["data"]["exit_code"] == 2);

  // Live: a follower of exec events sees the next exec and not the stop that follows.
  std::vector<std::string> seen;
  std::mutex mutex;
  int64_t last = second[2]["id"];
  std::thread follower([&] {
    auto follow = Berthd().Admin();
    client::NdjsonSplitter lines([&](const json& line) -> Status {
      if (!line.contains("type")) return {};  // keepalive
      std::lock_guard lock(mutex);
      seen.push_back(line["type"]);
      if (line["type"] == "stopped") return Fail(ErrorCode::kAlreadyExists, "seen enough");
      return {};
    });
    (void)follow.Stream(verb::get, scope + "/events?follow=1&type=exec,stopped&after=" + std::to_string(last),
                        {}, nullptr, std::nullopt, [&](std::string_view data) { return lines.Feed(data); });
  });
  protocol::ExecRequest req;
  req.cmd = std::string("exit 9");
  REQUIRE(client::Exec(admin, scope, req).has_value());
  REQUIRE(WaitFor([&] {
    std::lock_guard lock(mutex);
    return !seen.empty();
  }));
  REQUIRE(admin.Json(verb::post, scope + "/stop", json::object()).has_value());
  follower.join();
  CHECK(seen == std::vector<std::string>{"exec", "stopped"});

  // Bad filters: 400 with what was wrong, never SQL.
  const std::vector<std::string> bad_filters = {"type=exec'%20OR%201=1", "type=*", "actor=key_a*",
                                                "since=yesterday", "type=" + std::string(70, 'a')};
  for (const auto& bad : bad_filters) {
    auto refused = admin.Json(verb::get, scope + "/events?" + bad);
    INFO(bad);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("berthd's timeline through its own /mcp: a tool's exec and file write are the session "
          "key's, and workspace_events reads them back with after=", "[berthd][timeline][mcp]") {
  auto admin = Berthd().Admin();
  std::string id = Running(admin, "via-mcp");
  auto minted = admin.Json(verb::post, "/v1/keys", json{{"scope", "write"}, {"name", "mcp-agent"}});
  REQUIRE(minted.has_value());
  auto agent = Berthd().WithKey((*minted)["key"]);
  const std::string agent_actor = KeyIdOf(agent);
  std::string session = testing::McpSession(agent);

  auto ran = testing::McpToolCall(agent, session, "exec", {{"workspace", "via-mcp"}, {"cmd", "echo hi; exit 4"}});
  INFO(ran.dump());
  REQUIRE(ran.contains("content"));
  auto dir = (Berthd().data_dir() / "workspaces" / id / "guest").string();
  auto wrote = testing::McpToolCall(agent, session, "file_write",
                                    {{"workspace", "via-mcp"}, {"path", dir + "/m.txt"}, {"content", "abc"}});
  REQUIRE_FALSE(wrote.value("isError", false));

  auto execs = Events(admin, id, "&type=exec");
  REQUIRE(execs.size() == 1);
  CHECK(execs[0]["actor"] == agent_actor);
  CHECK(execs[0]["data"]["cmd"] == "echo hi; exit 4");
  CHECK(execs[0]["data"]["exit_code"] == 4);
  auto written = Events(admin, id, "&type=file_written");
  REQUIRE(written.size() == 1);
  CHECK(written[0]["actor"] == agent_actor);
  CHECK(written[0]["data"]["bytes"] == 3);

  auto read = testing::McpToolCall(agent, session, "workspace_events", {{"workspace", "via-mcp"}, {"type", "exec,file_*"}});
  REQUIRE_FALSE(read.value("isError", false));
  const auto& listed = read["structuredContent"]["events"];
  REQUIRE(listed.size() == 2);
  CHECK(listed[0]["type"] == "exec");
  CHECK(listed[1]["type"] == "file_written");
  int64_t next = read["structuredContent"]["next_after"];
  auto none = testing::McpToolCall(agent, session, "workspace_events", {{"workspace", "via-mcp"}, {"after", next}});
  CHECK(none["structuredContent"]["events"].empty());
  auto bad = testing::McpToolCall(agent, session, "workspace_events", {{"workspace", "via-mcp"}, {"type", "exec'"}});
  CHECK(bad.value("isError", false));
}

}  // namespace berth
