// berthd's workspace routes mirror the agent's API (DESIGN.md, "The path of a request"): this
// forwards one request to the agent and its answer back, streaming both bodies chunk by chunk
// (never whole), and turns an upgrade (the exec WebSocket, tunnels) into a byte pipe between
// the two connections, so WebSocket framing stays end to end between client and agent.
//
// Its parts, each in its own file:
//  - agent_target.h: the agent's target, from what the router matched;
//  - upstream_request.h: the request header the agent gets (a pure function: hop-by-hop and
//    berthd's own fields dropped, the client's key replaced by the boot's agent token,
//    Berth-Env from the workspace);
//  - agent_connector.h: the connection (pooled when the request can be sent twice), and the
//    one retry of a pooled connection the agent closed while it was idle;
//  - response_relay.h: the answer, fixed, chunked, empty or upgraded (common/net/pump.h);
//  - common/net/peer_watch.h: once the client has sent its whole request, its connection is
//    watched, and a client that goes away cancels the request to the agent (the connection
//    to the agent is shut down) instead of leaving it, and the client's socket in CLOSE_WAIT,
//    until the agent answers.
// The guest is not trusted: its response header is bounded and every read has a deadline,
// except on an upgraded pipe, which may idle as long as both ends keep it open.
#pragma once

#include "common/http/server.h"
#include "controller/agent_client/agent_connector.h"
#include "controller/agent_client/agent_link.h"
#include "controller/agent_client/proxy_options.h"
#include "controller/agent_client/response_relay.h"
#include "controller/agent_client/upstream_request.h"

#include <functional>

namespace berth::agent_client {

// Request bodies up to this size are read whole before anything is sent to the agent, so the
// request is replayable (it may take a pooled connection, and be sent again when that turns
// out closed); larger ones stream through a new connection.
inline constexpr size_t kReplayableBody = 64 * 1024;

// Forwards `ex` to the agent as `target` (the agent's path and query, encoded: AgentTarget).
// Answers the client in every case (a 503 when the agent cannot be reached, 504 when it does
// not answer in time). `extra_headers` are set on the request to the agent, replacing any the
// client sent. With a `pool` (may be null), replayable requests reuse idle connections. Call
// on the client connection's strand (from its handler). `link`, `options`, `pool` and
// `extra_headers` must outlive the coroutine: no defaults on purpose, since a default argument
// is a temporary that dies before a coroutine started later runs.
http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options, AgentConnectionPool* pool,
                              const ExtraHeaders& extra_headers);

// What a caller may keep of a proxied exchange, for the timeline (api/agent_events.h).
struct ProxyTrace {
  // The request's body when it was read whole (at most kReplayableBody); nullopt when it
  // streamed through or there was none.
  std::optional<std::string> request_body;
  RelayTrace answer;
};
// The same, filling `trace` (which must outlive the coroutine).
http::Task<void> ProxyToAgent(http::Exchange& ex, const AgentLink& link, std::string target,
                              const ProxyOptions& options, AgentConnectionPool* pool,
                              const ExtraHeaders& extra_headers, ProxyTrace* trace);

// What a proxied exchange is made of besides the connector: ProxyToAgent's is the agent's API;
// the preview proxy's (controller/preview/) is an app behind a tunnel.
struct ProxyPlan {
  // The request header sent upstream, for the body framing the proxy chose.
  std::function<AgentConnector::Request(BodyFraming)> build;
  RelayPolicy relay = RelayPolicy::Agent();
  // Answers the client when the upstream cannot be reached or gives no answer (the
  // connector's error); empty: the error as JSON (SendError). Not called for a client that
  // went away.
  std::function<http::Task<void>(http::Exchange&, const Error&)> unreachable;
  // Filled when given: the request's body (when read whole) and, through relay.trace, the
  // answer.
  ProxyTrace* trace = nullptr;
};

// The proxy itself, for any plan: the request (whole when small, so it may take a pooled
// connection and be sent again; streamed otherwise), the client's connection watched while the
// answer is awaited, the answer relayed, an upgrade joined end to end. Answers the client in
// every case. `connector`, `plan` and `options` must outlive the coroutine. Call on the client
// connection's strand.
http::Task<void> ProxyThrough(http::Exchange& ex, AgentConnector& connector, const ProxyPlan& plan,
                              const ProxyOptions& options);

}  // namespace berth::agent_client
