#include "guest-agent/agent.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "guest-agent/process_table.h"
#include "guest-agent/api_context.h"

namespace berth::agent {
namespace {

// Compares two secrets in time independent of where they differ (and of their lengths, by
// comparing digests).
bool TokensEqual(std::string_view a, std::string_view b) {
  unsigned char da[SHA256_DIGEST_LENGTH];
  unsigned char db[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da);
  SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db);
  return CRYPTO_memcmp(da, db, sizeof(da)) == 0;
}

}  // namespace

Agent::Agent(boost::asio::io_context& io, AgentOptions options)
    : io_(io),
      options_(std::move(options)),
      token_(options_.token),
      blocking_(static_cast<size_t>(std::max(1, options_.blocking_threads))),
      processes_(std::make_unique<ProcessTable>(io_, activity_)) {
  ApiContext ctx{options_, io_, blocking_, activity_, *processes_, own_tcp_ports_, token_};
  AddSystemRoutes(api_router_, ctx);
  AddSyncRoute(api_router_, ctx);
  AddIdentityRoute(api_router_, ctx);
  AddDiffRoute(api_router_, ctx);
  AddExecRoutes(api_router_, ctx);
  AddProcessRoutes(api_router_, ctx);
  AddFileRoutes(api_router_, ctx);
  AddPortRoutes(api_router_, ctx);
  AddActivityRoutes(api_router_, ctx);
  AddSystemRoutes(local_router_, ctx);
  AddLocalRoutes(local_router_, ctx);
}

Agent::~Agent() {
  Stop();
  blocking_.join();
}

Result<std::vector<Endpoint>> Agent::Start() {
  if (token_.empty()) return Fail(ErrorCode::kInvalidArgument, "no token configured");
  api_server_ = std::make_unique<http::Server>(
      io_, options_.server, [this](http::Exchange& ex) { return HandleApi(ex); });
  std::vector<Endpoint> bound;
  for (const auto& endpoint : options_.listen) {
    auto result = api_server_->Listen(endpoint, 0600);
    if (!result) {
      if (endpoint.kind == Endpoint::Kind::kVsock) {
        spdlog::warn("skipping {}: {}", endpoint.ToString(), result.error().message);
        continue;
      }
      return Fail(result.error());
    }
    spdlog::info("listening on {}", result->ToString());
    if (result->kind == Endpoint::Kind::kTcp) own_tcp_ports_.push_back(result->port);
    bound.push_back(*result);
  }
  if (bound.empty()) return Fail(ErrorCode::kUnavailable, "no listener could be opened");
  if (!options_.local_socket.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(
        std::filesystem::path(options_.local_socket).parent_path(), ec);
    local_server_ = std::make_unique<http::Server>(
        io_, options_.server, [this](http::Exchange& ex) { return HandleLocal(ex); });
    auto local = Endpoint::Parse("unix:" + options_.local_socket);
    // Any local user may take a keep-awake lease: the socket grants nothing else.
    auto result = local ? local_server_->Listen(*local, 0666) : Result<Endpoint>(Fail(local.error()));
    if (!result) {
      spdlog::warn("local socket {}: {}", options_.local_socket, result.error().message);
    }
  }
  return bound;
}

void Agent::Stop() {
  if (api_server_) api_server_->Stop();
  if (local_server_) local_server_->Stop();
  if (processes_) processes_->Shutdown();
}

http::Task<void> Agent::HandleApi(http::Exchange& exchange) {
  bool health = exchange.method() == http::bhttp::verb::get && exchange.path() == "/v1/health";
  if (!health) {
    std::string_view auth = exchange.header(http::bhttp::field::authorization);
    constexpr std::string_view kBearer = "Bearer ";
    if (!auth.starts_with(kBearer) || !TokensEqual(auth.substr(kBearer.size()), token_)) {
      co_await exchange.SendError(
          {ErrorCode::kUnauthenticated, "missing or wrong agent token (Authorization: Bearer)"});
      co_return;
    }
    // berthd's idle loop polls /v1/activity; its polls must not count as activity.
    bool activity_poll =
        exchange.method() == http::bhttp::verb::get && exchange.path() == "/v1/activity";
    if (!activity_poll) activity_.Touch();
  }
  co_await api_router_.Dispatch(exchange);
}

http::Task<void> Agent::HandleLocal(http::Exchange& exchange) {
  co_await local_router_.Dispatch(exchange);
}

}  // namespace berth::agent
