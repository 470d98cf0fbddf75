// GET|PATCH /v1/workspaces/{ws}/network over real HTTP, and the CLI (`berth network`) and the MCP
// tool (network_policy) that call it, against the routes mounted on a server whose
// WorkspaceNetworkApi is a fake (the workspace service implements the real one).
#include <sstream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cli/app.h"
#include "common/client/api_client.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "controller/api/api_server.h"
#include "controller/network/network_api.h"
#include "mcp/http_backend.h"
#include "mcp/tool.h"

using namespace berth;
using boost::beast::http::verb;
using nlohmann::json;

namespace {

class FakeNetworkApi : public network::WorkspaceNetworkApi {
 public:
  Result<network::NetworkStatus> GetNetwork(const std::string& tenant, const std::string& ws) override {
    std::lock_guard lock(mutex_);
    if (tenant != "t_1" || ws != "demo") return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", ws));
    return status_;
  }
  Result<network::NetworkStatus> SetNetwork(const std::string& tenant, const std::string& ws,
                                            const network::Policy& policy) override {
    std::lock_guard lock(mutex_);
    if (tenant != "t_1" || ws != "demo") return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", ws));
    status_.policy = policy;
    ++sets_;
    return status_;
  }
  network::NetworkStatus status() {
    std::lock_guard lock(mutex_);
    return status_;
  }
  int sets() {
    std::lock_guard lock(mutex_);
    return sets_;
  }
  FakeNetworkApi() {
    status_.isolated = true;
    status_.uid = 2000001;
    status_.counters.refused_packets = 7;
    status_.dns.refused = 2;
    status_.refused = {{"169.254.169.254", 80, 1764580000}};
    status_.dns.recent_refused = {{"denied.test.", 1764580001}};
  }

 private:
  std::mutex mutex_;
  network::NetworkStatus status_;
  int sets_ = 0;
};

// The routes behind the same principal check as berthd's: "write-key" and "read-key".
struct Fixture {
  Fixture() : pool(2) {
    api::AddNetworkRoutes(router, pool, fake);
    http::Handler handler = [this](http::Exchange& ex) -> http::Task<void> {
      std::string auth(ex.header(http::bhttp::field::authorization));
      if (auth != "Bearer write-key" && auth != "Bearer read-key") {
        co_await ex.SendError(Error(ErrorCode::kUnauthenticated, "bad key"));
        co_return;
      }
      ex.context()["tenant_id"] = "t_1";
      ex.context()["scope"] = auth == "Bearer write-key" ? "write" : "read";
      co_await router.Dispatch(ex);
    };
    server = std::make_unique<http::Server>(io, http::ServerOptions{}, handler);
    auto bound = server->Listen(*Endpoint::Parse("tcp:127.0.0.1:0"));
    REQUIRE(bound);
    endpoint = *bound;
    thread = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io);
      io.run();
    });
  }
  ~Fixture() {
    server->Stop();
    io.stop();
    thread.join();
    pool.join();
  }
  client::Response Call(verb method, const std::string& target, const std::string& body = {},
                        const std::string& key = "write-key") {
    client::ApiClient c(endpoint, key);
    auto r = c.Request(method, target, body, body.empty() ? "" : "application/json");
    REQUIRE(r);
    return *r;
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", endpoint.port); }
  // `berth ARGS` in-process; exit code, and stdout in `out`.
  int Berth(std::vector<std::string> args, std::string& out) {
    std::ostringstream o, e;
    std::istringstream in;
    cli::Environment env;
    std::string u = url();
    env.getenv = [u](const std::string& name) -> std::optional<std::string> {
      if (name == "BERTH_URL") return u;
      if (name == "BERTH_API_KEY") return std::string("write-key");
      if (name == "BERTH_CONFIG") return std::string("/nonexistent/berth-config.json");
      return std::nullopt;
    };
    env.in = &in;
    env.out = &o;
    env.err = &e;
    env.now = [] { return std::chrono::system_clock::now(); };
    cli::App app;
    int rc = app.Run(std::move(args), env);
    out = o.str() + e.str();
    return rc;
  }

  boost::asio::io_context io;
  boost::asio::thread_pool pool;
  http::Router router;
  FakeNetworkApi fake;
  std::unique_ptr<http::Server> server;
  Endpoint endpoint;
  std::thread thread;
};

}  // namespace

