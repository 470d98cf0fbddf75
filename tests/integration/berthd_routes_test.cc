// The documented workspace routes that berthd_api_test.cc does not drive, each asserted to do
// what docs/api.md says: restart, keepalive, list filters and pages, events after an id, usage
// ranges, renaming by PATCH, and wait's timeout and conflict. berthd in-process on libvirt's
// test driver with the unix transport (a real berth-agent per workspace as a host process).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "common/client/exec.h"
#include "common/json.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::TestBerthd;
using testing::WaitFor;

// Cases that change nothing another case counts share one daemon.
TestBerthd& Shared() {
  static TestBerthd berthd;
  return berthd;
}

json Running(client::ApiClient& api, const json& body) {
  auto made = api.Json(verb::post, "/v1/workspaces", body);
  INFO((made ? made->dump() : made.error().message));
  REQUIRE(made.has_value());
  json wait = {{"state", "running"}, {"timeout_s", 30}};
  auto running = api.Json(verb::post, "/v1/workspaces/" + (*made)["id"].get<std::string>() + "/wait", wait);
  INFO((running ? running->dump() : running.error().message));
  REQUIRE(running.has_value());
  return *running;
}

json GetWs(client::ApiClient& api, const std::string& ws) {
  auto got = api.Json(verb::get, "/v1/workspaces/" + ws);
  INFO((got ? got->dump() : got.error().message));
  REQUIRE(got.has_value());
  return *got;
}

// The whole answer, error bodies included: the tests assert status and code together.
struct Answer {
  int status = 0;
  json body;
};

Answer Ask(client::ApiClient& api, verb method, const std::string& target,
            const std::optional<json>& body = std::nullopt) {
  std::string text = body ? DumpJson(*body) : "";
  auto r = api.Request(method, target, text, body ? "application/json" : "");
  REQUIRE(r.has_value());
  Answer a;
  a.status = r->status;
  auto parsed = ParseJson(r->body);
  if (parsed) a.body = *parsed;
  return a;
}

std::string ErrorCodeOf(const Answer& a) {
  return a.body.contains("error") ? a.body["error"].value("code", "") : "";
}
std::string ErrorMessageOf(const Answer& a) {
  return a.body.contains("error") ? a.body["error"].value("message", "") : "";
}

std::vector<std::string> Names(const json& page) {
  std::vector<std::string> out;
  for (const auto& ws : page["workspaces"]) out.push_back(ws["name"].get<std::string>());
  return out;
}

TEST_CASE("berthd: restart stops then starts the workspace, ending what ran in it",
          "[berthd][routes]") {
  auto api = Shared().Admin();
  auto ws = Running(api, {{"name", "restarter"}});
  std::string id = ws["id"];
  std::string scope = "/v1/workspaces/" + id;
  protocol::ExecRequest bg;
  bg.cmd = std::string("sleep 300");
  bg.background = true;
  bg.tag = "before-restart";
  auto started = client::StartBackground(api, scope, bg);
  REQUIRE(started.has_value());
  // The background command's "exec" line is written once its start is answered, which may be
  // after the answer reaches us (measured under load): the restart's lines come after it.
  Result<json> events = Fail(ErrorCode::kNotFound, "no events yet");
  REQUIRE(testing::WaitFor([&] {
    events = api.Json(verb::get, scope + "/events?limit=1000");
    return events.has_value() && !(*events)["events"].empty() && (*events)["events"].back()["type"] == "exec";
  }));
  int64_t last_before = (*events)["events"].back()["id"];

  auto restart = Ask(api, verb::post, scope + "/restart", json::object());
  CHECK(restart.status == 202);
  CHECK(restart.body["state"] == "stopping");
  auto up = api.Json(verb::post, scope + "/wait", json{{"state", "running"}, {"timeout_s", 30}});
  INFO((up ? up->dump() : up.error().message));
  REQUIRE(up.has_value());
  CHECK((*up)["state"] == "running");

  // Events after the last one seen: exactly the restart's, in order.
  auto after = api.Json(verb::get, scope + "/events?after=" + std::to_string(last_before));
  REQUIRE(after.has_value());
  std::vector<std::string> types;
  for (const auto& e : (*after)["events"]) {
    CHECK(e["id"].get<int64_t>() > last_before);
    types.push_back(e["type"].get<std::string>());
  }
  CHECK(types == std::vector<std::string>{"stopping", "stopped", "starting", "started"});
  // `limit` cuts the same list to its first entries.
  auto first = api.Json(verb::get, scope + "/events?limit=1&after=" + std::to_string(last_before));
  REQUIRE(first.has_value());
  REQUIRE((*first)["events"].size() == 1);
  CHECK((*first)["events"][0]["type"] == "stopping");

  // A restart is a stop: the process started before it is gone.
  auto gone = client::GetProcess(api, scope, "before-restart");
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().code == ErrorCode::kNotFound);

  // Only a running (or starting, or failed) workspace restarts.
  REQUIRE(api.Json(verb::post, scope + "/stop", json{{"force", true}}).has_value());
  REQUIRE(api.Json(verb::post, scope + "/wait", json{{"state", "stopped"}}).has_value());
  auto refused = Ask(api, verb::post, scope + "/restart", json::object());
  CHECK(refused.status == 409);
  CHECK(ErrorCodeOf(refused) == "failed_precondition");
  CHECK(ErrorMessageOf(refused).find("stopped") != std::string::npos);
  CHECK(GetWs(api, id)["state"] == "stopped");
}

