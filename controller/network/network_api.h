// What the API's network routes (controller/api/network_routes.cc) need from berthd, as a small
// interface so the routes do not depend on the workspace service class. The workspace service
// implements it: a tenant-scoped lookup (another tenant's workspace is not_found), and for Set
// the policy stored through its record-writing path and then NetworkManager::ApplyPolicy.
// Both calls block (store, netlink); the routes run them on the API's pool.
#pragma once

#include <string>

#include "common/error.h"
#include "controller/network/network_manager.h"
#include "controller/network/policy.h"

namespace berth::network {

class WorkspaceNetworkApi {
 public:
  virtual ~WorkspaceNetworkApi() = default;
  // The workspace's policy, isolation, counters and recent refusals.
  virtual Result<NetworkStatus> GetNetwork(const std::string& tenant_id, const std::string& id_or_name) = 0;
  // Stores `policy` and applies it to the running guest at once; the resulting status.
  virtual Result<NetworkStatus> SetNetwork(const std::string& tenant_id, const std::string& id_or_name,
                                           const Policy& policy) = 0;
};

// The API's shape of a status (docs/api.md, "Network"); `now`-free: times are absolute.
nlohmann::json NetworkStatusJson(const NetworkStatus& status);

}  // namespace berth::network
