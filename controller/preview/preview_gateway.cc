#include "controller/preview/preview_gateway.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/blocking.h"
#include "common/client/ports.h"
#include "common/deadline.h"
#include "common/http/url.h"
#include "controller/agent_client/agent_proxy.h"
#include "controller/preview/preview_pages.h"
#include "controller/preview/preview_request.h"

namespace berth::preview {

namespace bhttp = http::bhttp;
using workspace::State;
using workspace::Workspace;

// Every workspace name berthd accepts has a preview host for every port.
static_assert(workspace::kMaxWorkspaceName == kMaxPreviewableName);

namespace {

// Tokens looked at per request, whatever a client piles into its cookies.
constexpr size_t kMaxTokens = 8;
// How long the interstitial's cookie remembers that this browser was told.
constexpr int64_t kAckFor = 30 * 24 * 3600;
// How long a request for a running workspace waits for its agent link (a moment: it runs).
constexpr std::chrono::seconds kLinkWait{10};

// A path of this host to go back to after the interstitial: never another origin.
std::string SafeReturnPath(std::string_view to) {
  bool ok = to.starts_with('/') && !to.starts_with("//") && to.find('\\') == std::string_view::npos;
  for (char c : to) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  return ok ? std::string(to) : std::string("/");
}

}  // namespace

struct PreviewGateway::Access {
  enum class Via { kToken, kSessionPass, kKey, kPublic };
  Workspace ws;
  std::optional<store::Preview> grant;  // the token's or the public one
  Via via = Via::kKey;
  std::string token;             // the token or pass that opened it
  int64_t expires_at = 0;        // when that token or pass stops opening it
  std::string by;                // a pass's key
  bool token_from_query = false;
};

PreviewGateway::PreviewGateway(GatewayDeps deps) : config_(deps.previews.config()), deps_(std::move(deps)) {}

http::Task<bool> PreviewGateway::Serve(http::Exchange& ex) {
  auto parsed = ParsePreviewHost(ex.header(bhttp::field::host), config_.domain);
  if (!parsed) {
    ex.set_keep_alive(false);
    Page page = ErrorPage(parsed.error());
    co_await SendPage(ex, std::move(page));
    co_return true;
  }
  if (!*parsed) co_return false;
  PreviewAddress address = **parsed;
  co_await Handle(ex, address);
  co_return true;
}

http::Task<void> PreviewGateway::ServeOnly(http::Exchange& ex) {
  bool served = co_await Serve(ex);
  if (served) co_return;
  Page page = ErrorPage(Error(ErrorCode::kNotFound, fmt::format("this listener serves previews only: {}",
                                                               deps_.previews.UrlPattern())));
  co_await SendPage(ex, std::move(page));
}

Result<PreviewGateway::Access> PreviewGateway::Authorize(const PreviewAddress& address,
                                                         const std::vector<std::string>& tokens,
                                                         const std::string& authorization) {
  std::optional<Error> denied;  // a credential that is valid, but for something else
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (std::string_view(tokens[i]).starts_with(kSessionPassPrefix) && deps_.session_pass) {
      auto pass = deps_.session_pass(tokens[i]);
      if (!pass) {
        if (pass.error().code != ErrorCode::kUnauthenticated) return Fail(pass.error());
        if (!denied) denied = pass.error();
        continue;
      }
      auto ws = deps_.service.Get(pass->tenant_id, pass->workspace_id);
      if (!ws) continue;  // deleted meanwhile
      if ((address.workspace == ws->id || address.workspace == ws->name) && pass->port == address.port) {
        Access a;
        a.ws = std::move(*ws);
        a.via = Access::Via::kSessionPass;
        a.token = tokens[i];
        a.expires_at = pass->expires_at;
        a.by = pass->key_id;
        return a;
      }
      denied = Error(ErrorCode::kPermissionDenied,
                     fmt::format("this pass opens port {} of workspace '{}', not port {} of '{}'",
                                 pass->port, ws->name, address.port, address.workspace));
      continue;
    }
    auto grant = deps_.previews.grants().ByToken(tokens[i]);
    if (!grant) {
      if (grant.error().code != ErrorCode::kUnauthenticated) return Fail(grant.error());
      if (!denied) denied = grant.error();
      continue;
    }
    auto ws = deps_.service.Get(grant->tenant_id, grant->workspace_id);
    if (!ws) continue;  // deleted meanwhile
    if ((address.workspace == ws->id || address.workspace == ws->name) && grant->port == address.port) {
      Access a;
      a.ws = std::move(*ws);
      a.grant = std::move(*grant);
      a.via = Access::Via::kToken;
      a.token = tokens[i];
      a.expires_at = a.grant->expires_at;
      return a;
    }
    denied = Error(ErrorCode::kPermissionDenied,
                   fmt::format("this preview link opens port {} of workspace '{}', not port {} of '{}'",
                               grant->port, ws->name, address.port, address.workspace));
  }
  // Only a Berth key is looked up: an app's own Basic or Bearer credentials cost no store read.
  std::string_view bearer(authorization);
  if (bearer.starts_with("Bearer bk_") || bearer.starts_with("bearer bk_")) {
    auto tenant = deps_.key_tenant(authorization);
    if (tenant) {
      auto ws = deps_.service.Get(*tenant, address.workspace);
      if (ws) {
        Access a;
        a.ws = std::move(*ws);
        a.via = Access::Via::kKey;
        return a;
      }
      denied = Error(ErrorCode::kNotFound, fmt::format("this API key's tenant has no workspace '{}'", address.workspace));
    }
  }
  std::vector<Access> open;
  for (auto& ws : deps_.service.FindAcrossTenants(address.workspace)) {
    auto grant = deps_.previews.grants().Public(ws.id, address.port);
    if (!grant) return Fail(grant.error());
    if (!*grant) continue;
    Access a;
    a.ws = std::move(ws);
    a.grant = std::move(**grant);
    a.via = Access::Via::kPublic;
    open.push_back(std::move(a));
  }
  if (open.size() == 1) return std::move(open.front());
  if (open.size() > 1) {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("several workspaces named '{}' have a public preview of port {}: "
                            "use the workspace's id in the address",
                            address.workspace, address.port));
  }
  if (denied) return Fail(*denied);
  return Fail(ErrorCode::kUnauthenticated,
              fmt::format("port {} of workspace '{}' is a private preview: open it with a preview "
                          "link (berth preview {} {})",
                          address.port, address.workspace, address.workspace, address.port));
}

