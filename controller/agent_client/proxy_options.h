// Limits and timeouts of berthd's proxy to agents (agent_proxy.h).
#pragma once

#include <chrono>
#include <cstdint>

namespace berth::agent_client {

struct ProxyOptions {
  // Connecting to the agent: a loopback port, a vsock or a unix socket answer at once or not
  // at all.
  std::chrono::milliseconds connect_timeout{5000};
  // Waiting for the agent's response header: an exec in wait mode answers only when its
  // command ends, and the agent bounds that by the command's own timeout. A client that goes
  // away ends the wait at once (the proxy watches its connection).
  std::chrono::seconds response_timeout{6 * 3600};
  // Each body read or write must make progress within this (streams send keepalives).
  std::chrono::seconds io_timeout{120};
  // A response header from the guest larger than this is refused.
  uint32_t max_response_header = 64 * 1024;
};

}  // namespace berth::agent_client
