// The streamable HTTP transport over real HTTP, in-process, against a stand-in for berthd's
// API (/v1/me and /v1/workspaces only, answering only the key "good"): sessions, the
// Mcp-Session-Id rules, status codes, authentication, and a tool call that reaches "berthd"
// with the caller's key. The SDK test (tests/mcp) covers the same against the real berthd.
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/client/api_client.h"
#include "common/http/server.h"
#include "common/v1/admin.h"
#include "common/v1/workspace.h"
#include "mcp/fake_backend.h"
#include "mcp/mcp_http.h"
#include "mcp/tool.h"

using namespace berth;
using berth::http::bhttp::verb;
using nlohmann::json;

namespace {

constexpr std::string_view kGoodKey = "good";

// The workspace "alpha" as berthd answers it.
json Workspace(const std::string& state) {
  v1::Workspace ws;
  ws.id = "ws_0000000000000001";
  ws.name = "alpha";
  ws.tenant = "tn_1";
  ws.image = "base";
  ws.image_version = "v1";
  ws.size = "small";
  ws.state = *v1::StateFromName(state);
  ws.transport = "unix";
  ws.created_at = ws.updated_at = 1'700'000'000;
  return v1::ToJson(ws);
}

class Fixture {
 public:
  // `factory`: the sessions' backends (as berthd in-process would make them); none: HTTP
  // backends to the stand-in's API.
  explicit Fixture(mcp::BackendFactory factory = {}) : pool_(2), mcp_(pool_, std::move(factory)) {
    http::Handler handler = [this](http::Exchange& ex) -> http::Task<void> {
      if (ex.path() == "/mcp") {
        co_await mcp::ServeMcpHttp(ex, mcp_);
        co_return;
      }
      if (ex.header(http::bhttp::field::authorization) != "Bearer " + std::string(kGoodKey)) {
        co_await ex.SendError(Error(ErrorCode::kUnauthenticated, "bad key"));
        co_return;
      }
      ++api_calls_;
      if (ex.path() == "/v1/me") {
        v1::Me identity;
        identity.tenant_id = "tn_1";
        identity.tenant_name = "t";
        identity.key_id = "key_1";
        identity.key_prefix = "bk_good";
        json me = v1::ToJson(identity);
        co_await ex.SendJson(http::bhttp::status::ok, me);
      } else if (ex.path() == "/v1/workspaces/alpha") {
        json ws = Workspace("stopped");
        co_await ex.SendJson(http::bhttp::status::ok, ws);
      } else if (ex.path() == "/v1/workspaces") {
        json list = json::object();
        list["workspaces"] = json::array({Workspace("running")});
        list["next"] = nullptr;
        co_await ex.SendJson(http::bhttp::status::ok, list);
      } else {
        co_await ex.SendError(Error(ErrorCode::kNotFound, "no route"));
      }
    };
    server_ = std::make_unique<http::Server>(io_, http::ServerOptions{}, handler);
    auto bound = server_->Listen(*Endpoint::Parse("tcp:127.0.0.1:0"));
    REQUIRE(bound);
    endpoint_ = *bound;
    REQUIRE(mcp_.SetApiUrl(fmt::format("http://127.0.0.1:{}", endpoint_.port)));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Fixture() {
    server_->Stop();
    io_.stop();
    thread_.join();
    pool_.join();
  }

  // POST /mcp with `body`, as the key `key`, with extra headers.
  client::Response Post(std::string_view body, const client::Headers& headers = {},
                        std::string key = std::string(kGoodKey), std::string target = "/mcp") {
    client::ApiClient api(endpoint_, key);
    client::Headers all = headers;
    all.emplace_back("Accept", "application/json, text/event-stream");
    auto response = api.Request(verb::post, target, body, "application/json", all);
    REQUIRE(response);
    return *response;
  }
  client::Response Send(verb method, const client::Headers& headers,
                        std::string key = std::string(kGoodKey)) {
    client::ApiClient api(endpoint_, key);
    auto response = api.Request(method, "/mcp", {}, {}, headers);
    REQUIRE(response);
    return *response;
  }
  // initialize; returns the session id.
  std::string Initialize(const std::string& version = "2025-11-25",
                         const std::string& target = "/mcp") {
    json init = {{"jsonrpc", "2.0"},
                 {"id", 1},
                 {"method", "initialize"},
                 {"params",
                  {{"protocolVersion", version},
                   {"capabilities", json::object()},
                   {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
    auto response = Post(init.dump(), {}, std::string(kGoodKey), target);
    REQUIRE(response.status == 200);
    CHECK(json::parse(response.body)["result"]["protocolVersion"] == version);
    std::string id(response.Header("Mcp-Session-Id"));
    REQUIRE(id.size() == 32);
    return id;
  }
  int api_calls() const { return api_calls_.load(); }
  mcp::McpHttpContext& mcp() { return mcp_; }

 private:
  boost::asio::io_context io_;
  boost::asio::thread_pool pool_;
  mcp::McpHttpContext mcp_;
  std::unique_ptr<http::Server> server_;
  Endpoint endpoint_;
  std::thread thread_;
  std::atomic<int> api_calls_{0};
};

int RpcCode(const client::Response& response) {
  return json::parse(response.body)["error"]["code"].get<int>();
}

}  // namespace

TEST_CASE("MCP over HTTP: initialize opens a session that later requests use", "[mcp][http]") {
  Fixture f;
  std::string session = f.Initialize();
  CHECK(f.api_calls() == 1);  // the key check
  CHECK(f.mcp().sessions().size() == 1);

  auto initialized = f.Post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                            {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "2025-11-25"}});
  CHECK(initialized.status == 202);
  CHECK(initialized.body.empty());

  auto tools = f.Post(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})", {{"Mcp-Session-Id", session}});
  REQUIRE(tools.status == 200);
  CHECK(tools.Header("Content-Type").starts_with("application/json"));
  CHECK(json::parse(tools.body)["result"]["tools"].size() == mcp::AllTools().size());  // every tool (unit_mcp checks each name)

  // A tool call reaches "berthd" with the caller's key.
  auto list = f.Post(
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"workspace_list","arguments":{}}})",
      {{"Mcp-Session-Id", session}});
  REQUIRE(list.status == 200);
  json result = json::parse(list.body)["result"];
  CHECK_FALSE(result.contains("isError"));
  CHECK(result["structuredContent"]["workspaces"][0]["name"] == "alpha");
  CHECK(f.api_calls() == 2);

  // A batch of requests gets an array of responses.
  auto batch = f.Post(R"([{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}])",
                      {{"Mcp-Session-Id", session}});
  REQUIRE(batch.status == 200);
  CHECK(json::parse(batch.body).size() == 2);

  // DELETE ends it; the id is then unknown.
  CHECK(f.Send(verb::delete_, {{"Mcp-Session-Id", session}}).status == 200);
  auto gone = f.Post(R"({"jsonrpc":"2.0","id":6,"method":"ping"})", {{"Mcp-Session-Id", session}});
  CHECK(gone.status == 404);
  CHECK(RpcCode(gone) == -32001);
  CHECK(f.Send(verb::delete_, {{"Mcp-Session-Id", session}}).status == 404);
}

