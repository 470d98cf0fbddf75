// What route handlers share: the options, the activity tracker, the process table and a pool
// for blocking work. Owned by Agent; handlers touch the mutable parts only on the I/O thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/http/router.h"
#include "guest-agent/activity.h"
#include "guest-agent/agent_options.h"

namespace berth::agent {

class ProcessTable;

struct Services {
  const AgentOptions& options;
  boost::asio::io_context& io;
  boost::asio::thread_pool& blocking;
  ActivityTracker& activity;
  ProcessTable& processes;
};

// Each API area registers its routes; one file each.
void RegisterSystemRoutes(http::Router& router, Services& services);    // health, info
void RegisterExecRoutes(http::Router& router, Services& services);      // exec, exec/ws
void RegisterProcessRoutes(http::Router& router, Services& services);   // processes
void RegisterFileRoutes(http::Router& router, Services& services);      // files, tar, watch
void RegisterPortRoutes(http::Router& router, Services& services);      // ports, tunnel
void RegisterActivityRoutes(http::Router& router, Services& services);  // activity, leases
// Routes on the local token-less socket (keep-awake leases from inside the guest).
void RegisterLocalRoutes(http::Router& router, Services& services);

}  // namespace berth::agent
