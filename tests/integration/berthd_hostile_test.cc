// berthd against hostile bodies and guests: JSON nested 100k levels deep to the API and to
// /mcp (initialize with any key, a tool call in a session) is a 400 and berthd lives on;
// invalid UTF-8 a guest put in an event (a console line) neither breaks the listing nor the
// live stream.
#include <atomic>

#include <catch2/catch.hpp>

#include "controller/store/store.h"
#include "tests/integration/berthd_hardening_util.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::HardeningBerthd;
using testing::MintKey;
using testing::StatusOf;

std::string ErrorMessage(const client::Response& r) {
  return client::ApiClient::ErrorFrom(r).message;
}

}  // namespace

TEST_CASE("berthd: deeply nested bodies are a 400, for any route and any key", "[berthd][json]") {
  auto& d = HardeningBerthd();
  auto op = d.Admin();
  auto reader = d.WithKey(MintKey("default", "read").second);
  for (const auto& [method, target] :
       std::vector<std::pair<verb, std::string>>{{verb::post, "/v1/workspaces"},
                                                 {verb::post, "/v1/keys"},
                                                 {verb::post, "/v1/tenants"},
                                                 {verb::patch, "/v1/workspaces/nope"},
                                                 {verb::post, "/v1/workspaces/nope/wait"}}) {
    INFO(target);
    auto r = op.Request(method, target, testing::Deep200K(), "application/json");
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(ErrorMessage(*r) == "request body: JSON nested deeper than 64 levels");
  }
  // /mcp initialize, with a read key: the nesting inside an initialize's params (all of it
  // under the 64 KiB an initialize may have).
  std::string params_deep = std::string(30000, '[') + std::string(30000, ']');
  std::string init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"x":)" +
                     params_deep + "}}}";
  auto mcp = reader.Request(verb::post, "/mcp", init, "application/json",
                            {{"Accept", "application/json, text/event-stream"}});
  REQUIRE(mcp);
  CHECK(mcp->status == 400);
  auto answer = ParseJson(mcp->body);
  REQUIRE(answer);
  CHECK((*answer)["error"]["code"] == -32700);
  CHECK((*answer)["error"]["message"] == "Parse error: JSON nested deeper than 64 levels");
  // berthd is still there.
  CHECK(reader.Json(verb::get, "/v1/workspaces"));
}

TEST_CASE("berthd /mcp: a tool call nested 100k levels deep is a 400 in its session",
          "[berthd][json][mcp]") {
  auto& d = HardeningBerthd();
  auto api = d.WithKey(MintKey("default", "write").second);
  client::Headers accept = {{"Accept", "application/json, text/event-stream"}};
  json init = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
               {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  auto opened = api.Request(verb::post, "/mcp", DumpJson(init), "application/json", accept);
  REQUIRE(opened);
  REQUIRE(opened->status == 200);
  std::string session(opened->Header("Mcp-Session-Id"));
  REQUIRE_FALSE(session.empty());
  client::Headers with_session = accept;
  with_session.emplace_back("Mcp-Session-Id", session);
  std::string call = R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":)" +
                     testing::Deep200K() + "}}}";
  auto refused = api.Request(verb::post, "/mcp", call, "application/json", with_session);
  REQUIRE(refused);
  CHECK(refused->status == 400);
  CHECK(ParseJson(refused->body).value()["error"]["message"] ==
        "Parse error: JSON nested deeper than 64 levels");
  auto ping = api.Request(verb::post, "/mcp", R"({"jsonrpc":"2.0","id":3,"method":"ping"})",
                          "application/json", with_session);
  REQUIRE(ping);
  CHECK(ping->status == 200);
}

TEST_CASE("berthd: invalid UTF-8 in an event (a console line) lists and follows", "[berthd][utf8]") {
  auto& d = HardeningBerthd();
  auto api = d.Admin();
  auto made = api.Json(verb::post, "/v1/workspaces", json{{"name", "utf8-events"}});
  REQUIRE(made);
  std::string id = (*made)["id"];
  // What a boot failure records: the console's last lines, bytes as the guest wrote them.
  auto added = d.daemon().store().AddEvent(id, "t_default", 1, "boot_failed",
                                           "console: \xff\xfe kernel panic",
                                           json{{"console", std::string("tail \xc3")}});
  REQUIRE(added);
  auto listed = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
  REQUIRE(listed);
  bool found = false;
  for (const auto& e : (*listed)["events"]) {
    if (e["type"] == "boot_failed") {
      found = true;
      CHECK(e["message"] == "console: \xef\xbf\xbd\xef\xbf\xbd kernel panic");
    }
  }
  CHECK(found);

  std::atomic<bool> followed{false};
  auto follow = d.Admin();
  client::NdjsonSplitter lines([&](const json& line) -> Status {
    if (line.value("type", "") == "boot_failed") {
      followed = true;
      return Fail(ErrorCode::kAlreadyExists, "seen it");
    }
    return {};
  });
  // Ends with the splitter's "seen it" (or an error, which `followed` then shows).
  (void)follow.Stream(verb::get, "/v1/workspaces/" + id + "/events?follow=1", {}, nullptr,
                      std::nullopt, [&](std::string_view data) { return lines.Feed(data); });
  CHECK(followed);
}

}  // namespace berth
