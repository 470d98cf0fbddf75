// How berthd's proxy reaches a workspace's agent for one request: a connection (an idle
// pooled one when the request may be sent twice, else a new one), the request header written
// on it, the response header read from it, and the connection given back to the pool when the
// answer was read to its end.
//
// The retry: a pooled connection may have been closed by the agent while it sat idle (the
// agent restarted, or its keep-alive timer fired first). Such a connection fails before the
// first byte of the answer (the write fails, or the read sees EOF or a reset). A replayable
// request (its whole body already in memory, no upgrade) is then sent once more, on a new
// connection. Nothing else is retried: a request whose body is streamed never takes a pooled
// connection, and a new connection that fails is the answer (503).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/http/types.h"
#include "controller/agent_client/agent_link.h"
#include "controller/agent_client/proxy_options.h"

namespace berth::agent_client {

// Idle keep-alive connections to agents, so a short request (an exec, a stat) does not pay a
// new connection (through passt into a guest, that is a handshake with a TCG guest). Holds
// raw descriptors, not Asio objects, so a connection can be picked up on any strand. Thread
// safe.
class AgentConnectionPool {
 public:
  // Connections idle longer than this are closed, not reused: well under the agent's own
  // keep-alive timeout (120 s), so a reused one is rarely half-closed by the agent under us
  // (and when it is, AgentConnector retries).
  static constexpr std::chrono::seconds kMaxIdle{30};
  static constexpr size_t kMaxPerAgent = 8;

  AgentConnectionPool() = default;
  ~AgentConnectionPool();
  AgentConnectionPool(const AgentConnectionPool&) = delete;
  AgentConnectionPool& operator=(const AgentConnectionPool&) = delete;

  // An idle connection to the agent at `key`, or -1. The caller owns it.
  int Take(const std::string& key);
  // Gives a connection back (its response was read to the end, nothing is buffered).
  void Put(const std::string& key, int fd);
  // Idle connections held for `key` (tests).
  size_t IdleCountForTest(const std::string& key);

 private:
  struct Idle {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex mutex_;
  std::map<std::string, std::vector<Idle>> idle_;
};

// One exchange with the agent: the connection, its read buffer and the response parser (the
// relay reads the body through them).
struct Upstream {
  explicit Upstream(const boost::asio::any_io_executor& executor);
  http::Stream stream;
  http::beast::flat_buffer buffer;
  // Always engaged; optional only so that ResetParser can make a fresh one (a parser reads one
  // message).
  std::optional<http::bhttp::response_parser<http::bhttp::buffer_body>> parser;
  bool reused = false;  // taken from the pool
  // A fresh parser for the next response header: at most `header_limit` bytes, the body
  // unbounded (the relay bounds time, not size), none at all after a HEAD.
  void ResetParser(uint32_t header_limit, bool head);
};

// Where a connector's connections lead.
struct ConnectorTarget {
  // nullopt: the agent's own API. A port: a raw tunnel (`GET /v1/tunnel?port=N`, `Upgrade:
  // berth-tcp`) to that port on the guest's loopback, opened on every new connection, so the
  // requests go to the guest's server, not to the agent (previews). Pooled connections are
  // kept per port.
  std::optional<uint16_t> tunnel_port;
};

class AgentConnector {
 public:
  using Request = http::bhttp::request<http::bhttp::empty_body>;

  // `pool` may be null (no pooling). `link`, `options` and `pool` must outlive the connector.
  AgentConnector(const AgentLink& link, const ProxyOptions& options, AgentConnectionPool* pool,
                 ConnectorTarget target = {});

  // A replayable request: sends `request` and then `body` (all of it; `request` says its
  // length) on a pooled connection when one is idle, else a new one, and reads the response
  // header; retried once on a new connection when a pooled one turns out closed (see above).
  // The upstream it returns is the connector's (valid until the next call or its end).
  // Errors: unavailable (the agent cannot be reached, or broke off, or Abort() was called;
  // through a tunnel also: the agent refused it, its message saying why, e.g. nothing listens
  // on the port), deadline_exceeded (no answer within ProxyOptions::response_timeout).
  // Informational answers (1xx but 101) are read past: the header returned is the final one.
  http::Task<Result<Upstream*>> RoundTrip(const Request& request, std::string_view body);

  // A request that cannot be sent twice (its body is streamed, or it upgrades): a new
  // connection with the header written. The caller writes the body to its stream and then
  // calls ReadResponseHeader.
  http::Task<Result<Upstream*>> Open(const Request& request);

  // A new connection through the target's tunnel (the target must have a port) with nothing
  // sent on it yet, for a caller that speaks the guest server's protocol itself (the
  // desktop's DevTools tunnel). The stream is the caller's from then on (no deadline set);
  // the connector keeps nothing of it. Errors as for Open.
  http::Task<Result<http::Stream>> OpenRaw();
  http::Task<Status> ReadResponseHeader();

  // Gives the connection back to the pool if its answer was read to the end, the agent keeps
  // it alive and nothing of it is left unread; else it is closed when the connector ends.
  void Recycle();

  // The client went away: the connection in use is shut down (what is pending on it fails at
  // once, and the agent sees its request's connection close) and nothing more is attempted.
  // Not when the agent's answer was already read whole: then nothing is pending on it, and
  // Recycle can still pool it. Idempotent.
  void Abort();
  bool aborted() const { return aborted_; }

  // The connection in use (from RoundTrip or Open), or null.
  Upstream* upstream() { return up_.get(); }

  // Connections opened (not taken from the pool) and requests sent again after a stale pooled
  // connection, by this connector (tests, logs).
  int connects() const { return connects_; }
  int retries() const { return retries_; }

  // The pool key of an agent: its address and (a hash of) its token, so a new boot (a new
  // token) never reuses a connection to the previous one.
  // Connections through a tunnel are kept apart per port.
  static std::string PoolKey(const AgentLink& link, ConnectorTarget target = {});

  // All of the above: call on one strand (the client connection's).

 private:
  // A new upstream in up_: a pooled connection if `allow_pooled` and one is idle, else a new
  // one (through its tunnel when the target has one).
  http::Task<Status> Connect(bool allow_pooled);
  // On a new connection: asks the agent for the raw tunnel and reads its 101.
  http::Task<Status> OpenTunnel(uint16_t port);
  http::Task<Status> Write(const Request& request, std::string_view body);

  // The answer on up_ was read to its end, the agent keeps the connection and nothing of it is
  // buffered: it can be used again.
  bool AnswerReadWhole() const;

  const AgentLink& link_;
  const ProxyOptions& options_;
  ConnectorTarget target_;
  AgentConnectionPool* pool_;
  std::string pool_key_;
  std::unique_ptr<Upstream> up_;  // the connection in use: the one Abort() shuts down
  boost::system::error_code last_error_;  // of the last write or read on up_
  bool aborted_ = false;
  bool head_ = false;  // the request is a HEAD: its answer has no body whatever it says
  int connects_ = 0;
  int retries_ = 0;
};

}  // namespace berth::agent_client
