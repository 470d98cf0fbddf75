// berthd's proxy to a workspace's agent, end to end: berthd in-process (two I/O threads) with
// a real berth-agent per workspace as a host process. A client that gives up on a long exec,
// and paths whose encoded '/' or '\' would route one way and reach the agent another.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "common/http/url.h"
#include "common/protocol/exec.h"
#include "tests/support/sockets.h"
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

// The state of a process started with `tag` ("running", "exited"), or "" when unknown.
std::string ProcessStatus(client::ApiClient& api, const std::string& ws, const std::string& tag) {
  auto p = api.Json(verb::get, fmt::format("/v1/workspaces/{}/processes/{}", ws, tag));
  return p && p->contains("status") ? (*p)["status"].get<std::string>() : "";
}

bool ExecStreamOpen(client::ApiClient& api, const std::string& ws) {
  auto now = api.Json(verb::get, "/v1/workspaces/" + ws);
  if (!now || !now->contains("awake")) return false;
  for (const auto& reason : (*now)["awake"]["reasons"]) {
    if (reason.get<std::string>().find("exec") != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("berthd: a client that gives up on a long exec is let go, and berthd serves on",
          "[berthd][proxy]") {
  auto api = Berthd().Admin();
  auto ws = Create(api, "abandoned");
  std::string id = ws["id"];
  const uint16_t port = Berthd().daemon().endpoint().port;

  protocol::ExecRequest req;
  req.cmd = std::string("sleep 3");
  req.tag = "long-sleep";
  std::string body = req.ToJson().dump();
  std::string request = fmt::format(
      "POST /v1/workspaces/{}/exec HTTP/1.1\r\nHost: berthd\r\nAuthorization: Bearer {}\r\n"
      "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
      id, Berthd().admin_key(), body.size(), body);
  UniqueFd client = testing::ConnectTcp(port);
  REQUIRE(client);
  REQUIRE(testing::SendAll(client.get(), request));
  // The exec runs in the guest and berthd waits for its answer.
  REQUIRE(WaitFor([&] { return ProcessStatus(api, id, "long-sleep") == "running"; }));
  REQUIRE(WaitFor([&] { return ExecStreamOpen(api, id); }));
  auto started = std::chrono::steady_clock::now();

  client.reset();  // the client gives up
  // berthd lets go at once: no socket left in CLOSE_WAIT, the stream to the agent closed,
  // all well before the command ends (3 s).
  REQUIRE(WaitFor([&] { return testing::CountTcpSockets(port, testing::kTcpCloseWait) == 0; },
                  2s));
  REQUIRE(WaitFor([&] { return !ExecStreamOpen(api, id); }, 2s));
  CHECK(std::chrono::steady_clock::now() - started < 2500ms);
  CHECK(ProcessStatus(api, id, "long-sleep") == "running");  // it was still running meanwhile

  // The command ends in the guest (the agent keeps what it started); berthd is alive after
  // that moment, which used to abort it with a double free, and serves as before.
  REQUIRE(WaitFor([&] { return ProcessStatus(api, id, "long-sleep") == "exited"; }, 10s));
  auto again = api.Json(verb::get, "/v1/workspaces/" + id);
  REQUIRE(again.has_value());
  CHECK((*again)["state"] == "running");
  protocol::ExecRequest quick;
  quick.cmd = std::string("echo alive");
  auto ran = api.Json(verb::post, "/v1/workspaces/" + id + "/exec", quick.ToJson());
  REQUIRE(ran.has_value());
  CHECK((*ran)["stdout"] == "alive\n");
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
