#include "controller/agent_client/agent_link.h"

#include "common/client/api_client.h"

namespace berth::agent_client {

Result<nlohmann::json> FetchActivity(const AgentLink& link, std::chrono::milliseconds timeout) {
  client::ClientOptions options;
  options.connect_timeout = timeout;
  options.io_timeout = timeout;
  options.max_response_bytes = 1 << 20;  // an activity answer is small; a guest is not trusted
  client::ApiClient api(link.endpoint, link.token, options);
  return api.Json(http::bhttp::verb::get, "/v1/activity");
}

}  // namespace berth::agent_client