http::Task<void> PreviewGateway::Handle(http::Exchange& ex, const PreviewAddress& address) {
  // Over https: berthd's own TLS, or a TLS proxy in front by the operator's word.
  const bool https = ex.secure() || config_.https();
  std::string_view raw_target = ex.target();
  if (raw_target.empty() || raw_target.front() != '/') {
    // An absolute-form target names a host of its own, which is not what the Host said.
    ex.set_keep_alive(false);
    Page page = ErrorPage(Error(ErrorCode::kInvalidArgument, "a preview request's target is a path"));
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  if (ex.path() == "/__berth/continue") {
    // The interstitial's button: remember that this browser was told, and go back.
    Page page;
    page.status = bhttp::status::see_other;
    page.title = "Opening the preview";
    page.message = "Opening the preview.";
    page.headers.emplace_back("Location", SafeReturnPath(ex.query().Get("to").value_or("/")));
    page.headers.emplace_back("Set-Cookie", BerthCookie(AckCookieName(https), "1", kAckFor, https));
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  auto taken = TakeTokenFromTarget(raw_target);
  if (taken.count > 1) {
    Page page = ErrorPage(Error(ErrorCode::kInvalidArgument,
                                fmt::format("a preview address takes one {} parameter", kTokenParam)));
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  std::vector<std::string> tokens;
  bool query_token = taken.token.has_value();
  if (taken.token) tokens.push_back(*taken.token);
  if (auto h = ex.header(kTokenHeader); !h.empty()) tokens.emplace_back(h);
  for (auto& c : CookieValues(ex.request(), TokenCookieName(https))) {
    if (tokens.size() >= kMaxTokens) break;
    tokens.push_back(std::move(c));
  }
  std::string authorization(ex.header(bhttp::field::authorization));
  // By-reference captures only: the closure is trivially destructible (docs/architecture.md).
  auto access = co_await RunBlocking(deps_.pool, [&] { return Authorize(address, tokens, authorization); });
  if (!access) {
    Page page = ErrorPage(access.error());
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  const bool by_credential = access->via == Access::Via::kToken || access->via == Access::Via::kSessionPass;
  access->token_from_query = query_token && by_credential && access->token == tokens.front();
  const bool upgrade = agent_client::WantsUpgrade(ex.request());
  const bool get = ex.method() == bhttp::verb::get || ex.method() == bhttp::verb::head;
  if (access->token_from_query && get && !upgrade) {
    // The token becomes this host's cookie and leaves the address bar.
    Page page;
    page.status = bhttp::status::see_other;
    page.title = "Opening the preview";
    page.message = "Opening the preview.";
    page.headers.emplace_back("Location", taken.target);
    int64_t left = access->expires_at - deps_.previews.grants().Now();
    page.headers.emplace_back("Set-Cookie", BerthCookie(TokenCookieName(https), access->token, left, https));
    if (access->via == Access::Via::kSessionPass) {
      // A person opened it from the web UI: once per opening, not per request.
      auto opened = [&] {
        nlohmann::json data = {{"port", address.port}, {"by", access->by}};
        auto recorded = deps_.service.RecordEvent(
            access->ws.id, "preview_opened",
            fmt::format("port {} opened from the web UI by {}", address.port, access->by), data,
            store::KeyActor(access->by));
        if (!recorded) spdlog::warn("preview of {}: {}", access->ws.id, recorded.error().message);
        return true;
      };
      bool done = co_await RunBlocking(deps_.pool, opened);
      (void)done;
    }
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  if (access->via == Access::Via::kPublic && !upgrade && ex.header(kSkipInterstitialHeader).empty() &&
      CookieValues(ex.request(), AckCookieName(https)).empty()) {
    // Anyone may publish anything on the shared preview domain: say whose content follows
    // before a browser shows it (the phishing lesson of hosted previews).
    Page page;
    page.title = "You are opening a preview";
    std::string to = http::PercentEncode(taken.target);
    page.html = fmt::format(
        "<p>What follows is served by a program running in the Berth workspace <code>{}</code> "
        "(port {}), not by Berth. Anyone with a workspace can publish a preview: do not enter "
        "passwords or personal details unless you trust whoever sent you this link.</p>"
        "<p><a class=\"button\" href=\"/__berth/continue?to={}\">Continue to the preview</a></p>",
        Html(access->ws.name), address.port, Html(to));
    page.headers.emplace_back("X-Berth-Interstitial", "1");
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  if (access->grant) {
    auto& grant = *access->grant;
    const bool by_token = access->via == Access::Via::kToken;
    auto noted = [&] {
      if (deps_.previews.grants().NoteUse(grant) && by_token) {
        nlohmann::json data = {{"preview_id", grant.id}, {"port", grant.port}};
        auto recorded = deps_.service.RecordEvent(
            grant.workspace_id, "preview_token_used",
            fmt::format("preview {} of port {} opened for the first time", grant.id, grant.port), data,
            std::string(store::kPreviewActor));
        if (!recorded) spdlog::warn("preview {}: {}", grant.id, recorded.error().message);
      }
      return true;
    };
    bool done = co_await RunBlocking(deps_.pool, noted);
    (void)done;
  }
  std::string by = access->by.empty() ? std::string(store::kPreviewActor) : store::KeyActor(access->by);
  co_await Proxy(ex, address, access->ws, std::move(taken.target), std::move(by));
}

http::Task<void> PreviewGateway::Proxy(http::Exchange& ex, const PreviewAddress& address,
                                       const Workspace& ws, std::string target, std::string by) {
  auto& service = deps_.service;
  if (ws.state == State::kStopped || ws.state == State::kHibernated) {
    if (!ws.auto_start) {
      Page page = ErrorPage(Error(ErrorCode::kFailedPrecondition,
                                  fmt::format("workspace '{}' is {} and auto_start is off: start it first",
                                              ws.name, workspace::StateName(ws.state))));
      co_await SendPage(ex, std::move(page));
      co_return;
    }
    auto started =
        co_await service.Start(ws.tenant_id, ws.id, fmt::format("a preview request (port {})", address.port), by);
    if (!started) {
      Page page = ErrorPage(started.error());
      co_await SendPage(ex, std::move(page));
      co_return;
    }
  }
  std::optional<agent_client::AgentLink> link;
  auto now = service.Get(ws.tenant_id, ws.id);
  if (now && now->state == State::kRunning) {
    auto woken = co_await service.Wake(ws.tenant_id, ws.id, kLinkWait);
    if (woken) link = std::move(*woken);
  }
  if (!link) {
    Page page;
    if (now && now->state == State::kError) {
      page = ErrorPage(Error(ErrorCode::kUnavailable,
                             fmt::format("workspace '{}' is in error: {}", ws.name, now->error.value_or("unknown"))));
    } else {
      std::string state = now ? std::string(workspace::StateName(now->state)) : "gone";
      page.status = bhttp::status::service_unavailable;
      page.title = "Waking your workspace";
      page.code = "unavailable";
      page.message = fmt::format("Workspace '{}' is {}: this preview opens when it runs. "
                                 "This page reloads itself.", ws.name, state);
      page.refresh_s = 2;
      page.retry_after_s = 5;
    }
    co_await SendPage(ex, std::move(page));
    co_return;
  }
  service.NoteActivity(ws.id);
  auto guard = service.OpenStream(ws.id, "preview");
  agent_client::AgentConnector connector(*link, deps_.proxy, &deps_.connections,
                                         agent_client::ConnectorTarget{address.port});
  Forwarded forwarded;
  forwarded.host = std::string(ex.header(bhttp::field::host));
  forwarded.proto = (ex.secure() || config_.https()) ? "https" : "http";
  // The client's own address, also when berthd's TLS front decrypted the request (then the
  // connection itself is a socketpair).
  forwarded.client = ex.peer_address();
  agent_client::ProxyPlan plan;
  plan.build = [&](agent_client::BodyFraming framing) {
    return BuildPreviewRequest(ex.request(), target, address.port, forwarded, framing);
  };
  plan.relay = agent_client::RelayPolicy::App(&RewriteSetCookie);
  const agent_client::AgentLink& agent = *link;
  plan.unreachable = [this, &address, &agent](http::Exchange& e, const Error& error) {
    return NotListening(e, address, agent, error);
  };
  co_await agent_client::ProxyThrough(ex, connector, plan, deps_.proxy);
}

http::Task<void> PreviewGateway::NotListening(http::Exchange& ex, const PreviewAddress& address,
                                              const agent_client::AgentLink& link, const Error& error) {
  auto listed = co_await RunBlocking(deps_.pool, [&] {
    client::ClientOptions options;
    options.connect_timeout = std::chrono::seconds(5);
    options.io_timeout = std::chrono::seconds(5);
    options.deadline = DeadlineIn(std::chrono::seconds(5));
    client::ApiClient agent(link.endpoint, link.token, options);
    return client::ListPorts(agent, "/v1");
  });
  Page page;
  page.status = bhttp::status::bad_gateway;
  page.title = fmt::format("Nothing answers on port {}", address.port);
  page.code = "unavailable";
  std::string items;
  std::string names;
  if (listed) {
    for (const auto& p : *listed) {
      if (p.port == address.port) continue;
      auto url = deps_.previews.Url(p.port, address.workspace);
      std::string who = p.process ? fmt::format(" ({})", *p.process) : "";
      items += url ? fmt::format("<li><a href=\"{}\">port {}</a>{}</li>", Html(*url), p.port, Html(who))
                   : fmt::format("<li>port {}{}</li>", p.port, Html(who));
      names += fmt::format("{}{}", names.empty() ? "" : ", ", p.port);
    }
  }
  page.message = fmt::format("nothing answers on port {} in workspace '{}' ({}); listening: {}", address.port,
                             address.workspace, error.message, names.empty() ? "none" : names);
  page.html = fmt::format("<p>Nothing answers on port {} in workspace <code>{}</code>: {}.</p>"
                          "<p>This page reloads itself until it does.</p>{}",
                          address.port, Html(address.workspace), Html(error.message),
                          items.empty() ? "<p>No other port listens in the workspace.</p>"
                                        : fmt::format("<p>Ports that listen:</p><ul>{}</ul>", items));
  page.refresh_s = 5;
  co_await SendPage(ex, std::move(page));
}

}  // namespace berth::preview
