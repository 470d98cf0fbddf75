// MCP's streamable HTTP transport, for berthd's /mcp route. A POST carries a JSON-RPC message
// (or a batch) and gets its response as application/json (202 with no body for notifications
// and responses). `initialize` opens a session: the answer carries an Mcp-Session-Id header that
// the client sends on every later request; DELETE with it ends the session. GET answers 405:
// this server sends no messages of its own, so it offers no server-to-client stream.
//
// `/mcp?workspace=NAME` on initialize sets the session's default workspace (as
// `berth mcp --workspace NAME` does); workspace_use changes it later.
//
// Authentication: the caller's "Authorization: Bearer <api key>". initialize opens the
// session's Backend for the caller (BackendFactory); the session is bound to that key (another
// key gets 404 for it), and every tool acts through that Backend as the caller, so a key sees
// through MCP exactly what it sees through the API. Without a factory of its own the context
// makes HttpBackends: the key is checked with GET /v1/me and the tools call berthd's own API
// with it, at the address SetApiUrl() gave.
//
// ---- Serving /mcp in-process (what berthd should do) ----------------------------------------
// Give the context a BackendFactory that makes a backend calling the workspace service
// directly for the principal berthd's authentication put on the exchange (extra_routes run
// after it). Then no tool call goes over loopback HTTP and mcp_pool_ needs no room for calls
// back into berthd's own API.
//
// ---- Mounting it in berthd (controller/berthd.cc, with ApiOptions::extra_routes) ----------
//
//   controller/CMakeLists.txt:
//     target_link_libraries(berth_controller_core PUBLIC berth_mcp)
//   Unconditionally: mcp/ is added after controller/ in the top-level CMakeLists.txt, so an
//   if(TARGET berth_mcp) there would be false; CMake resolves the name at generate time.
//
//   controller/berthd.h, Daemon members (next to pool_ and api_):
//     std::unique_ptr<boost::asio::thread_pool> mcp_pool_;
//     std::unique_ptr<berth::mcp::McpHttpContext> mcp_;
//
//   controller/berthd.cc, Daemon::Start(), before the ApiServer is made:
//     // A pool of its own, NOT pool_: a tool call blocks its thread for as long as it lasts
//     // (an exec for up to an hour) and calls back into berthd's own API over loopback; if
//     // that API waited on the same pool, enough concurrent tool calls would deadlock it.
//     // Calls beyond its threads queue.
//     mcp_pool_ = std::make_unique<boost::asio::thread_pool>(8);
//     mcp_ = std::make_unique<mcp::McpHttpContext>(*mcp_pool_);
//     api::ApiOptions aopt;
//     aopt.extra_routes = [this](http::Router& router) {
//       http::Handler handler = [this](http::Exchange& ex) { return mcp::ServeMcpHttp(ex, *mcp_); };
//       router.Add(http::bhttp::verb::post, "/mcp", handler);
//       router.Add(http::bhttp::verb::get, "/mcp", handler);
//       router.Add(http::bhttp::verb::delete_, "/mcp", handler);
//     };
//   and once api_->Listen() has bound (the port is known), berthd's own address:
//     endpoint_ = *bound;
//     if (auto s = mcp_->SetApiUrl(url()); !s) return s;   // until then /mcp answers 503
//   url() is "http://127.0.0.1:PORT" (a listener on 0.0.0.0 or [::] is reached as well) or
//   "unix:/path"; both are accepted.
//
//   Daemon::Stop(): after api_->Stop() and joining the I/O threads, mcp_pool_->join(). Tool
//   calls in flight are talking to berthd itself, whose connections Stop() closed, so they
//   end at once. Destroy mcp_ after api_ (handlers hold a reference) and mcp_pool_ after mcp_.
//
// Behind berthd's key check (berthd authenticates /mcp like every route, before any body is
// read, and answers 401 with WWW-Authenticate: Bearer) the handler works as it does alone: it
// reads Authorization itself and checks the key with GET /v1/me at initialize. Alone, no
// more than McpHttpOptions::max_initialize_bytes is read before that check; a larger body
// (up to max_body_bytes) only within a session of the same key. Bodies are read here, not
// through ServerOptions::max_json_bytes, each within body_timeout.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/thread_pool.hpp>