TEST_CASE("berthd: keepalive counts as activity and is a 409 when the workspace is not running",
          "[berthd][routes]") {
  auto api = Shared().Admin();
  auto ws = Running(api, {{"name", "kept"}});
  std::string scope = "/v1/workspaces/kept";
  std::string idle_at = ws["awake"]["idle_at"];  // ISO 8601 UTC, so it compares as text
  auto kept = Ask(api, verb::post, scope + "/keepalive", json::object());
  CHECK(kept.status == 200);
  CHECK(kept.body["id"] == ws["id"]);
  CHECK(kept.body["state"] == "running");
  // Nothing else happens in it: only the keepalives can move idle_at on (a second later at
  // the earliest, times being whole seconds).
  bool moved = WaitFor([&] {
    if (Ask(api, verb::post, scope + "/keepalive", json::object()).status != 200) return false;
    return GetWs(api, "kept")["awake"]["idle_at"].get<std::string>() > idle_at;
  }, std::chrono::seconds(10));
  CHECK(moved);

  REQUIRE(api.Json(verb::post, scope + "/stop", json{{"force", true}}).has_value());
  REQUIRE(api.Json(verb::post, scope + "/wait", json{{"state", "stopped"}}).has_value());
  auto refused = Ask(api, verb::post, scope + "/keepalive", json::object());
  CHECK(refused.status == 409);
  CHECK(ErrorCodeOf(refused) == "failed_precondition");
  CHECK(ErrorMessageOf(refused).find("stopped") != std::string::npos);
  // A keepalive does not start it.
  CHECK(GetWs(api, "kept")["state"] == "stopped");
}

