// Typed calls for ports, activity and keep-awake leases on top of ApiClient. `scope` is the
// API prefix: "/v1" for berth-agent, "/v1/workspaces/{id}" for berthd's mirror of it.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/client/api_client.h"
#include "common/protocol/ports.h"

namespace berth::client {

// GET {scope}/ports
Result<std::vector<protocol::PortInfo>> ListPorts(ApiClient& client, std::string_view scope);
// GET {scope}/activity, as the server sent it.
Result<nlohmann::json> GetActivity(ApiClient& client, std::string_view scope);
// POST {scope}/leases
Result<protocol::Lease> TakeLease(ApiClient& client, std::string_view scope,
                                  const protocol::LeaseRequest& request);
// POST {scope}/leases/{id}/renew
Result<protocol::Lease> RenewLease(ApiClient& client, std::string_view scope, uint64_t id,
                                   std::chrono::seconds duration);
// DELETE {scope}/leases/{id}
Status ReleaseLease(ApiClient& client, std::string_view scope, uint64_t id);

}  // namespace berth::client