TEST_CASE("MCP over HTTP: malformed input gets JSON-RPC errors with 4xx statuses", "[mcp][http]") {
  Fixture f;
  auto parse = f.Post("{nope");
  CHECK(parse.status == 400);
  CHECK(RpcCode(parse) == -32700);

  std::string session = f.Initialize();
  auto invalid = f.Post(R"({"jsonrpc":"2.0","id":1,"method":7})", {{"Mcp-Session-Id", session}});
  CHECK(invalid.status == 400);
  CHECK(RpcCode(invalid) == -32600);

  auto unknown = f.Post(R"({"jsonrpc":"2.0","id":2,"method":"nope"})", {{"Mcp-Session-Id", session}});
  CHECK(unknown.status == 200);
  CHECK(RpcCode(unknown) == -32601);

  auto params = f.Post(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}})",
                       {{"Mcp-Session-Id", session}});
  CHECK(params.status == 200);
  CHECK(RpcCode(params) == -32602);

  auto no_session = f.Post(R"({"jsonrpc":"2.0","id":4,"method":"ping"})");
  CHECK(no_session.status == 400);

  auto bad_version = f.Post(R"({"jsonrpc":"2.0","id":5,"method":"ping"})",
                            {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "1999-01-01"}});
  CHECK(bad_version.status == 400);

  auto batched_init = f.Post(
      R"([{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}])");
  CHECK(batched_init.status == 400);
  CHECK(RpcCode(batched_init) == -32600);

  auto bad_init = f.Post(R"({"jsonrpc":"2.0","id":7,"method":"initialize","params":{}})");
  CHECK(bad_init.status == 400);
  CHECK(RpcCode(bad_init) == -32602);
  CHECK(f.mcp().sessions().size() == 1);  // no session for a refused initialize
}

