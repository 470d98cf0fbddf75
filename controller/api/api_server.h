// berthd's public HTTP API (docs/api.md): authentication and scopes, the admin routes
// (tenants, keys), the workspace routes, and the agent routes that wake a workspace and
// stream through to its agent. The layer only parses, validates and authorizes; the
// workspace service owns all state. Store and service calls block, so they run on a pool.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/blocking.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "common/http/tls_front.h"
#include "controller/agent_client/agent_proxy.h"
#include "controller/api/auth.h"
#include "controller/api/sessions.h"
#include "controller/api/web_ui.h"
#include "controller/desktop/desktop_service.h"
#include "controller/network/network_api.h"
#include "controller/preview/preview_gateway.h"
#include "controller/preview/preview_service.h"
#include "controller/store/store.h"
#include "controller/workspace/service.h"

namespace berth::api {

struct ApiOptions {
  http::ServerOptions server;
  agent_client::ProxyOptions proxy;
  // How long a request to a stopped workspace waits for it to boot before giving up.
  std::chrono::seconds wake_timeout{900};
  // Extra routes mounted by berthd (e.g. /mcp); they run after authentication.
  std::function<void(http::Router&)> extra_routes;
  // GET|PATCH /v1/workspaces/{ws}/network, mounted when set (the workspace service implements
  // it; it must outlive the server).
  network::WorkspaceNetworkApi* network = nullptr;
  // Previews: served on every listener, routed by Host, and on ListenPreviews's. Required; it
  // must outlive the server.
  preview::PreviewService* previews = nullptr;
  // The desktop (tickets, control, the VNC bridge): its routes are mounted when set; it must
  // outlive the server.
  desktop::DesktopService* desktop = nullptr;
  // Web UI sessions (sign-in by cookie, controller/api/sessions.h).
  SessionOptions sessions;
  // The web UI's built files (web/dist), served under "/"; empty: a page saying it is not
  // built.
  std::filesystem::path web_root;
};

// What every route needs. Owned by ApiServer; handlers hold a reference.
struct ApiContext {
  boost::asio::thread_pool& pool;
  store::Store& store;
  workspace::WorkspaceService& service;
  Authenticator& auth;
  Sessions& sessions;
  const ApiOptions& options;
  // Keep-alive connections to agents, shared by every proxied request.
  agent_client::AgentConnectionPool& agent_connections;
  // Preview grants and their links.
  preview::PreviewService& previews;
  // The desktop; null when berthd runs without it.
  desktop::DesktopService* desktop = nullptr;

