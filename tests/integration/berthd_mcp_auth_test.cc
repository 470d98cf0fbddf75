// berthd's /mcp checks the key before it reads a byte of the body: any "Bearer x" used to get
// 32 MiB read and parsed (four such requests took berthd to 1.3 GB).
#include <chrono>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/integration/berthd_hardening_util.h"
#include "tests/support/raw_http.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::HardeningBerthd;
using testing::MintKey;
using testing::StatusOf;

client::Response McpPost(client::ApiClient& api, const json& body, const std::string& session) {
  client::Headers headers = {{"Accept", "application/json, text/event-stream"}};
  if (!session.empty()) headers.emplace_back("Mcp-Session-Id", session);
  auto response = api.Request(verb::post, "/mcp", body.dump(), "application/json", headers);
  REQUIRE(response);
  return *response;
}

}  // namespace

TEST_CASE("berthd /mcp: an unauthenticated 32 MiB POST is refused before its body is read",
          "[berthd][mcp]") {
  auto& d = HardeningBerthd();
  uint16_t port = d.daemon().endpoint().port;
  auto head = [](std::string_view auth, uint64_t length) {
    return fmt::format("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Type: application/json\r\n"
                       "Content-Length: {}\r\n\r\n",
                       auth, length);
  };
  constexpr uint64_t k32MiB = 32u << 20;
  // The answer comes with not a byte of the body sent: berthd did not wait for it.
  for (std::string_view auth : {"", "Authorization: Bearer x\r\n", "Authorization: Bearer bk_0000\r\n"}) {
    testing::RawConnection c(port);
    REQUIRE(c.ok());
    REQUIRE(c.Send(head(auth, k32MiB)));
    std::string answer = c.ReadHead(std::chrono::seconds(10));
    INFO(auth);
    CHECK(answer.starts_with("HTTP/1.1 401 "));
    CHECK(answer.find("WWW-Authenticate: Bearer\r\n") != std::string::npos);
  }
  // A good key without a session gets no further than an initialize's 64 KiB.
  {
    testing::RawConnection c(port);
    REQUIRE(c.Send(head("Authorization: Bearer " + d.admin_key() + "\r\n", k32MiB)));
    CHECK(c.ReadHead(std::chrono::seconds(10)).starts_with("HTTP/1.1 413 "));
  }
  // Four clients that send their 32 MiB anyway: none of it is held (peak RSS stays flat).
  REQUIRE(testing::ResetPeakRss());
  uint64_t before = testing::StatusKiB("VmHWM");
  std::vector<std::thread> senders;
  std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 4; ++i) {
    senders.emplace_back([&] {
      testing::RawConnection c(port);
      if (!c.Send(head("Authorization: Bearer x\r\n", k32MiB))) return;
      for (int mib = 0; mib < 32 && c.Send(chunk); ++mib) {
      }
    });
  }
  for (auto& t : senders) t.join();
  uint64_t grown = testing::StatusKiB("VmHWM") - before;
  INFO("peak RSS grew by " << grown << " KiB");
  CHECK(grown < 24 * 1024);
  CHECK(d.Admin().Json(verb::get, "/v1/me"));
}

TEST_CASE("berthd /mcp: shutdown ends an MCP call that waits on a workspace, without waiting for it",
          "[berthd][mcp][shutdown]") {
  // An agent that never answers: the workspace stays `starting` for the boot timeout (10 min),
  // and workspace_start waits for `running` all that time.
  testing::TempDir scripts;
  auto mute = scripts.path() / "mute-agent";
  std::ofstream(mute) << "#!/bin/sh\nexec sleep 600\n";
  REQUIRE(chmod(mute.c_str(), 0755) == 0);
  testing::TestBerthd d([&](Config& c) {
    c.agent_binary = mute.string();
    c.boot_timeout_s = 600;
  });
  auto admin = d.Admin();
  auto made = admin.Json(verb::post, "/v1/workspaces", json{{"name", "mute"}});
  REQUIRE(made);
  json init = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
               {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  auto opened = McpPost(admin, init, "");
  REQUIRE(opened.status == 200);
  std::string session(opened.Header("Mcp-Session-Id"));
  REQUIRE_FALSE(session.empty());
  json call = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
               {"params", {{"name", "workspace_start"}, {"arguments", {{"workspace", "mute"}, {"timeout", 600}}}}}};
  auto waiting = std::async(std::launch::async, [&] {
    client::ClientOptions options;
    options.io_timeout = std::chrono::minutes(5);
    client::ApiClient caller(d.daemon().endpoint(), d.admin_key(), options);
    client::Headers headers = {{"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", session}};
    return caller.Request(verb::post, "/mcp", call.dump(), "application/json", headers);
  });
  // The call is in: the workspace is being waited on (its boot has begun, and stays begun).
  REQUIRE(testing::WaitFor([&] {
    auto ws = admin.Json(verb::get, "/v1/workspaces/mute");
    return ws && (*ws)["state"] == "starting";
  }, std::chrono::seconds(20)));
  REQUIRE(waiting.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
  // Shutdown does not wait for the call: a call blocked on the service that shutdown did not
  // wake would hold the MCP pool's join (and so Shutdown) for the boot's 10 minutes.
  auto shutdown = std::async(std::launch::async, [&] { d.daemon().Shutdown(); });
  REQUIRE(shutdown.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  REQUIRE(waiting.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  auto answer = waiting.get();
  // Either the call's own answer (berthd is shutting down) made it out, or the connection was
  // closed with the listener: never a hang.
  if (answer) {
    INFO(answer->body);
    CHECK(answer->body.find("shutting down") != std::string::npos);
  }
}

}  // namespace berth
