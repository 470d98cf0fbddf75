// /v1/workspaces/{ws}/desktop/cdp[/...]: the DevTools tunnel to Chrome in the guest (issue 14,
// DESIGN.md "Desktop"), so that Playwright's connectOverCDP and Puppeteer's connect work from
// outside with the API key in a header:
//   GET …/cdp/json/version, …/cdp/json/list (…/cdp/json): Chrome's discovery JSON with its
//       WebSocket URLs pointed at berthd (controller/desktop/cdp_gate.h);
//   GET …/cdp (WebSocket): the browser target; GET …/cdp/devtools/{kind}/{id} (WebSocket): the
//       target a discovery URL names.
// Each request is a new connection through the agent's tunnel to the guest port of Chrome's
// DevTools (`desktop.cdp_port`, 9222), which listens on the guest's loopback only. The
// WebSocket is bridged by controller/desktop/cdp_bridge.h, which enforces control.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "controller/agent_client/agent_connector.h"
#include "controller/api/api_server.h"
#include "controller/desktop/cdp_bridge.h"
#include "controller/desktop/cdp_gate.h"

namespace berth::api {

using http::bhttp::field;
using http::bhttp::status;
using http::bhttp::verb;
namespace websocket = boost::beast::websocket;

namespace {

constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);
// One deadline for a discovery exchange with Chrome, and for the WebSocket handshake with it.
constexpr std::chrono::seconds kChromeDeadline{10};

// Chrome accepts DevTools requests only for a Host that is an IP address or localhost.
constexpr std::string_view kChromeHost = "127.0.0.1";

// The checks every CDP request passes first: a key with write scope (the tunnel gives input),
// an allowed Origin, the workspace, no private takeover, and the workspace awake.
struct Opened {
  workspace::Workspace ws;
  agent_client::AgentLink link;
  std::string by;
};

http::Task<std::optional<Opened>> OpenCdp(ApiContext& ctx, http::Exchange& ex) {
  auto& desk = *ctx.desktop;
  auto p = PrincipalOf(ex);
  if (!DesktopOriginAllowed(ex, desk.config(), !p.tenant_id.empty())) {
    co_await ex.SendError(Error(ErrorCode::kPermissionDenied, "this Origin may not open the desktop"));
    co_return std::nullopt;
  }
  if (!co_await Require(ex, Scope::kWrite)) co_return std::nullopt;
  auto ws = ctx.service.Get(p.tenant_id, std::string(ex.param("ws")));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return std::nullopt;
  }
  if (auto screen = desk.control().CheckAgentScreen(ws->id); !screen) {
    co_await ex.SendError(screen.error());
    co_return std::nullopt;
  }
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout, ActorOf(ex),
                                        "a DevTools connection");
  if (!link) {
    co_await ex.SendError(link.error());
    co_return std::nullopt;
  }
  Opened opened{std::move(*ws), std::move(*link), p.key_id};
  co_return opened;
}

// A new connection to Chrome's DevTools port through the agent's tunnel.
http::Task<Result<http::Stream>> ConnectChrome(ApiContext& ctx, const Opened& o) {
  agent_client::AgentConnector connector(o.link, ctx.options.proxy, nullptr,
                                         agent_client::ConnectorTarget{ctx.desktop->config().cdp_port});
  auto raw = co_await connector.OpenRaw();
  if (!raw) {
    co_return Fail(ErrorCode::kUnavailable,
                   fmt::format("Chrome's DevTools do not answer in the workspace (is the desktop image's Chrome "
                               "running?): {}",
                               raw.error().message));
  }
  co_return std::move(*raw);
}

// GET `target` (/json/version, /json/list) from Chrome: its body.
http::Task<Result<std::string>> FetchDiscovery(ApiContext& ctx, const Opened& o, std::string target) {
  auto stream = co_await ConnectChrome(ctx, o);
  if (!stream) co_return Fail(stream.error());
  http::bhttp::request<http::bhttp::empty_body> req{verb::get, target, 11};
  req.set(field::host, kChromeHost);
  req.set(field::connection, "close");
  stream->expires_after(kChromeDeadline);
  auto [wec, wn] = co_await http::bhttp::async_write(*stream, req, kTuple);
  http::beast::flat_buffer buf;
  http::bhttp::response_parser<http::bhttp::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(desktop::kMaxCdpDiscovery);
  boost::system::error_code rec = wec;
  if (!wec) {
    auto [ec, n] = co_await http::bhttp::async_read(*stream, buf, parser, kTuple);
    rec = ec;
  }
  if (rec) co_return Fail(ErrorCode::kUnavailable, fmt::format("Chrome's DevTools did not answer {}: {}", target, rec.message()));
  if (parser.get().result() != status::ok) {
    co_return Fail(ErrorCode::kUnavailable, fmt::format("Chrome's DevTools answered {} to {}", parser.get().result_int(), target));
  }
  co_return std::move(parser.get().body());
}