TEST_CASE("berthd: the list filters by state and label and pages by id", "[berthd][routes]") {
  TestBerthd d;  // its own: the list must hold exactly what this case made
  auto api = d.Admin();
  std::vector<std::string> ids;
  for (const char* name : {"list-a", "list-b", "list-c"}) {
    ids.push_back(Running(api, {{"name", name}, {"labels", {{"group", "f"}}}})["id"].get<std::string>());
  }
  Running(api, {{"name", "list-other"}, {"labels", {{"group", "g"}}}});
  REQUIRE(api.Json(verb::post, "/v1/workspaces/list-b/stop", json{{"force", true}}).has_value());
  REQUIRE(api.Json(verb::post, "/v1/workspaces/list-b/wait", json{{"state", "stopped"}}).has_value());

  auto stopped = api.Json(verb::get, "/v1/workspaces?state=stopped&label=group=f");
  REQUIRE(stopped.has_value());
  CHECK(Names(*stopped) == std::vector<std::string>{"list-b"});
  CHECK((*stopped)["next"].is_null());
  auto running = api.Json(verb::get, "/v1/workspaces?state=running&label=group=f");
  REQUIRE(running.has_value());
  auto running_names = Names(*running);
  std::sort(running_names.begin(), running_names.end());
  CHECK(running_names == std::vector<std::string>{"list-a", "list-c"});
  auto all_running = api.Json(verb::get, "/v1/workspaces?state=running");
  REQUIRE(all_running.has_value());
  CHECK((*all_running)["workspaces"].size() == 3);  // list-a, list-c and list-other

  // Pages of one, in id order: `next` is the last id of the page, null on the last page.
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> walked;
  std::string after;
  for (int page = 0; page < 4; ++page) {
    std::string target = "/v1/workspaces?label=group=f&limit=1";
    if (!after.empty()) target += "&after=" + after;
    auto got = api.Json(verb::get, target);
    REQUIRE(got.has_value());
    REQUIRE((*got)["workspaces"].size() == 1);
    walked.push_back((*got)["workspaces"][0]["id"].get<std::string>());
    if ((*got)["next"].is_null()) break;
    CHECK((*got)["next"] == walked.back());
    after = (*got)["next"].get<std::string>();
  }
  CHECK(walked == sorted);

  auto bad_state = Ask(api, verb::get, "/v1/workspaces?state=asleep");
  CHECK(bad_state.status == 400);
  CHECK(ErrorMessageOf(bad_state) == "unknown state 'asleep'");
  auto bad_label = Ask(api, verb::get, "/v1/workspaces?label=novalue");
  CHECK(bad_label.status == 400);
  CHECK(ErrorCodeOf(bad_label) == "invalid_argument");
  for (const char* limit : {"0", "1001", "x"}) {
    auto bad_limit = Ask(api, verb::get, std::string("/v1/workspaces?limit=") + limit);
    INFO(limit);
    CHECK(bad_limit.status == 400);
    CHECK(ErrorCodeOf(bad_limit) == "invalid_argument");
  }
}

TEST_CASE("berthd: usage lists a workspace in the ranges it ran in and not in others",
          "[berthd][routes]") {
  TestBerthd d;  // its own: usage counts every workspace of the tenant
  auto api = d.Admin();
  int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count() - 5;
  auto ws = Running(api, {{"name", "counted"}, {"size", "small"}});

  auto now_range = api.Json(verb::get, "/v1/usage?from=" + std::to_string(before));
  REQUIRE(now_range.has_value());
  REQUIRE((*now_range)["workspaces"].size() == 1);
  const json& row = (*now_range)["workspaces"][0];
  CHECK(row["workspace"] == ws["id"]);
  CHECK(row["name"] == "counted");
  CHECK(row["size"] == "small");
  int64_t seconds = row["seconds"];
  CHECK(seconds >= 0);
  CHECK(seconds <= 60);  // it has run for no longer than this test
  CHECK(row["vcpu_seconds"] == seconds * ws["cpus"].get<int64_t>());
  CHECK((*now_range)["total"]["seconds"] == seconds);

  // A range that ended before it was made: nothing, and the range is echoed back.
  auto old = api.Json(verb::get, "/v1/usage?from=1000000000&to=1000003600");
  REQUIRE(old.has_value());
  CHECK((*old)["workspaces"].empty());
  CHECK((*old)["total"]["seconds"] == 0);
  CHECK((*old)["from"] == "2001-09-09T01:46:40Z");
  CHECK((*old)["to"] == "2001-09-09T02:46:40Z");
  // The same range in ISO 8601.
  auto iso = api.Json(verb::get, "/v1/usage?from=2001-09-09T01:46:40Z&to=2001-09-09T02:46:40Z");
  REQUIRE(iso.has_value());
  CHECK((*iso)["from"] == "2001-09-09T01:46:40Z");
  CHECK((*iso)["workspaces"].empty());

  auto backwards = Ask(api, verb::get, "/v1/usage?from=1000003600&to=1000000000");
  CHECK(backwards.status == 400);
  CHECK(ErrorMessageOf(backwards) == "'to' must be after 'from'");
  auto garbage = Ask(api, verb::get, "/v1/usage?from=yesterday");
  CHECK(garbage.status == 400);
  CHECK(ErrorCodeOf(garbage) == "invalid_argument");
}

