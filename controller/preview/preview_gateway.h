// The preview proxy (issue 13): requests whose Host is `{port}-{workspace}.{preview domain}`
// reach the server on that port of the workspace, through its agent's raw tunnel
// (agent_client::AgentConnector with a tunnel port), so a server bound to the guest's
// 127.0.0.1 works as well as one on 0.0.0.0.
//
// One request, in order:
//  1. The Host is parsed once (preview_host.h); what it names is what is authorised and what is
//     forwarded. A malformed preview host is a 400 and never reaches the API or a guest.
//  2. Access, before anything else happens to the workspace: a preview token (the
//     X-Berth-Preview-Token header, the `berth_preview_token` query parameter, or its cookie),
//     a web UI session's pass (controller/api/sessions.h, taken the same ways), an API key of
//     the workspace's tenant (Authorization: Bearer), or a public grant of the port. A token
//     or a pass opens exactly its workspace and port. A token in the query of a GET is
//     exchanged for a host-only HttpOnly cookie and the browser is sent back to the same URL
//     without it (303), so it does not linger in the address bar, the app's logs or a Referer.
//     A public preview shows an interstitial once per browser (a cookie remembers it) unless
//     the client sends X-Berth-Skip-Interstitial.
//  3. Wake: a stopped or hibernated workspace is started (event "woken", naming the preview)
//     and the client gets a page that reloads itself (a 503 with Retry-After for API
//     clients); an unauthorised request never gets here.
//  4. The request, without Berth's credentials (preview_request.h), goes to the app; its
//     answer comes back streamed, an upgrade (WebSocket HMR) joined end to end. Each request
//     is activity for the idle timer and holds the workspace awake while it lasts.
//  5. Nothing listening on the port: a 502 page naming the port and linking the ports that do
//     listen (it reloads itself, as a dev server is often a moment from listening).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/thread_pool.hpp>

#include "common/http/server.h"
#include "controller/agent_client/agent_connector.h"
#include "controller/agent_client/proxy_options.h"
#include "controller/preview/preview_config.h"
#include "controller/preview/preview_host.h"
#include "controller/preview/preview_service.h"
#include "controller/workspace/service.h"

namespace berth::preview {

// What a web UI session's preview pass opens ("bps_…", controller/api/sessions.h).
struct SessionPass {
  std::string tenant_id;
  std::string workspace_id;
  int port = 0;
  std::string key_id;
  int64_t expires_at = 0;
};
inline constexpr std::string_view kSessionPassPrefix = "bps_";

// What the gateway needs from berthd. All must outlive it.
struct GatewayDeps {
  boost::asio::thread_pool& pool;  // blocking calls (the store)
  workspace::WorkspaceService& service;
  PreviewService& previews;  // the grants, the config and the links
  agent_client::AgentConnectionPool& connections;
  const agent_client::ProxyOptions& proxy;
  // The tenant of the API key in an Authorization header; an error when it is no valid key.
  // Blocking.
  std::function<Result<std::string>(const std::string& authorization)> key_tenant;
  // What a session's pass opens while the session lives; unauthenticated otherwise. Blocking.
  std::function<Result<SessionPass>(std::string_view pass)> session_pass;
};

class PreviewGateway {
 public:
  explicit PreviewGateway(GatewayDeps deps);

  // Answers `ex` when its Host is a preview host (true), malformed ones included; false when it
  // is not one (the caller serves its API). On the connection's strand (a handler).
  http::Task<bool> Serve(http::Exchange& ex);
  // For a listener of previews alone: any other Host is a 404.
  http::Task<void> ServeOnly(http::Exchange& ex);

 private:
  struct Access;
  http::Task<void> Handle(http::Exchange& ex, const PreviewAddress& address);
  // Who may open `address` with what the request presents (blocking: the store).
  Result<Access> Authorize(const PreviewAddress& address, const std::vector<std::string>& tokens,
                           const std::string& authorization);
  // `by`: the actor of a wake (a person's key when one opened it, else "preview").
  http::Task<void> Proxy(http::Exchange& ex, const PreviewAddress& address, const workspace::Workspace& ws,
                         std::string target, std::string by);
  http::Task<void> NotListening(http::Exchange& ex, const PreviewAddress& address,
                                const agent_client::AgentLink& link, const Error& error);

  const PreviewConfig& config_;
  GatewayDeps deps_;
};

}  // namespace berth::preview