std::string WsBase(http::Exchange& ex, const workspace::Workspace& ws) {
  return fmt::format("{}://{}/v1/workspaces/{}/desktop/cdp", ex.secure() ? "wss" : "ws", ex.header(field::host), ws.id);
}

http::Task<void> Discovery(ApiContext& ctx, http::Exchange& ex, std::string target) {
  auto opened = co_await OpenCdp(ctx, ex);
  if (!opened) co_return;
  auto body = co_await FetchDiscovery(ctx, *opened, target);
  Result<nlohmann::json> rewritten = body ? desktop::RewriteCdpDiscovery(*body, WsBase(ex, opened->ws))
                                          : Result<nlohmann::json>(Fail(body.error()));
  if (!rewritten) {
    Error e = rewritten.error();
    if (body) e = Error(ErrorCode::kUnavailable, "Chrome's DevTools answered what is not its discovery JSON: " + e.message);
    co_await ex.SendError(e);
    co_return;
  }
  co_await ex.SendJson(status::ok, *rewritten);
}

// Chrome's path for the target of a discovery URL: /devtools/{browser|page|worker|...}/{id},
// the id Chrome's own (letters, digits, dashes).
Result<std::string> TargetPath(std::string_view kind, std::string_view id) {
  auto token = [](std::string_view s) {
    if (s.empty() || s.size() > 128) return false;
    for (char c : s) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
    return true;
  };
  if (!token(kind) || !token(id)) return Fail(ErrorCode::kNotFound, "no such DevTools target");
  return fmt::format("/devtools/{}/{}", kind, id);
}

http::Task<void> Tunnel(ApiContext& ctx, http::Exchange& ex, std::optional<std::string> target) {
  if (!ex.IsWebSocketUpgrade()) {
    co_await ex.SendError(Error(ErrorCode::kInvalidArgument,
                                "this endpoint is Chrome's DevTools WebSocket; its discovery JSON is at "
                                "…/desktop/cdp/json/version"));
    co_return;
  }
  auto opened = co_await OpenCdp(ctx, ex);
  if (!opened) co_return;
  if (!target) {
    // The browser target: the one /json/version names.
    auto version = co_await FetchDiscovery(ctx, *opened, "/json/version");
    Result<std::string> path = version ? Result<std::string>(Fail(ErrorCode::kUnavailable, "Chrome names no browser target"))
                                       : Result<std::string>(Fail(version.error()));
    if (version) {
      auto j = ParseJson(*version);
      if (j && j->is_object() && j->contains("webSocketDebuggerUrl") && (*j)["webSocketDebuggerUrl"].is_string()) {
        std::string url = (*j)["webSocketDebuggerUrl"].get<std::string>();
        size_t at = url.find("/devtools/browser/");
        if (at != std::string::npos) path = TargetPath("browser", url.substr(at + 18));
      }
    }
    if (!path) {
      co_await ex.SendError(path.error());
      co_return;
    }
    target = *path;
  }
  auto stream = co_await ConnectChrome(ctx, *opened);
  if (!stream) {
    co_await ex.SendError(stream.error());
    co_return;
  }
  auto guard = ctx.service.OpenStream(opened->ws.id, "desktop");
  http::WebSocket chrome(std::move(*stream));
  chrome.set_option(websocket::stream_base::timeout::suggested(boost::beast::role_type::client));
  boost::beast::get_lowest_layer(chrome).expires_after(kChromeDeadline);
  auto [hec] = co_await chrome.async_handshake(std::string(kChromeHost), *target, kTuple);
  boost::beast::get_lowest_layer(chrome).expires_never();
  if (hec) {
    co_await ex.SendError(Error(ErrorCode::kUnavailable, fmt::format("Chrome's DevTools refused {}: {}", *target, hec.message())));
    co_return;
  }
  std::string early = ex.TakeOver();
  if (!early.empty()) co_return;  // data before the handshake: no WebSocket client sends it
  http::WebSocket client(std::move(ex.stream()));
  client.set_option(websocket::stream_base::timeout{ex.options().io_timeout, std::chrono::seconds(30), true});
  auto [aec] = co_await client.async_accept(ex.request(), kTuple);
  if (aec) co_return;
  auto& desk = *ctx.desktop;
  desktop::ControlEvent opened_event{opened->ws.id, "desktop_cdp_opened", "a DevTools client connected to Chrome"};
  opened_event.data = {{"by", opened->by}, {"target", *target}};
  desk.Record({opened_event});
  desktop::CdpClient who{opened->ws.id, opened->by};
  auto stats = co_await desktop::BridgeCdp(client, chrome, who, desk);
  std::string message = fmt::format("a DevTools client disconnected ({} call(s), {} refused while a person held control){}",
                                    stats.calls, stats.refused, stats.error.empty() ? "" : ": " + stats.error);
  desktop::ControlEvent closed_event{opened->ws.id, "desktop_cdp_closed", message};
  closed_event.data = {{"by", opened->by}, {"calls", stats.calls}, {"refused", stats.refused}};
  desk.Record({closed_event});
}

