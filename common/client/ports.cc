#include "common/client/ports.h"

#include <fmt/format.h>

namespace berth::client {

using http::bhttp::verb;

Result<std::vector<protocol::PortInfo>> ListPorts(ApiClient& client, std::string_view scope) {
  auto answer = client.Json(verb::get, fmt::format("{}/ports", scope));
  if (!answer) return Fail(answer.error());
  return protocol::PortListFromJson(*answer);
}

Result<nlohmann::json> GetActivity(ApiClient& client, std::string_view scope) {
  return client.Json(verb::get, fmt::format("{}/activity", scope));
}

Result<protocol::Lease> TakeLease(ApiClient& client, std::string_view scope,
                                  const protocol::LeaseRequest& request) {
  auto answer = client.Json(verb::post, fmt::format("{}/leases", scope), protocol::ToJson(request));
  if (!answer) return Fail(answer.error());
  return protocol::LeaseFromJson(*answer);
}

Result<protocol::Lease> RenewLease(ApiClient& client, std::string_view scope, uint64_t id,
                                   std::chrono::seconds duration) {
  nlohmann::json body = {{"duration_s", duration.count()}};
  auto answer = client.Json(verb::post, fmt::format("{}/leases/{}/renew", scope, id), body);
  if (!answer) return Fail(answer.error());
  return protocol::LeaseFromJson(*answer);
}

Status ReleaseLease(ApiClient& client, std::string_view scope, uint64_t id) {
  auto answer = client.Json(verb::delete_, fmt::format("{}/leases/{}", scope, id));
  if (!answer) return Fail(answer.error());
  return {};
}

}  // namespace berth::client
