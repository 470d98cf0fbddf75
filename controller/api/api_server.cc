#include "controller/api/api_server.h"

#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/v1/admin.h"
#include "common/json.h"
#include "common/unix_time.h"

namespace berth::api {

using http::bhttp::status;
using http::bhttp::verb;

std::string ActorOf(http::Exchange& ex) {
  return store::KeyActor(ex.context().value("key_id", ""));
}

Principal PrincipalOf(http::Exchange& ex) {
  const auto& c = ex.context();
  Principal p;
  p.tenant_id = c.value("tenant_id", "");
  p.tenant_name = c.value("tenant_name", "");
  p.key_id = c.value("key_id", "");
  p.key_prefix = c.value("key_prefix", "");
  p.scope = ParseScope(c.value("scope", "read")).value_or(Scope::kRead);
  return p;
}

http::Task<void> SleepFor(std::chrono::milliseconds d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

http::Task<bool> Require(http::Exchange& ex, Scope needed) {
  if (PrincipalOf(ex).Allows(needed)) co_return true;
  auto error = Error{ErrorCode::kPermissionDenied,
                     fmt::format("this needs a key with {} scope", ScopeName(needed))};
  co_await ex.SendError(error);
  co_return false;
}

ApiServer::ApiServer(boost::asio::io_context& io, boost::asio::thread_pool& pool,
                     store::Store& store, workspace::WorkspaceService& service,
                     Authenticator& auth, ApiOptions options)
    : io_(io),
      options_(std::move(options)),
      previews_(preview::GatewayDeps{pool, service, *options_.previews, agent_connections_, options_.proxy,
                                     [&auth](const std::string& authorization) -> Result<std::string> {
                                       auto principal = auth.Authenticate(authorization);
                                       if (!principal) return Fail(principal.error());
                                       return principal->tenant_id;
                                     },
                                     [this](std::string_view pass) -> Result<preview::SessionPass> {
                                       auto holder = sessions_.CheckPreviewPass(pass);
                                       if (!holder) return Fail(holder.error());
                                       return preview::SessionPass{holder->tenant_id, holder->workspace_id,
                                                                   holder->port, holder->key_id,
                                                                   holder->expires_at};
                                     }}),
      sessions_(store, auth, options_.sessions),
      web_(options_.web_root),
      ctx_{pool, store, service, auth, sessions_, options_, agent_connections_, *options_.previews, options_.desktop} {
  // What runs the guests is no secret, and operators and tests want to see it at a glance.
  router_.Add(verb::get, "/v1/health", [this](http::Exchange& ex) -> http::Task<void> {
    v1::Health health;
    health.status = "ok";
    health.version = BERTH_VERSION;
    health.accel = ctx_.service.kvm() ? "kvm" : "tcg";
    health.transport = std::string(ctx_.service.transport().name());
    health.network = ctx_.service.NetworkIsolation();
    auto body = v1::ToJson(health);
    co_await ex.SendJson(status::ok, body);
  });
  AddAdminRoutes(router_, ctx_);
  AddSessionRoutes(router_, ctx_);
  AddWorkspaceRoutes(router_, ctx_);
  AddAgentRoutes(router_, ctx_);
  AddPreviewRoutes(router_, ctx_);
  AddCheckpointRoutes(router_, ctx_);
  AddTemplateRoutes(router_, ctx_);
  if (options_.desktop) AddDesktopRoutes(router_, ctx_);
  if (options_.network) AddNetworkRoutes(router_, pool, *options_.network);
  if (options_.extra_routes) options_.extra_routes(router_);
  server_ = std::make_unique<http::Server>(
      io, options_.server, [this](http::Exchange& ex) { return Handle(ex); });
}

ApiServer::~ApiServer() { Stop(); }

Result<Endpoint> ApiServer::Listen(const Endpoint& endpoint) {
  auto bound = server_->Listen(endpoint);
  if (bound && !preview_server_) options_.previews->SetListenerPort(bound->port);
  return bound;
}

Result<Endpoint> ApiServer::ListenPreviews(const Endpoint& endpoint,
                                           std::optional<http::TlsFrontOptions> tls) {
  if (!preview_server_) {
    preview_server_ = std::make_unique<http::Server>(
        io_, options_.server, [this](http::Exchange& ex) { return previews_.ServeOnly(ex); });
  }
  Result<Endpoint> bound;
  if (tls) {
    if (preview_tls_) return Fail(ErrorCode::kFailedPrecondition, "the preview listener speaks TLS already");
    // TLS ends in the front; the server sees the decrypted connections, marked secure, with the
    // clients' own addresses.
    auto front = http::TlsFront::Create(io_, *preview_server_, std::move(*tls));
    if (!front) return Fail(front.error());
    preview_tls_ = std::move(*front);
    bound = preview_tls_->Listen(endpoint);
  } else {
    bound = preview_server_->Listen(endpoint);
  }
  if (bound) options_.previews->SetListenerPort(bound->port);
  return bound;
}

void ApiServer::Stop() {
  if (server_) server_->Stop();
  // The front first: no connection is adopted by a server that is stopping.
  if (preview_tls_) preview_tls_->Stop();
  if (preview_server_) preview_server_->Stop();
}

namespace {

// A refused key: 401 with WWW-Authenticate (RFC 9110 requires it; MCP clients look for it),
// the body in berthd's error shape, or JSON-RPC's for /mcp (as MCP's own handler answers).
http::Task<void> SendUnauthenticated(http::Exchange& ex, const Error& error) {
  http::bhttp::response<http::bhttp::string_body> res{status::unauthorized, ex.request().version()};
  res.set(http::bhttp::field::content_type, "application/json");
  res.set(http::bhttp::field::www_authenticate, "Bearer");
  nlohmann::json body;
  if (ex.path() == "/mcp") {
    body = {{"jsonrpc", "2.0"},
            {"id", nullptr},
            {"error", {{"code", -32000}, {"message", "Unauthorized: " + error.message}}}};
  } else {
    body = {{"error", {{"code", ErrorCodeName(error.code)}, {"message", error.message}}}};
  }
  res.body() = DumpJson(body) + "\n";
  // An unread body closes the connection after the answer (Exchange::Send): nothing of it is
  // read.
  co_await ex.Send(std::move(res));
}

// A key over its connection cap: 429 with Retry-After, the error named for what it is (the
// generic resource_exhausted is also a quota's), and the connection closed (the caller has
// cleared keep-alive).
http::Task<void> SendTooManyConnections(http::Exchange& ex, const Error& error) {
  http::bhttp::response<http::bhttp::string_body> res{status::too_many_requests,
                                                      ex.request().version()};
  res.set(http::bhttp::field::content_type, "application/json");
  res.set(http::bhttp::field::retry_after,
          std::to_string(ex.options().connection_retry_after.count()));
  nlohmann::json body = {{"error", {{"code", "too_many_connections"}, {"message", error.message}}}};
  res.body() = DumpJson(body) + "\n";
  co_await ex.Send(std::move(res));
}

}  // namespace

http::Task<void> ApiServer::Handle(http::Exchange& ex) {
  // A preview host is never the API, whatever its path: the gateway authorises it its own way
  // (preview tokens, public grants), and answers a malformed one itself.
  bool preview = co_await previews_.Serve(ex);
  if (preview) co_return;
  // The web UI's files are public, as any sign-in page is: what they show comes from the API.
  if (web_.Serves(ex)) {
    co_await web_.Serve(ex);
    co_return;
  }
  // Every route but health and sign-in is authenticated here, before any handler runs and so
  // before any request body is read: /mcp too (it would otherwise read and parse 32 MiB for
  // any "Bearer x"). /mcp checks the key again at initialize, as it does when it runs alone.
  bool open = (ex.method() == verb::get && ex.path() == "/v1/health") || IsSignInRequest(ex);
  // A desktop viewer's browser holds a ticket, never a key: its routes check the ticket.
  if (options_.desktop && IsDesktopTicketRequest(ex)) open = true;
  if (!open) {
    bool authenticated = co_await Authenticate(ex);
    if (!authenticated) co_return;
  }
  co_await router_.Dispatch(ex);
}

http::Task<bool> ApiServer::Authenticate(http::Exchange& ex) {
  std::string authorization(ex.header(http::bhttp::field::authorization));
  std::optional<std::string> cookie;
  if (authorization.empty()) {
    if (auto value = CookieValue(ex.header(http::bhttp::field::cookie), kSessionCookie)) {
      cookie = std::string(*value);
    }
  }
  Result<Principal> principal = Fail(ErrorCode::kInternal, "unset");
  std::optional<SignedIn> signed_in;
  if (cookie) {
    // By-reference captures only: the closure is trivially destructible (g++ 12, see
    // docs/architecture.md).
    auto found = co_await ctx_.Blocking([&] { return sessions_.Authenticate(*cookie); });
    if (found) {
      signed_in = std::move(*found);
      principal = signed_in->principal;
    } else {
      principal = Fail(found.error());
    }
  } else {
    principal = co_await ctx_.Blocking([&] { return ctx_.auth.Authenticate(authorization); });
  }
  if (!principal) {
    if (principal.error().code == ErrorCode::kUnauthenticated) {
      co_await SendUnauthenticated(ex, principal.error());
    } else {
      co_await ex.SendError(principal.error());
    }
    co_return false;
  }
  if (signed_in) {
    // A cookie goes along with any request the browser makes, a key only with the page's own:
    // a signed-in request must show that berthd's page sent it (sessions.h).
    bool reads = ex.method() == verb::get || ex.method() == verb::head;
    std::string_view origin = ex.header(http::bhttp::field::origin);
    if (!reads && !Sessions::CsrfMatches(*cookie, ex.header(kCsrfHeader))) {
      co_await ex.SendError({ErrorCode::kPermissionDenied,
                             "a signed-in request that changes something needs the session's "
                             "X-CSRF-Token header (from GET /v1/sessions/current)"});
      co_return false;
    }
    if ((ex.IsWebSocketUpgrade() || !origin.empty()) &&
        !SameOrigin(origin, ex.header(http::bhttp::field::host))) {
      co_await ex.SendError({ErrorCode::kPermissionDenied,
                             "a signed-in request from another origin is refused (the session "
                             "belongs to berthd's own page)"});
      co_return false;
    }
  }
  // Only now is it known whose connection this is: it counts against the key's cap, and
  // stops being a candidate for the unauthenticated header deadline and for shedding.
  if (auto admitted = ex.Admit(principal->key_id); !admitted) {
    ex.set_keep_alive(false);
    if (admitted.error().code == ErrorCode::kResourceExhausted) {
      co_await SendTooManyConnections(ex, admitted.error());
    } else {
      co_await ex.SendError(admitted.error());
    }
    co_return false;
  }
  auto& c = ex.context();
  c["tenant_id"] = principal->tenant_id;
  c["tenant_name"] = principal->tenant_name;
  c["key_id"] = principal->key_id;
  c["key_prefix"] = principal->key_prefix;
  c["scope"] = ScopeName(principal->scope);
  if (signed_in) {
    c["session_id"] = signed_in->session.id;
    c["csrf_token"] = signed_in->csrf_token;
  }
  co_return true;
}

}  // namespace berth::api