http::Task<void> Subpath(ApiContext& ctx, http::Exchange& ex) {
  std::string rest(ex.param("rest"));  // "/json/version/": the router keeps the leading slash
  if (rest.starts_with('/')) rest.erase(0, 1);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();  // Playwright asks for json/version/
  if (rest.empty()) {
    co_await Tunnel(ctx, ex, std::nullopt);
  } else if (rest == "json/version") {
    co_await Discovery(ctx, ex, "/json/version");
  } else if (rest == "json/list" || rest == "json") {
    co_await Discovery(ctx, ex, "/json/list");
  } else if (rest.starts_with("devtools/")) {
    std::string_view tail = std::string_view(rest).substr(9);
    size_t slash = tail.find('/');
    Result<std::string> path = Fail(ErrorCode::kNotFound, "no such DevTools target");
    if (slash != std::string_view::npos) path = TargetPath(tail.substr(0, slash), tail.substr(slash + 1));
    if (path) {
      std::optional<std::string> target = *path;
      co_await Tunnel(ctx, ex, target);
    } else {
      co_await ex.SendError(path.error());
    }
  } else {
    Error e(ErrorCode::kNotFound, "the DevTools tunnel serves json/version, json/list and devtools/{kind}/{id}");
    co_await ex.SendError(e);
  }
}

}  // namespace

http::Task<nlohmann::json> ChromeTabs(ApiContext& ctx, const workspace::Workspace& ws) {
  if (ctx.desktop == nullptr || ws.state != workspace::State::kRunning) co_return nullptr;
  auto link = co_await ctx.service.Wake(ws.tenant_id, ws.id, std::chrono::seconds(2));
  if (!link) co_return nullptr;
  Opened o{ws, std::move(*link), ""};
  auto body = co_await FetchDiscovery(ctx, o, "/json/list");
  if (!body) co_return nullptr;
  auto list = ParseJson(*body);
  if (!list || !list->is_array()) co_return nullptr;
  // The guest's words, bounded: at most 50 tabs, each URL and title cut to a sane length.
  auto text = [](const nlohmann::json& t, const char* key, size_t max) {
    std::string s = t.contains(key) && t[key].is_string() ? t[key].get<std::string>() : "";
    if (s.size() > max) s.resize(max);
    return s;
  };
  nlohmann::json tabs = nlohmann::json::array();
  for (const auto& t : *list) {
    if (!t.is_object() || t.value("type", "") != "page") continue;
    if (tabs.size() == 50) break;
    nlohmann::json tab = nlohmann::json::object();
    tab["url"] = text(t, "url", 2048);
    tab["title"] = text(t, "title", 300);
    tabs.push_back(std::move(tab));
  }
  co_return tabs;
}

void AddDesktopCdpRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/cdp", [&ctx](http::Exchange& ex) { return Tunnel(ctx, ex, std::nullopt); });
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/cdp/{*rest}", [&ctx](http::Exchange& ex) { return Subpath(ctx, ex); });
}

}  // namespace berth::api
