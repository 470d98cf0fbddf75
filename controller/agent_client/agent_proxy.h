// berthd's workspace routes mirror the agent's API (DESIGN.md, "The path of a request"): this
// forwards one request to the agent and its answer back, streaming both bodies chunk by chunk
// (never whole), and turns an upgrade (the exec WebSocket, tunnels) into a byte pipe between
// the two connections, so WebSocket framing stays end to end between client and agent.
//
// Hop-by-hop headers are dropped, the client's Authorization is replaced by the agent's
// per-boot token, and the agent's answer is relayed with its status. The guest is not
// trusted: its response header is bounded and every read has a deadline, except on an
// upgraded pipe, which may idle as long as both ends keep it open.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <map>
#include <mutex>
#include <vector>
#include <string>

#include "common/http/server.h"
#include "controller/agent_client/agent_link.h"

namespace berth::agent_client {

struct ProxyOptions {
  // Connecting to the agent: a loopback port, a vsock or a unix socket answer at once or not
  // at all.
  std::chrono::milliseconds connect_timeout{5000};
  // Waiting for the agent's response header: an exec in wait mode answers only when its
  // command ends, and the agent bounds that by the command's own timeout.
  std::chrono::seconds response_timeout{6 * 3600};
  // Each body read or write must make progress within this (streams send keepalives).
  std::chrono::seconds io_timeout{120};
  // A response header from the guest larger than this is refused.
  uint32_t max_response_header = 64 * 1024;
};

// Idle keep-alive connections to agents, so a short request (an exec, a stat) does not pay a
// new connection (through passt into a guest, that is a handshake with a TCG guest). Holds
// raw descriptors, not Asio objects, so a connection can be picked up on any strand. Thread
// safe.
class AgentConnectionPool {
 public:
  // Connections idle longer than this are closed, not reused: well under the agent's own
  // keep-alive timeout (120 s), so a reused one is never half-closed by the agent under us.
  static constexpr std::chrono::seconds kMaxIdle{30};
  static constexpr size_t kMaxPerAgent = 8;

  AgentConnectionPool() = default;
  ~AgentConnectionPool();
  AgentConnectionPool(const AgentConnectionPool&) = delete;
  AgentConnectionPool& operator=(const AgentConnectionPool&) = delete;

  // An idle connection to the agent at `key`, or -1.
  int Take(const std::string& key);
  // Gives a connection back (its response was read to the end, nothing is buffered).
  void Put(const std::string& key, int fd);

 private:
  struct Idle {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex mutex_;
  std::map<std::string, std::vector<Idle>> idle_;
};

using ExtraHeaders = std::vector<std::pair<std::string, std::string>>;

// Forwards `ex` to the agent as `target` (the agent's path and query, already encoded).
// Answers the client in every case (a 503 when the agent cannot be reached). Call on the
// connection's strand (from its handler).
// `extra_headers` are set on the request to the agent (replacing any the client sent).
// With a `pool`, requests whose body is small enough to buffer (so they can be sent again
// when a pooled connection turns out to be closed) reuse idle connections.
http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options = {},
                              AgentConnectionPool* pool = nullptr,
                              const ExtraHeaders& extra_headers = {});

}  // namespace berth::agent_client
