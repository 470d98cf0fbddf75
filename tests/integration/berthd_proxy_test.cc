// berthd's proxy to a workspace's agent, end to end: berthd in-process (two I/O threads) with
// a real berth-agent per workspace as a host process. Paths whose encoded '/' or '\' would
// route one way and reach the agent another.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "common/http/url.h"
#include "common/protocol/exec.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::TestBerthd;
using testing::WaitFor;

TestBerthd& Berthd() {
  static TestBerthd berthd;
  return berthd;
}

json Create(client::ApiClient& api, const std::string& name) {
  json body = {{"name", name}};
  auto made = api.Json(verb::post, "/v1/workspaces", body);
  REQUIRE(made.has_value());
  json wait = {{"state", "running"}, {"timeout_s", 60}};
  auto running =
      api.Json(verb::post, "/v1/workspaces/" + (*made)["id"].get<std::string>() + "/wait", wait);
  INFO((running ? running->dump() : running.error().message));
  REQUIRE(running.has_value());
  return *running;
}

TEST_CASE("berthd: encoded '/' and '\\' where a path segment cannot hold them are a 400, and a "
          "read key cannot reach exec through one", "[berthd][proxy]") {
  auto admin = Berthd().Admin();
  auto ws = Create(admin, "escape");
  json read_req = {{"scope", "read"}, {"name", "escape-reader"}};
  auto read_key = admin.Json(verb::post, "/v1/keys", read_req);
  REQUIRE(read_key.has_value());
  auto reader = Berthd().WithKey((*read_key)["key"].get<std::string>());

  // Routed decoded, this was a file read (read scope) of "exec/ws" in workspace "escape", and
  // the agent was sent /v1/exec/ws: a read key opened an interactive session.
  auto session = reader.OpenWebSocket("/v1/workspaces/escape%2Ffiles/exec/ws");
  REQUIRE_FALSE(session.has_value());
  CHECK(session.error().code == ErrorCode::kInvalidArgument);
  auto plain = reader.Request(verb::get, "/v1/workspaces/escape%2Ffiles/exec/ws");
  REQUIRE(plain.has_value());
  CHECK(plain->status == 400);
  CHECK(plain->body.find("encoded '/'") != std::string::npos);

  // Inputs that gave 500.
  for (const char* target : {"/v1/workspaces/%FF", "/v1/workspaces/escape%2Fports",
                             "/v1/workspaces/escape%5Cports", "/v1/workspaces/escape/po%2Frts"}) {
    INFO(target);
    auto res = admin.Request(verb::get, target);
    REQUIRE(res.has_value());
    CHECK(res->status == 400);
    auto error = json::parse(res->body, nullptr, false);
    REQUIRE(error.is_object());
    CHECK(error["error"]["code"] == "invalid_argument");
  }
  // Unknown paths with bytes that are not UTF-8 are a clean 404, not a 500.
  auto nowhere = admin.Request(verb::get, "/v1/nowhere%FF");
  REQUIRE(nowhere.has_value());
  CHECK(nowhere->status == 404);

  // Where a '/' means something, in a file path, an encoded one is a separator, as before.
  auto dir = Berthd().data_dir() / "workspaces" / ws["id"].get<std::string>() / "guest";
  std::string encoded = http::PercentEncode((dir / "sub").string().substr(1), /*keep_slash=*/false);
  CHECK(encoded.find("%2F") != std::string::npos);
  auto made = admin.Request(verb::post, "/v1/workspaces/escape/files/" + encoded + "?op=mkdir");
  REQUIRE(made.has_value());
  CHECK(made->status == 201);
  auto stat = reader.Json(verb::get, "/v1/workspaces/escape/files/" + encoded + "?stat=1");
  REQUIRE(stat.has_value());
  CHECK((*stat)["type"] == "dir");
  CHECK((*stat)["path"] == (dir / "sub").string());
}

}  // namespace
}  // namespace berth