#include <functional>
#include <memory>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/http/server.h"
#include "mcp/backend.h"
#include "mcp/session_table.h"

namespace berth::mcp {

struct McpHttpOptions {
  McpHttpOptions() = default;
  // A request body within a session: file_write's 10 MiB of content with room for JSON
  // escaping. Only a key's own live session gets this much (the session is found first).
  size_t max_body_bytes = 32u << 20;
  // A request body without a session (an initialize: capabilities and client info, a few KiB).
  size_t max_initialize_bytes = 64u << 10;
  // A body must arrive whole within this, however it trickles in (one deadline per body).
  std::chrono::seconds body_timeout{120};
  // Sessions in all, and per API key; past either the least recently used is dropped (its
  // client gets 404 and starts a new session, as the specification says it must).
  size_t max_sessions = 4096;
  size_t max_sessions_per_key = 64;
  // A session unused this long is dropped. Long: agents keep sessions open for days.
  std::chrono::seconds session_idle_ttl{7 * 24 * 3600};
  // Refuse (403) a browser request whose Origin is not the host it was sent to (DNS rebinding).
  bool check_origin = true;
};

// Makes the Backend a new session's tools act through, for the caller of `ex` (whose bearer key
// is `api_key`). Runs on the context's pool, so it may block; `ex`'s coroutine waits for it
// meanwhile, so reading `ex` (its context, its headers) is safe. unauthenticated is answered
// 401 (WWW-Authenticate: Bearer); any other error 503 with its message.
using BackendFactory = std::function<Result<std::shared_ptr<Backend>>(http::Exchange& ex,
                                                                      const std::string& api_key)>;

class McpHttpContext {
 public:
  // Sessions act through backends made by `factory`.
  McpHttpContext(boost::asio::thread_pool& pool, BackendFactory factory,
                 McpHttpOptions options = {});
  // Sessions act through HttpBackends to the berthd at SetApiUrl()'s address (initialize
  // answers 503 until it is set).
  explicit McpHttpContext(boost::asio::thread_pool& pool, McpHttpOptions options = {});
  // The same, with berthd's URL known at once.
  McpHttpContext(std::string_view api_url, boost::asio::thread_pool& pool,
                 McpHttpOptions options = {});

  // berthd's own address for HttpBackends (see ParseBaseUrl: "http://127.0.0.1:PORT",
  // "unix:/path"). Unused with a factory of one's own. Any thread.
  Status SetApiUrl(std::string_view api_url);
  std::optional<Endpoint> api_endpoint() const;
  // Whether initialize can open sessions: a factory, or berthd's address.
  bool ready() const;
  // The Backend for a new session (see BackendFactory). Blocking; on the pool.
  Result<std::shared_ptr<Backend>> OpenBackend(http::Exchange& ex, const std::string& api_key);

  boost::asio::thread_pool& pool() { return pool_; }
  SessionTable& sessions() { return sessions_; }
  const McpHttpOptions& options() const { return options_; }

 private:
  boost::asio::thread_pool& pool_;
  McpHttpOptions options_;
  SessionTable sessions_;
  BackendFactory factory_;
  mutable std::mutex mutex_;
  std::optional<Endpoint> api_endpoint_;
};

// Serves one request to /mcp (POST, GET or DELETE; anything else is a 405). Runs on the
// connection's strand; every blocking call (tool calls, the key check) goes to ctx.pool().
// Errors are answered, never thrown.
http::Task<void> ServeMcpHttp(http::Exchange& ex, McpHttpContext& ctx);

}  // namespace berth::mcp
