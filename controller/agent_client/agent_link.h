// How berthd reaches one workspace's agent: where (vsock CID, a forwarded loopback port, or a
// unix socket in tests) and with which per-boot token. Plus the blocking probes the boot
// watcher and the idle loop use. The token never leaves berthd: not in a response, a log or a
// URL.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/endpoint.h"
#include "common/error.h"

namespace berth::agent_client {

struct AgentLink {
  Endpoint endpoint;
  std::string token;
};

// An authenticated GET /v1/activity: proves the agent is up and holds this boot's token (a
// stale agent from an earlier boot answers 401). Blocking; any thread.
Result<nlohmann::json> FetchActivity(const AgentLink& link, std::chrono::milliseconds timeout);

}  // namespace berth::agent_client
