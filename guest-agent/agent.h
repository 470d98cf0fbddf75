// berth-agent as a library: the listeners, token check and routes. main.cc only parses flags
// and calls this; tests run it in-process on a unix socket or TCP port 0.
#pragma once

#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/error.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "guest-agent/activity.h"
#include "guest-agent/agent_options.h"

namespace berth::agent {

class ProcessTable;

class Agent {
 public:
  // `io` must be run by exactly one thread: the agent's state lives on it without locks.
  Agent(boost::asio::io_context& io, AgentOptions options);
  ~Agent();

  // Binds every listener. Returns the bound endpoints (real ports for port 0), in order;
  // skipped vsock listeners are left out. Fails if no API listener could be bound.
  Result<std::vector<Endpoint>> Start();
  // Stops accepting, closes connections, ends processes started through the API.
  void Stop();

  ActivityTracker& activity() { return activity_; }

 private:
  http::Task<void> HandleApi(http::Exchange& exchange);
  http::Task<void> HandleLocal(http::Exchange& exchange);

  boost::asio::io_context& io_;
  AgentOptions options_;
  // The token requests must carry: options_.token until POST /v1/identity gives another.
  std::string token_;
  boost::asio::thread_pool blocking_;
  ActivityTracker activity_;
  std::unique_ptr<ProcessTable> processes_;
  std::vector<uint16_t> own_tcp_ports_;  // ApiContext::own_tcp_ports
  http::Router api_router_;
  http::Router local_router_;
  std::unique_ptr<http::Server> api_server_;
  std::unique_ptr<http::Server> local_server_;
};

}  // namespace berth::agent
