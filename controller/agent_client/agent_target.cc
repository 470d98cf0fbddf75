#include "controller/agent_client/agent_target.h"

#include <fmt/format.h>

#include "common/http/url.h"

namespace berth::agent_client {

Result<std::string> AgentTarget(std::string_view decoded_path, std::string_view ws,
                                std::string_view raw_query) {
  constexpr std::string_view kPrefix = "/v1/workspaces/";
  if (ws.empty() || ws.find('/') != std::string_view::npos || !decoded_path.starts_with(kPrefix) ||
      decoded_path.substr(kPrefix.size(), ws.size()) != ws ||
      decoded_path.substr(kPrefix.size() + ws.size(), 1) != "/") {
    return Fail(ErrorCode::kInternal,
                fmt::format("'{}' is not a route under /v1/workspaces/{}/", decoded_path, ws));
  }
  std::string_view tail = decoded_path.substr(kPrefix.size() + ws.size());  // "/exec", "/files/a b"
  std::string target = "/v1" + http::PercentEncode(tail, /*keep_slash=*/true);
  if (!raw_query.empty()) {
    target += '?';
    target += raw_query;
  }
  return target;
}

}  // namespace berth::agent_client
