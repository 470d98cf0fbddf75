// GET|PATCH /v1/workspaces/{ws}/network: the guest's egress policy, isolation, counters and
// recent refusals (docs/api.md, "Network"). The routes only parse, validate and authorize;
// the WorkspaceNetworkApi (the workspace service) stores and applies.
#include <fmt/format.h>

#include "controller/api/api_server.h"
#include "controller/network/network_api.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

http::Task<void> Send(http::Exchange& ex, const Result<network::NetworkStatus>& result) {
  if (!result) {
    co_await ex.SendError(result.error());
    co_return;
  }
  auto body = network::NetworkStatusJson(*result);
  co_await ex.SendJson(status::ok, body);
}

}  // namespace

http::Task<void> GetNetwork(boost::asio::thread_pool& pool, network::WorkspaceNetworkApi& api,
                            http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kRead)) co_return;
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto result = co_await RunBlocking(pool, [&] { return api.GetNetwork(tenant, ref); });
  co_await Send(ex, result);
}

http::Task<void> PatchNetwork(boost::asio::thread_pool& pool, network::WorkspaceNetworkApi& api,
                              http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  // The whole policy, as at create: {"egress": ..., "allow": [...]}.
  auto policy = network::ParsePolicy(*body);
  if (!policy) {
    co_await ex.SendError(policy.error());
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto result = co_await RunBlocking(pool, [&] { return api.SetNetwork(tenant, ref, *policy); });
  co_await Send(ex, result);
}

void AddNetworkRoutes(http::Router& router, boost::asio::thread_pool& pool, network::WorkspaceNetworkApi& api) {
  router.Add(verb::get, "/v1/workspaces/{ws}/network",
             [&pool, &api](http::Exchange& ex) { return GetNetwork(pool, api, ex); });
  router.Add(verb::patch, "/v1/workspaces/{ws}/network",
             [&pool, &api](http::Exchange& ex) { return PatchNetwork(pool, api, ex); });
}

}  // namespace berth::api