  // Runs a blocking call on the pool and resumes on the caller's executor.
  template <class F>
  auto Blocking(F fn) {
    return RunBlocking(pool, std::move(fn));
  }
};

// The principal the request runs as (set by the auth middleware).
Principal PrincipalOf(http::Exchange& ex);
// Who the timeline says did what this request does: "key:<key id>" (store/event_filter.h).
std::string ActorOf(http::Exchange& ex);
// Resumes after `d` without holding a thread (polling loops: wake, wait, follow).
http::Task<void> SleepFor(std::chrono::milliseconds d);
// Sends 403 unless the principal has `needed`; true when allowed.
http::Task<bool> Require(http::Exchange& ex, Scope needed);

void AddAdminRoutes(http::Router& router, ApiContext& ctx);
// desktop_routes.cc: waits, without polling (the change feed), until the agent holds the
// desktop of the workspace again or `timeout` has passed; the state then.
http::Task<Result<desktop::ControlState>> WaitForDesktopRelease(workspace::WorkspaceService& service,
                                                        desktop::DesktopControl& control, std::string tenant_id,
                                                        std::string workspace_id, std::chrono::milliseconds timeout);

// desktop_routes.cc: the agent asks a person to take over `ws`'s desktop for `reason` (shown on
// the desktop page at `desktop_url`, and on the timeline); when `timeout` > 0, waits until the
// person has taken over and handed back, and withdraws the request if nobody took over in
// time. The control state then, with `answered` and `url`.
http::Task<Result<nlohmann::json>> RequestHuman(workspace::WorkspaceService& service, desktop::DesktopService& desk,
                                        workspace::Workspace ws, std::string by, std::string reason,
                                        std::chrono::milliseconds timeout, std::string desktop_url);
// The web UI's page of a workspace's desktop, at the address the request came to.
std::string DesktopPageUrl(http::Exchange& ex, const std::string& workspace_id);

// session_routes.cc: /v1/sessions.
void AddSessionRoutes(http::Router& router, ApiContext& ctx);
// POST /v1/sessions: signing in, the one request besides health that carries no credential.
bool IsSignInRequest(http::Exchange& ex);
void AddWorkspaceRoutes(http::Router& router, ApiContext& ctx);
void AddAgentRoutes(http::Router& router, ApiContext& ctx);
void AddPreviewRoutes(http::Router& router, ApiContext& ctx);
// /v1/workspaces/{ws}/checkpoints (checkpoint_routes.cc).
void AddCheckpointRoutes(http::Router& router, ApiContext& ctx);
void AddTemplateRoutes(http::Router& router, ApiContext& ctx);
// desktop_routes.cc; needs ctx.desktop.
void AddDesktopRoutes(http::Router& router, ApiContext& ctx);
// desktop_routes.cc: whether a browser page at the request's Origin may open the desktop:
// berthd's own (the request's Host) or one the operator listed; no Origin (no browser) only
// with a key.
bool DesktopOriginAllowed(http::Exchange& ex, const desktop::DesktopConfig& config, bool key);
// cdp_routes.cc: Chrome's open tabs in the workspace ([{url, title}], bounded), read through
// the DevTools port within a few seconds; null when the workspace is not running or Chrome
// does not answer. Never wakes a stopped workspace.
http::Task<nlohmann::json> ChromeTabs(ApiContext& ctx, const workspace::Workspace& ws);
// cdp_routes.cc: the DevTools tunnel, GET /v1/workspaces/{ws}/desktop/cdp[/...]; needs ctx.desktop.
void AddDesktopCdpRoutes(http::Router& router, ApiContext& ctx);
// A keyless request that a desktop ticket authenticates (the viewer's WebSocket with
// ?ticket=, or a control route with the ticket's header): ApiServer::Handle lets it through to
// those routes alone, which check the ticket.
bool IsDesktopTicketRequest(http::Exchange& ex);
// network_routes.cc; blocking calls run on `pool`.
void AddNetworkRoutes(http::Router& router, boost::asio::thread_pool& pool, network::WorkspaceNetworkApi& api);

class ApiServer {
 public:
  ApiServer(boost::asio::io_context& io, boost::asio::thread_pool& pool, store::Store& store,
            workspace::WorkspaceService& service, Authenticator& auth, ApiOptions options);
  ~ApiServer();

  // Binds and serves; the bound endpoint (real port for port 0). Links to previews name this
  // port unless a preview listener is bound (or the config names one).
  Result<Endpoint> Listen(const Endpoint& endpoint);
  // A listener that serves previews alone (preview.listen); call after Listen. With `tls`, it
  // speaks TLS only (http::TlsFront, from preview.tls_cert and tls_key): an error naming the
  // file when the certificate or key does not load or match.
  Result<Endpoint> ListenPreviews(const Endpoint& endpoint,
                                  std::optional<http::TlsFrontOptions> tls = std::nullopt);
  // Stops accepting and closes connections. Any thread.
  void Stop();

 private:
  http::Task<void> Handle(http::Exchange& ex);
  // Authenticates by key (Authorization) or, without one, by session cookie with its
  // cross-site checks; answers and returns false when refused.
  http::Task<bool> Authenticate(http::Exchange& ex);

  boost::asio::io_context& io_;
  ApiOptions options_;
  agent_client::AgentConnectionPool agent_connections_;
  preview::PreviewGateway previews_;
  Sessions sessions_;
  WebUi web_;
  ApiContext ctx_;
  http::Router router_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Server> preview_server_;
  // In front of preview_server_ when the preview listener speaks TLS; destroyed first.
  std::unique_ptr<http::TlsFront> preview_tls_;
};

}  // namespace berth::api
