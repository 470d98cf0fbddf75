// Hostile input on the guest's side of the line: deeply nested JSON to the agent (bodies, a
// header, a session's first message), a hostile "agent" whose answers nest 100k levels deep
// (the client library must answer with an error, not overflow its stack copying them), and
// guest file names in invalid UTF-8 in a listing and a watch stream.
#include <memory>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/client/exec.h"
#include "common/client/files.h"
#include "common/json.h"
#include "tests/integration/files_test_util.h"
#include "tests/support/fake_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_agent.h"
#include "tests/support/wait.h"

using namespace berth;
using berth::http::bhttp::verb;
using nlohmann::json;
using testing::FakeServer;
using testing::SendText;

namespace {

const std::string kDeep(200 * 1024, '[');

}  // namespace

TEST_CASE("the agent answers deeply nested JSON with 400", "[hostile][json]") {
  testing::TestAgent agent;
  auto api = agent.Client();
  for (std::string_view target : {"/v1/exec", "/v1/leases"}) {
    auto res = api.Request(verb::post, target, kDeep, "application/json");
    INFO(target);
    REQUIRE(res);
    CHECK(res->status == 400);
    Error error = client::ApiClient::ErrorFrom(*res);
    CHECK(error.code == ErrorCode::kInvalidArgument);
    CHECK(error.message == "request body: JSON nested deeper than 64 levels");
  }
  // The workspace's env as berthd passes it (a header), nested.
  std::string env_header = R"({"A":)" + std::string(8000, '[');
  auto env = api.Request(verb::post, "/v1/exec", R"({"cmd":"true"})", "application/json",
                         {{"Berth-Env", env_header}});
  REQUIRE(env);
  CHECK(env->status == 400);
  // A session's start message.
  auto ws = api.OpenWebSocket("/v1/exec/ws");
  REQUIRE(ws);
  REQUIRE((*ws)->SendText(kDeep));
  auto frame = (*ws)->Read(std::chrono::seconds(10));
  REQUIRE(frame);
  auto refused = ParseJson(frame->data);
  REQUIRE(refused);
  CHECK((*refused)["type"] == "error");
  CHECK((*refused)["error"]["message"] == "start message: JSON nested deeper than 64 levels");
  // And the agent still serves.
  auto ran = client::Exec(api, "/v1", [] {
    protocol::ExecRequest r;
    r.cmd = std::string("echo ok");
    return r;
  }());
  REQUIRE(ran);
  CHECK(ran->stdout_data == "ok\n");
}

TEST_CASE("a hostile agent's deeply nested answers are errors in the client", "[hostile][json]") {
  FakeServer hostile([](http::Exchange& ex) -> http::Task<void> {
    if (ex.path() == "/v1/exec") {
      // An NDJSON stream whose second event nests 100k levels.
      std::string body = std::string(R"({"type":"start","pid":7})") + "\n" + kDeep + "\n";
      co_await SendText(ex, "application/x-ndjson", body);
    } else {
      co_await SendText(ex, "application/json", kDeep);  // /v1/activity, /v1/info, ...
    }
  });
  auto api = hostile.Client();
  // What berthd's idle loop asks every few seconds.
  auto activity = api.Json(verb::get, "/v1/activity");
  REQUIRE_FALSE(activity);
  CHECK(activity.error().code == ErrorCode::kInternal);
  CHECK(activity.error().message ==
        "/v1/activity answered with invalid JSON: JSON nested deeper than 64 levels");
  protocol::ExecRequest request;
  request.cmd = std::string("true");
  std::vector<protocol::ExecEvent::Type> seen;
  auto streamed = client::ExecStream(api, "/v1", request, [&](const protocol::ExecEvent& e) {
    seen.push_back(e.type);
    return Status{};
  });
  REQUIRE_FALSE(streamed);
  CHECK(streamed.error().message == "invalid NDJSON line: JSON nested deeper than 64 levels");
  CHECK(seen == std::vector<protocol::ExecEvent::Type>{protocol::ExecEvent::Type::kStart});
}

// --- invalid UTF-8 from the guest ------------------------------------------------------------

TEST_CASE("file names in invalid UTF-8 list and watch without breaking", "[hostile][utf8]") {
  testing::TestAgent agent;
  testing::TempDir world("berth-utf8");
  std::string dir = world.path().string();
  const std::string bad_name = "bad\xff\xfename";
  // Shared with the watcher thread, which outlives this scope if the watch never starts.
  struct Seen {
    std::mutex mutex;
    std::vector<protocol::WatchEvent> events;
    Status watched;
  };
  auto seen = std::make_shared<Seen>();
  std::thread watcher([seen, dir, api = agent.Client()]() mutable {
    auto status = client::Watch(api, "/v1", dir, false, [&](const protocol::WatchEvent& e) {
      std::lock_guard lock(seen->mutex);
      seen->events.push_back(e);
      return e.path != dir + "/last";
    });
    std::lock_guard lock(seen->mutex);
    seen->watched = status;
  });
  auto saw = [&](auto&& matches) {
    std::lock_guard lock(seen->mutex);
    for (const auto& e : seen->events) {
      if (e.type == "created" && matches(e.path)) return true;
    }
    return false;
  };
  // The watch is on once any probe shows up (a new one each try: those written before the
  // watch began are never reported).
  int probe = 0;
  bool watching = testing::WaitFor([&] {
    testing::WriteFile(world / fmt::format("probe-{}", probe++), "p");
    return saw([&](const std::string& p) { return p.starts_with(dir + "/probe-"); });
  });
  if (!watching) watcher.detach();
  REQUIRE(watching);

  testing::WriteFile(world / bad_name, "x");
  // The name reaches the client with U+FFFD for each bad byte, and the stream goes on.
  const std::string shown = dir + "/bad\xef\xbf\xbd\xef\xbf\xbdname";
  CHECK(testing::WaitFor([&] { return saw([&](const std::string& p) { return p == shown; }); }));
  testing::WriteFile(world / "last", "z");
  watcher.join();
  CHECK(seen->watched);

  auto api = agent.Client();
  auto listing = client::List(api, "/v1", dir);
  REQUIRE(listing);
  bool listed = false;
  for (const auto& entry : listing->entries) listed = listed || entry.name == "bad\xef\xbf\xbd\xef\xbf\xbdname";
  CHECK(listed);
}