TEST_CASE("MCP over HTTP: keys, methods and origins", "[mcp][http]") {
  Fixture f;
  auto init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})";
  auto none = f.Post(init, {}, "");
  CHECK(none.status == 401);
  CHECK(none.Header("WWW-Authenticate") == "Bearer");
  auto wrong = f.Post(init, {}, "bad");
  CHECK(wrong.status == 401);
  CHECK(f.mcp().sessions().size() == 0);

  std::string session = f.Initialize("2025-06-18");
  // Another key cannot use (or end) this session.
  auto stolen = f.Post(R"({"jsonrpc":"2.0","id":2,"method":"ping"})", {{"Mcp-Session-Id", session}},
                       "other");
  CHECK(stolen.status == 404);
  CHECK(f.Send(verb::delete_, {{"Mcp-Session-Id", session}}, "other").status == 404);

  auto get = f.Send(verb::get, {{"Mcp-Session-Id", session}});
  CHECK(get.status == 405);
  CHECK(get.Header("Allow") == "POST, DELETE");

  auto cross = f.Post(R"({"jsonrpc":"2.0","id":3,"method":"ping"})",
                      {{"Mcp-Session-Id", session}, {"Origin", "http://evil.example"}});
  CHECK(cross.status == 403);
  auto same = f.Post(R"({"jsonrpc":"2.0","id":4,"method":"ping"})",
                     {{"Mcp-Session-Id", session}, {"Origin", "http://localhost:3000"}});
  CHECK(same.status == 200);
}

TEST_CASE("MCP over HTTP: /mcp?workspace=NAME sets the session's default workspace", "[mcp][http]") {
  Fixture f;
  std::string session = f.Initialize("2025-11-25", "/mcp?workspace=alpha");
  auto got = f.Post(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workspace_get","arguments":{}}})",
      {{"Mcp-Session-Id", session}});
  REQUIRE(got.status == 200);
  json result = json::parse(got.body)["result"];
  CHECK_FALSE(result.contains("isError"));
  CHECK(result["structuredContent"]["state"] == "stopped");
}

TEST_CASE("MCP over HTTP: a backend factory serves the tools without berthd's HTTP API",
          "[mcp][http]") {
  // The shape of berthd's in-process /mcp: the backend is made from the request (its key, its
  // principal), and tool calls go to it, not over loopback HTTP.
  auto fake = std::make_shared<mcp::FakeBackend>();
  fake->AddWorkspaceForTest("inproc-ws", v1::State::kRunning);
  std::atomic<int> opened{0};
  Fixture f([&](http::Exchange& ex, const std::string& key) -> Result<std::shared_ptr<mcp::Backend>> {
    ++opened;
    if (ex.path() != "/mcp") return Fail(ErrorCode::kInternal, "not the MCP route");
    if (key != kGoodKey) return Fail(ErrorCode::kUnauthenticated, "unknown key");
    return std::shared_ptr<mcp::Backend>(fake);
  });
  std::string session = f.Initialize();
  CHECK(opened == 1);
  auto list = f.Post(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workspace_list","arguments":{}}})",
      {{"Mcp-Session-Id", session}});
  REQUIRE(list.status == 200);
  json result = json::parse(list.body)["result"];
  CHECK_FALSE(result.contains("isError"));
  CHECK(result["structuredContent"]["workspaces"][0]["name"] == "inproc-ws");
  CHECK(f.api_calls() == 0);  // nothing went to berthd's HTTP API
  auto calls = fake->CallsForTest();
  CHECK(std::count(calls.begin(), calls.end(), "ListWorkspaces") == 1);

  // A refused caller: 401, no session.
  auto init = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})";
  auto refused = f.Post(init, {}, "bad");
  CHECK(refused.status == 401);
  CHECK(refused.Header("WWW-Authenticate") == "Bearer");
  CHECK(f.mcp().sessions().size() == 1);
}