TEST_CASE("berthd: PATCH renames a workspace; the old name is free, a taken one is a 409",
          "[berthd][routes]") {
  auto api = Shared().Admin();
  auto ws = Running(api, {{"name", "old-name"}});
  std::string id = ws["id"];
  Running(api, {{"name", "taken-name"}});

  auto renamed = Ask(api, verb::patch, "/v1/workspaces/old-name", json{{"name", "new-name"}});
  CHECK(renamed.status == 200);
  CHECK(renamed.body["name"] == "new-name");
  CHECK(renamed.body["id"] == id);
  CHECK(GetWs(api, "new-name")["id"] == id);
  CHECK(GetWs(api, id)["name"] == "new-name");
  auto old = Ask(api, verb::get, "/v1/workspaces/old-name");
  CHECK(old.status == 404);
  CHECK(ErrorCodeOf(old) == "not_found");

  auto clash = Ask(api, verb::patch, "/v1/workspaces/new-name", json{{"name", "taken-name"}});
  CHECK(clash.status == 409);
  CHECK(ErrorCodeOf(clash) == "already_exists");
  CHECK(GetWs(api, id)["name"] == "new-name");
  auto bad = Ask(api, verb::patch, "/v1/workspaces/new-name", json{{"name", "Not A Name"}});
  CHECK(bad.status == 400);
  CHECK(ErrorCodeOf(bad) == "invalid_argument");

  // The old name can be used again, by another workspace.
  auto reuse = Ask(api, verb::post, "/v1/workspaces", json{{"name", "old-name"}});
  CHECK(reuse.status == 201);
  CHECK(reuse.body["id"] != id);
  // It still runs under its new name: exec by the new name reaches the same agent.
  protocol::ExecRequest req;
  req.cmd = std::string("echo renamed");
  auto r = client::Exec(api, "/v1/workspaces/new-name", req);
  REQUIRE(r.has_value());
  CHECK(r->stdout_data == "renamed\n");
}

// An "agent" that never answers, so that a boot stays in `starting` until boot_timeout_s.
// Its command line says berth-agent and the socket path, so that TestBerthd and berthd's
// transport both know it for theirs and end it.
std::string SilentAgent(const testing::TempDir& dir) {
  std::string path = (dir.path() / "silent-agent").string();
  std::ofstream(path) << "#!/bin/sh\n"
                         "exec python3 -c 'import time; time.sleep(600)  # berth-agent stand-in' \"$@\"\n";
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
  return path;
}

TEST_CASE("berthd: wait answers 504 when its timeout runs out, 409 when the workspace fails",
          "[berthd][routes]") {
  testing::TempDir bin("berth-silent");
  std::string agent = SilentAgent(bin);
  TestBerthd d([&](Config& c) {
    c.agent_binary = agent;
    c.boot_timeout_s = 4;
  });
  auto api = d.Admin();
  auto made = Ask(api, verb::post, "/v1/workspaces", json{{"name", "never-up"}});
  REQUIRE(made.status == 201);
  std::string scope = "/v1/workspaces/never-up";

  auto start = std::chrono::steady_clock::now();
  auto timed_out = Ask(api, verb::post, scope + "/wait", json{{"state", "running"}, {"timeout_s", 1}});
  auto took = std::chrono::steady_clock::now() - start;
  INFO(timed_out.body.dump());
  CHECK(timed_out.status == 504);
  CHECK(ErrorCodeOf(timed_out) == "deadline_exceeded");
  CHECK(ErrorMessageOf(timed_out).find("after 1 s") != std::string::npos);
  CHECK(took >= std::chrono::milliseconds(900));
  CHECK(took < std::chrono::seconds(4));  // it did not wait for the boot to end

  // The boot gives up: the wait for running ends as soon as it lands in error, long before
  // its own timeout.
  start = std::chrono::steady_clock::now();
  auto failed = Ask(api, verb::post, scope + "/wait", json{{"state", "running"}, {"timeout_s", 120}});
  took = std::chrono::steady_clock::now() - start;
  INFO(failed.body.dump());
  CHECK(failed.status == 409);
  CHECK(ErrorCodeOf(failed) == "failed_precondition");
  CHECK(ErrorMessageOf(failed).starts_with("workspace 'never-up' is error"));
  CHECK(took < std::chrono::seconds(60));
  CHECK(GetWs(api, "never-up")["state"] == "error");

  // A state it cannot leave by itself: a wait for another is a 409 at once.
  start = std::chrono::steady_clock::now();
  auto conflict = Ask(api, verb::post, scope + "/wait", json{{"state", "stopped"}, {"timeout_s", 60}});
  CHECK(conflict.status == 409);
  CHECK(ErrorCodeOf(conflict) == "failed_precondition");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

}  // namespace
}  // namespace berth
