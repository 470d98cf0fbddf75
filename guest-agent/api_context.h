// What route handlers share: the options, the activity tracker, the process table and a pool
// for blocking work. Owned by Agent; handlers touch the mutable parts only on the I/O thread.
#pragma once

#include <cstdint>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/http/router.h"
#include "guest-agent/activity.h"
#include "guest-agent/agent_options.h"

namespace berth::agent {

class ProcessTable;

struct ApiContext {
  const AgentOptions& options;
  boost::asio::io_context& io;
  boost::asio::thread_pool& blocking;
  ActivityTracker& activity;
  ProcessTable& processes;
  // The TCP ports the agent's own API listens on (bound in Agent::Start, before any request):
  // no port of the workspace's, so GET /v1/ports leaves them out.
  const std::vector<uint16_t>& own_tcp_ports;
  // The token every request must carry (on the I/O thread): POST /v1/identity replaces it.
  std::string& token;
};

// Each API area adds its routes (one file each), as berthd's api/ does.
void AddSystemRoutes(http::Router& router, ApiContext& ctx);    // health, info
void AddSyncRoute(http::Router& router, ApiContext& ctx);       // sync (berthd's only)
void AddIdentityRoute(http::Router& router, ApiContext& ctx);   // identity (berthd's, a fork's)
void AddDiffRoute(http::Router& router, ApiContext& ctx);       // diff (berthd's, checkpoints)
void AddExecRoutes(http::Router& router, ApiContext& ctx);      // exec, exec/ws
void AddProcessRoutes(http::Router& router, ApiContext& ctx);   // processes
void AddFileRoutes(http::Router& router, ApiContext& ctx);      // files, tar, watch
void AddPortRoutes(http::Router& router, ApiContext& ctx);      // ports, tunnel
void AddActivityRoutes(http::Router& router, ApiContext& ctx);  // activity, leases
// Routes on the local token-less socket (keep-awake leases from inside the guest).
void AddLocalRoutes(http::Router& router, ApiContext& ctx);

}  // namespace berth::agent