TEST_CASE_METHOD(Fixture, "GET …/network: policy, isolation, counters and refusals with times", "[network][api]") {
  auto r = Call(verb::get, "/v1/workspaces/demo/network", {}, "read-key");
  REQUIRE(r.status == 200);
  auto j = json::parse(r.body);
  CHECK(j["egress"] == "open");
  CHECK(j["allow"] == json::array());
  CHECK(j["isolated"] == true);
  CHECK(j["counters"]["refused_packets"] == 7);
  CHECK(j["counters"]["refused_names"] == 2);
  CHECK(j["refused"] == json::parse(R"([{"address":"169.254.169.254","port":80,"at":"2025-12-01T09:06:40Z"}])"));
  CHECK(j["refused_names"][0]["name"] == "denied.test.");
  CHECK(Call(verb::get, "/v1/workspaces/other/network").status == 404);
}

TEST_CASE_METHOD(Fixture, "PATCH …/network: validated, needs a write key, and the whole policy is set", "[network][api]") {
  auto denied = Call(verb::patch, "/v1/workspaces/demo/network", R"({"egress":"none"})", "read-key");
  CHECK(denied.status == 403);
  auto bad = Call(verb::patch, "/v1/workspaces/demo/network", R"({"egress":"open","allow":["a.com"]})");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"]["message"].get<std::string>().find("only for egress \"allowlist\"") != std::string::npos);
  CHECK(Call(verb::patch, "/v1/workspaces/demo/network", R"({"allow":["com"]})").status == 400);
  CHECK(Call(verb::patch, "/v1/workspaces/demo/network", "[1]").status == 400);
  CHECK(fake.sets() == 0);
  auto ok = Call(verb::patch, "/v1/workspaces/demo/network", R"({"egress":"allowlist","allow":["github.com","10.1.0.0/16"]})");
  REQUIRE(ok.status == 200);
  CHECK(json::parse(ok.body)["allow"] == json::parse(R"(["github.com","10.1.0.0/16"])"));
  CHECK(fake.sets() == 1);
  CHECK(fake.status().policy.egress == network::Egress::kAllowlist);
  CHECK(Call(verb::patch, "/v1/workspaces/nope/network", R"({"egress":"none"})").status == 404);
}

TEST_CASE_METHOD(Fixture, "berth network shows and sets the policy", "[network][cli]") {
  std::string out;
  REQUIRE(Berth({"network", "demo"}, out) == 0);
  CHECK(out.find("egress:    open") != std::string::npos);
  CHECK(out.find("isolated:  yes") != std::string::npos);
  CHECK(out.find("169.254.169.254:80") != std::string::npos);
  CHECK(out.find("name denied.test.") != std::string::npos);
  REQUIRE(Berth({"network", "demo", "--allow", "github.com", "--allow", "*.pypi.org"}, out) == 0);
  CHECK(fake.status().policy.names == std::vector<std::string>{"github.com", "*.pypi.org"});
  CHECK(out.find("allow:     github.com, *.pypi.org") != std::string::npos);
  REQUIRE(Berth({"network", "demo", "--egress", "none", "--json"}, out) == 0);
  CHECK(json::parse(out)["egress"] == "none");
  CHECK(Berth({"network", "demo", "--egress", "open", "--allow", "a.com"}, out) != 0);  // berthd refuses
  CHECK(out.find("allowlist") != std::string::npos);
  CHECK(Berth({"network", "demo", "--egress", "sometimes"}, out) != 0);  // the CLI refuses
}

TEST_CASE_METHOD(Fixture, "the network_policy MCP tool reads and sets the policy", "[network][mcp]") {
  const mcp::Tool* tool = mcp::FindTool("network_policy");
  REQUIRE(tool);
  mcp::HttpBackend backend(endpoint, "write-key");
  mcp::SessionState state("demo");
  mcp::ToolContext ctx(backend, state);
  auto read = mcp::CallTool(*tool, ctx, json::object());
  REQUIRE_FALSE(read.is_error);
  CHECK(read.texts.at(0).find("egress open, isolated from the host") != std::string::npos);
  CHECK(read.texts.at(0).find("169.254.169.254 port 80") != std::string::npos);
  auto set = mcp::CallTool(*tool, ctx, json::parse(R"({"egress":"allowlist","allow":["github.com"]})"));
  REQUIRE_FALSE(set.is_error);
  CHECK(set.texts.at(0).find("egress allowlist (github.com)") != std::string::npos);
  CHECK(fake.status().policy.names == std::vector<std::string>{"github.com"});
  auto bad = mcp::CallTool(*tool, ctx, json::parse(R"({"egress":"sometimes"})"));
  CHECK(bad.is_error);
}
