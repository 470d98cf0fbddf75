// The guest network as the API sees it: a workspace's policy, stored through its owner like any
// other change of its record, then applied by the NetworkManager to the running guest.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;

std::string WorkspaceService::NetworkIsolation() const {
  if (!options_.network || !options_.network->isolation()) return "off";
  return options_.network->install_error() ? "failed" : "isolated";
}

Result<network::NetworkStatus> WorkspaceService::GetNetwork(const std::string& tenant_id,
                                                            const std::string& id_or_name) {
  auto ws = Get(tenant_id, id_or_name);
  if (!ws) return Fail(ws.error());
  if (!options_.network) {
    network::NetworkStatus status;
    status.policy = ws->network;
    status.isolated = false;
    return status;
  }
  return options_.network->Read(*ws);
}

Result<network::NetworkStatus> WorkspaceService::SetNetwork(const std::string& tenant_id,
                                                            const std::string& id_or_name,
                                                            const network::Policy& policy) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) return Fail(found.error());
  ActorPtr a = *found;
  auto store = [this, a, policy]() -> Task<Result<Workspace>> {
    Workspace ws = a->record();
    if (ws.state == State::kDeleting) co_return Fail(Conflict(ws, "change the network of"));
    ws.network = policy;
    ws.updated_at = Now();
    auto detail = network::PolicyJson(policy);
    if (auto s = Commit(*a, ws, "network_policy", DumpJson(detail), detail); !s) co_return Fail(s.error());
    co_return a->record();
  };
  // Called on the API's blocking pool, never on the strand's threads: waiting here is safe.
  auto stored = asio::co_spawn(a->strand(), std::move(store), asio::use_future).get();
  if (!stored) return Fail(stored.error());
  if (!options_.network) {
    network::NetworkStatus status;
    status.policy = stored->network;
    return status;
  }
  // Applied after it is stored: the manager re-reads the stored policy, so a boot that applies
  // rules at the same moment applies this one too.
  if (auto s = options_.network->ApplyPolicy(*stored); !s) return Fail(s.error());
  return options_.network->Read(*stored);
}

}  // namespace berth::workspace
