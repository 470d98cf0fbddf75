// /v1/workspaces/{ws}/desktop/...: the viewer's WebSocket bridged to the workspace's VNC
// socket, the tickets that open it from a browser, and who controls input (DESIGN.md,
// "Desktop"; controller/desktop/). A request here is authenticated by an API key, or, for the
// WebSocket and the control routes only, by a desktop ticket (IsDesktopTicketRequest: the
// key check in ApiServer::Handle is skipped for them, and nothing else accepts a ticket).
#include <charconv>
#include <functional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/duration.h"
#include "common/v1/time.h"
#include "controller/api/api_server.h"
#include "controller/desktop/agent_hands.h"
#include "controller/desktop/clipboard.h"
#include "controller/desktop/vnc_bridge.h"

namespace berth::api {

using desktop::ViewerMode;
using http::bhttp::field;
using http::bhttp::status;
using http::bhttp::verb;
namespace websocket = boost::beast::websocket;

// Waits (at most `timeout`) until `done` holds for the workspace's control state; its state then.
static http::Task<desktop::ControlState> WaitForDesktop(workspace::WorkspaceService& service, desktop::DesktopControl& control,
                                                 std::string tenant_id, std::string workspace_id,
                                                 std::function<bool(const desktop::ControlState&)> done,
                                                 std::chrono::milliseconds timeout);

namespace {

constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);
constexpr std::string_view kTicketHeader = "X-Berth-Desktop-Ticket";
// ?wait= waits at most this long (a takeover's default lease is 15 minutes).
constexpr std::chrono::seconds kMaxWait{3600};

bool HasKey(http::Exchange& ex) { return !ex.context().value("tenant_id", std::string()).empty(); }

// Who is asking: an API key's principal, or a desktop ticket's viewer.
struct Caller {
  std::string tenant_id;
  std::string by;  // the key id (a ticket's: the key that issued it)
  bool key = false;
  Scope scope = Scope::kRead;  // a key's
  std::optional<desktop::Ticket> ticket;
};

// The route's workspace for `caller`; another tenant's, or not the ticket's, is a 404.
Result<workspace::Workspace> WorkspaceFor(ApiContext& ctx, http::Exchange& ex, const std::string& tenant) {
  return ctx.service.Get(tenant, std::string(ex.param("ws")));
}

// The caller of a control route: a key with `needed`, or an open viewer's ticket (its
// workspace checked by the caller).
Result<Caller> ControlCaller(http::Exchange& ex, desktop::DesktopService& desktop, Scope needed) {
  Caller c;
  if (HasKey(ex)) {
    auto p = PrincipalOf(ex);
    if (!p.Allows(needed)) {
      return Fail(ErrorCode::kPermissionDenied, fmt::format("this needs a key with {} scope", ScopeName(needed)));
    }
    c.tenant_id = p.tenant_id;
    c.by = p.key_id;
    c.key = true;
    c.scope = p.scope;
    return c;
  }
  auto t = desktop.tickets().OpenViewer(ex.header(kTicketHeader));
  if (!t) return Fail(t.error());
  if (needed != Scope::kRead && t->mode != ViewerMode::kControl) {
    return Fail(ErrorCode::kPermissionDenied, "a view ticket cannot take or hand back control");
  }
  c.tenant_id = t->tenant_id;
  c.by = t->key_id;
  c.ticket = *t;
  return c;
}

http::Task<void> CreateTicket(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto p = PrincipalOf(ex);
  auto ws = WorkspaceFor(ctx, ex, p.tenant_id);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  if (!body->is_object() || !body->contains("mode") || !(*body)["mode"].is_string()) {
    co_await ex.SendError(Error(ErrorCode::kInvalidArgument, "the body needs {\"mode\": \"view\" | \"control\"}"));
    co_return;
  }
  auto mode = desktop::ParseViewerMode((*body)["mode"].get<std::string>());
  if (!mode) {
    co_await ex.SendError(mode.error());
    co_return;
  }
  auto issued = ctx.desktop->tickets().Issue(ws->tenant_id, ws->id, p.key_id, *mode);
  if (!issued) {
    co_await ex.SendError(issued.error());
    co_return;
  }
  std::string host(ex.header(field::host));
  bool tls = ex.header("X-Forwarded-Proto") == "https";
  nlohmann::json out = {
      {"ticket", issued->secret},
      {"mode", desktop::ViewerModeName(*mode)},
      {"expires_at", v1::FormatTime(issued->expires_at)},
      {"url", fmt::format("{}://{}/v1/workspaces/{}/desktop/vnc?ticket={}", tls ? "wss" : "ws",
                          host.empty() ? "localhost" : host, ws->id, issued->secret)}};
  co_await ex.SendJson(status::created, out);
}

// Completes the WebSocket handshake, answering the `binary` subprotocol when the viewer asks
// for it (noVNC does). The connection is the WebSocket's from here on.
http::Task<Result<std::unique_ptr<http::WebSocket>>> AcceptViewer(http::Exchange& ex) {
  bool binary = false;
  std::string offered(ex.header(field::sec_websocket_protocol));
  for (size_t at = 0; at <= offered.size();) {
    size_t end = std::min(offered.find(',', at), offered.size());
    std::string token = offered.substr(at, end - at);
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    if (token == "binary") binary = true;
    at = end + 1;
  }
  std::string early = ex.TakeOver();
  if (!early.empty()) co_return Fail(ErrorCode::kInvalidArgument, "data before the WebSocket handshake");
  auto ws = std::make_unique<http::WebSocket>(std::move(ex.stream()));
  ws->set_option(websocket::stream_base::timeout{ex.options().io_timeout, std::chrono::seconds(30), true});
  if (binary) {
    ws->set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(field::sec_websocket_protocol, "binary"); }));
  }
  auto [ec] = co_await ws->async_accept(ex.request(), kTuple);
  if (ec) co_return Fail(ErrorCode::kUnavailable, "websocket handshake: " + ec.message());
  co_return ws;
}

http::Task<void> Vnc(ApiContext& ctx, http::Exchange& ex) {
  auto& desk = *ctx.desktop;
  if (!ex.IsWebSocketUpgrade()) {  // before a ticket is used up
    co_await ex.SendError(Error(ErrorCode::kInvalidArgument, "this endpoint is a WebSocket (binary RFB)"));
    co_return;
  }
  const bool key = HasKey(ex);
  if (!DesktopOriginAllowed(ex, desk.config(), key)) {
    co_await ex.SendError(Error(ErrorCode::kPermissionDenied, "this Origin may not open the desktop"));
    co_return;
  }
  desktop::Viewer viewer;
  std::string tenant;
  std::string ticket_hash;
  std::optional<workspace::Workspace> ws;
  if (key) {
    auto p = PrincipalOf(ex);
    auto mode = desktop::ParseViewerMode(ex.query().Get("mode").value_or("view"));
    if (!mode) {
      co_await ex.SendError(mode.error());
      co_return;
    }
    Scope needed = Scope::kRead;
    if (*mode == ViewerMode::kControl) needed = Scope::kWrite;
    if (!co_await Require(ex, needed)) co_return;
    auto found = WorkspaceFor(ctx, ex, p.tenant_id);
    if (!found) {
      co_await ex.SendError(found.error());
      co_return;
    }
    ws = std::move(*found);
    viewer.mode = *mode;
    viewer.by = p.key_id;
  } else {
    std::string secret = ex.query().Get("ticket").value_or("");
    auto peek = desk.tickets().Peek(secret);
    auto found = peek ? WorkspaceFor(ctx, ex, peek->tenant_id) : Result<workspace::Workspace>(Fail(peek.error()));
    auto t = found ? desk.tickets().Redeem(secret, found->id) : Result<desktop::Ticket>(Fail(found.error()));
    if (!t) {
      // Whatever was wrong (no ticket, used, expired, another workspace's), the same answer.
      co_await ex.SendError(Error(ErrorCode::kUnauthenticated, "no such ticket (tickets are single use and expire after 60 s)"));
      co_return;
    }
    if (auto admitted = ex.Admit(t->key_id); !admitted) {
      desk.tickets().ViewerClosed(t->hash);
      co_await ex.SendError(admitted.error());
      co_return;
    }
    ws = std::move(*found);
    viewer.mode = t->mode;
    viewer.by = t->key_id;
    ticket_hash = t->hash;
  }
  viewer.workspace_id = ws->id;
  // From here on the ticket (if any) is this viewer's until it closes.
  struct TicketRelease {
    desktop::DesktopService& desk;
    std::string hash;
    ~TicketRelease() {
      if (!hash.empty()) desk.tickets().ViewerClosed(hash);
    }
  } release{desk, ticket_hash};
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout,
                                        store::KeyActor(viewer.by), "a desktop viewer");
  if (!link) {
    co_await ex.SendError(link.error());
    co_return;
  }
  auto guard = ctx.service.OpenStream(ws->id, "desktop");
  net::Socket vnc(co_await boost::asio::this_coro::executor);
  boost::asio::local::stream_protocol::endpoint local(desk.VncSocket(ws->id).string());
  boost::asio::generic::stream_protocol::endpoint where(local);
  auto [cec] = co_await vnc.async_connect(where, kTuple);
  if (cec) {
    spdlog::warn("desktop {}: VNC socket: {}", ws->id, cec.message());
    co_await ex.SendError(Error(ErrorCode::kUnavailable, "the workspace's screen is not available (is it running?)"));
    co_return;
  }
  auto socket = co_await AcceptViewer(ex);
  if (!socket) co_return;
  desk.control().ViewerOpened(ws->id, viewer.mode);
  desktop::ControlEvent opened{ws->id, "desktop_viewer_opened",
                               fmt::format("a {} viewer opened the desktop", desktop::ViewerModeName(viewer.mode))};
  opened.data = {{"mode", desktop::ViewerModeName(viewer.mode)}, {"by", viewer.by}};
  desk.Record({opened});
  auto stats = co_await desktop::BridgeViewer(**socket, vnc, viewer, desk,
                                              std::chrono::seconds(desk.config().handshake_timeout_s));
  desk.control().ViewerClosed(ws->id, viewer.mode);
  desktop::ControlEvent closed{ws->id, "desktop_viewer_closed",
                               fmt::format("a {} viewer closed the desktop{}", desktop::ViewerModeName(viewer.mode),
                                           stats.dropped > 0 ? fmt::format(" ({} input message(s) dropped)", stats.dropped) : "")};
  closed.data = {{"mode", desktop::ViewerModeName(viewer.mode)}, {"by", viewer.by},
                 {"messages", stats.messages}, {"dropped", stats.dropped},
                 {"bytes_to_viewer", stats.to_viewer}, {"bytes_to_server", stats.to_server},
                 {"error", stats.error}};
  desk.Record({closed});
}

// The workspace a control route acts on, for `caller` (a ticket: its own workspace only).
Result<workspace::Workspace> ControlWorkspace(ApiContext& ctx, http::Exchange& ex, const Caller& caller) {
  auto ws = WorkspaceFor(ctx, ex, caller.tenant_id);
  if (!ws) return ws;
  if (caller.ticket && caller.ticket->workspace_id != ws->id) {
    return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", ex.param("ws")));
  }
  return ws;
}

http::Task<void> GetControl(ApiContext& ctx, http::Exchange& ex) {
  auto caller = ControlCaller(ex, *ctx.desktop, Scope::kRead);
  auto ws = caller ? ControlWorkspace(ctx, ex, *caller) : Result<workspace::Workspace>(Fail(caller.error()));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  // ?wait=release: until the agent holds it; ?wait=change&revision=N: until the state's revision
  // is not N (a page's push: it passes the revision it shows). Either within ?timeout.
  auto wait = ex.query().Get("wait");
  if (wait && *wait != "release" && *wait != "change") {
    co_await ex.SendError(Error(ErrorCode::kInvalidArgument, "wait must be \"release\" or \"change\""));
    co_return;
  }
  std::optional<uint64_t> seen;
  if (wait == "change") {
    auto raw = ex.query().Get("revision").value_or("");
    uint64_t n = 0;
    auto [end, err] = std::from_chars(raw.data(), raw.data() + raw.size(), n);
    if (raw.empty() || err != std::errc() || end != raw.data() + raw.size()) {
      co_await ex.SendError(Error(ErrorCode::kInvalidArgument,
                                  "wait=change needs revision=N, the revision of the state you have"));
      co_return;
    }
    seen = n;
  }
  auto timeout = ParseDuration(ex.query().Get("timeout").value_or("60s"));
  if (wait && (!timeout || *timeout > kMaxWait)) {
    co_await ex.SendError(Error(ErrorCode::kInvalidArgument, "timeout must be a duration of at most 1h"));
    co_return;
  }
  auto& control = ctx.desktop->control();
  if (wait) {
    auto timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
    // A wait also ends when the workspace stops (or is deleted) meanwhile: the desktop goes
    // with it, and the waiter learns so now rather than at its timeout. One that began on a
    // workspace already down waits as asked (no answer at once, so no client loop spins).
    auto live = [&service = ctx.service, tenant = ws->tenant_id, id = ws->id] {
      auto now = service.Get(tenant, id);
      return now && (now->state == workspace::State::kRunning || now->state == workspace::State::kStarting ||
                     now->state == workspace::State::kCreating);
    };
    const bool was_live = live();
    std::function<bool(const desktop::ControlState&)> done = [seen, was_live, live](const desktop::ControlState& s) {
      if (was_live && !live()) return true;
      return seen ? s.revision != *seen : s.holder == desktop::Holder::kAgent;
    };
    auto waited = co_await WaitForDesktop(ctx.service, control, ws->tenant_id, ws->id, std::move(done), timeout_ms);
    (void)waited;
  }
  auto body = control.Get(ws->id).ToJson();
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> ChangeControl(ApiContext& ctx, http::Exchange& ex, bool takeover) {
  auto caller = ControlCaller(ex, *ctx.desktop, Scope::kWrite);
  auto ws = caller ? ControlWorkspace(ctx, ex, *caller) : Result<workspace::Workspace>(Fail(caller.error()));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto body = co_await ex.ReadJson();
  if (body && !body->is_object()) body = Fail(ErrorCode::kInvalidArgument, "the body must be a JSON object");
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto text = [&](const char* name, size_t max) -> Result<std::string> {
    if (!body->contains(name) || (*body)[name].is_null()) return std::string();
    const auto& v = (*body)[name];
    if (!v.is_string() || v.get<std::string>().size() > max) {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' must be a string of at most {} bytes", name, max));
    }
    return v.get<std::string>();
  };
  auto& desk = *ctx.desktop;
  Result<desktop::ControlChange> change;
  if (takeover) {
    auto reason = text("reason", 500);
    bool is_private = false;
    if (body->contains("private") && !(*body)["private"].is_null()) {
      if ((*body)["private"].is_boolean()) {
        is_private = (*body)["private"].get<bool>();
      } else {
        reason = Fail(ErrorCode::kInvalidArgument, "'private' must be a boolean");
      }
    }
    // A lease of the person's own, shorter than the operator's (a quick captcha).
    std::optional<std::chrono::seconds> lease;
    if (reason && body->contains("lease_s") && !(*body)["lease_s"].is_null()) {
      const auto& v = (*body)["lease_s"];
      int64_t most = desk.control().max_lease().count();
      if (v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= most) {
        lease = std::chrono::seconds(v.get<int64_t>());
      } else {
        reason = Fail(ErrorCode::kInvalidArgument, fmt::format("'lease_s' is a whole number of seconds from 1 to {}", most));
      }
    }
    // Chrome's tabs as the person finds them, for the hand-back's summary to the agent.
    nlohmann::json tabs = nullptr;
    if (reason && desk.control().Get(ws->id).holder == desktop::Holder::kAgent) tabs = co_await ChromeTabs(ctx, *ws);
    change = reason ? desk.control().Takeover(ws->id, caller->by, *reason, is_private, std::move(tabs), lease)
                    : Result<desktop::ControlChange>(Fail(reason.error()));
  } else {
    auto note = text("note", 2000);
    nlohmann::json tabs = nullptr;
    if (note && desk.control().Get(ws->id).holder == desktop::Holder::kHuman) tabs = co_await ChromeTabs(ctx, *ws);
    change = note ? Result<desktop::ControlChange>(desk.control().Release(ws->id, caller->by, *note, std::move(tabs)))
                  : Result<desktop::ControlChange>(Fail(note.error()));
  }
  if (!change) {
    co_await ex.SendError(change.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  desk.Record(std::move(change->events));
  auto out = change->state.ToJson();
  co_await ex.SendJson(status::ok, out);
}

// POST …/desktop/control/request {reason, timeout_s?}: the agent asks a person to take over
// (shown on the desktop page); with timeout_s, waits until the person has taken over and handed
// back. DELETE: withdraws the request.
http::Task<void> HelpRequest(ApiContext& ctx, http::Exchange& ex, bool make) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto p = PrincipalOf(ex);
  auto ws = WorkspaceFor(ctx, ex, p.tenant_id);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto& desk = *ctx.desktop;
  if (!make) {
    auto change = desk.control().WithdrawHelp(ws->id, p.key_id);
    desk.Record(std::move(change.events));
    auto out = change.state.ToJson();
    co_await ex.SendJson(status::ok, out);
    co_return;
  }
  auto body = co_await ex.ReadJson();
  Result<std::string> reason = Fail(ErrorCode::kInvalidArgument, "'reason' must be a string of 1 to 500 bytes");
  int64_t timeout_s = 0;
  if (body && body->is_object() && body->contains("reason") && (*body)["reason"].is_string()) {
    std::string r = (*body)["reason"].get<std::string>();
    if (!r.empty() && r.size() <= 500) reason = r;
  }
  if (body && body->is_object() && body->contains("timeout_s")) {
    const auto& t = (*body)["timeout_s"];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kMaxWait.count()) {
      reason = Fail(ErrorCode::kInvalidArgument, "'timeout_s' must be an integer from 0 to 3600");
    } else {
      timeout_s = t.get<int64_t>();
    }
  }
  if (!body) reason = Fail(body.error());
  if (!reason) {
    co_await ex.SendError(reason.error());
    co_return;
  }
  std::string url = DesktopPageUrl(ex, ws->id);
  std::chrono::milliseconds wait = std::chrono::seconds(timeout_s);
  auto out = co_await RequestHuman(ctx.service, desk, std::move(*ws), p.key_id, std::move(*reason), wait, std::move(url));
  if (!out) {
    co_await ex.SendError(out.error());
    co_return;
  }
  co_await ex.SendJson(status::ok, *out);
}

// The workspace of an eyes-or-hands route once `allowed` (a check of DesktopControl's: a
// person's hold is refused before anything wakes) lets it through, woken: the screen is a
// running VM's.
struct Awake {
  workspace::Workspace ws;
  agent_client::AgentLink link;  // its agent, for the routes that go through it
};
http::Task<Result<Awake>> AwakeWorkspace(ApiContext& ctx, http::Exchange& ex,
                                         Status (desktop::DesktopControl::*allowed)(const std::string&) const) {
  auto ws = WorkspaceFor(ctx, ex, PrincipalOf(ex).tenant_id);
  if (!ws) co_return Fail(ws.error());
  if (auto ok = (ctx.desktop->control().*allowed)(ws->id); !ok) co_return Fail(ok.error());
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout, ActorOf(ex),
                                        "a desktop request");
  if (!link) co_return Fail(link.error());
  co_return Awake{std::move(*ws), std::move(*link)};
}

// GET …/desktop/screenshot?format=png|jpeg&scale=…&quality=…: the screen now
// (desktop/agent_hands.h). The screen's size and the image's are in the answer's headers, so
// a point on a scaled image maps back to the screen by their ratio.
http::Task<void> Screenshot(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kRead)) co_return;
  auto& desk = *ctx.desktop;
  auto format = desktop::ParseImageFormat(ex.query().Get("format").value_or("png"));
  auto scale = desktop::ParseScale(ex.query().Get("scale"));
  auto quality = ex.query().GetInt("quality", 80, 1, 100);
  if (!format || !scale || !quality) {
    auto error = !format ? format.error() : !scale ? scale.error() : quality.error();
    co_await ex.SendError(error);
    co_return;
  }
  auto awake = co_await AwakeWorkspace(ctx, ex, &desktop::DesktopControl::CheckAgentScreen);
  if (!awake) {
    co_await ex.SendError(awake.error());
    co_return;
  }
  desktop::ScreenshotRequest request{*format, *scale, static_cast<int>(*quality)};
  std::string id = awake->ws.id;
  auto shot = co_await ctx.Blocking([&] {
    return desktop::TakeScreenshot(desk, id, request, DeadlineIn(desktop::kScreenshotDeadline));
  });
  if (!shot) {
    co_await ex.SendError(shot.error());
    co_return;
  }
  http::bhttp::response<http::bhttp::string_body> res{status::ok, ex.request().version()};
  res.set(field::content_type, desktop::ImageMime(shot->format));
  res.set(field::cache_control, "no-store");
  res.set("X-Screen-Width", std::to_string(shot->screen.width));
  res.set("X-Screen-Height", std::to_string(shot->screen.height));
  res.set("X-Image-Width", std::to_string(shot->image.width));
  res.set("X-Image-Height", std::to_string(shot->image.height));
  res.body() = std::move(shot->bytes);
  co_await ex.Send(std::move(res));
}

// POST …/desktop/actions: computer-use actions as RFB input (desktop/agent_hands.h), refused
// (423) while a person holds the desktop, before anything wakes.
http::Task<void> Actions(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto& desk = *ctx.desktop;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto awake = co_await AwakeWorkspace(ctx, ex, &desktop::DesktopControl::CheckAgentInput);
  if (!awake) {
    co_await ex.SendError(awake.error());
    co_return;
  }
  auto guard = ctx.service.OpenStream(awake->ws.id, "desktop actions");
  // Named locals, not temporaries in the co_await expression (PrincipalOf's is an aggregate:
  // the g++ 12 pitfall in docs/architecture.md).
  std::string id = awake->ws.id;
  std::string by = PrincipalOf(ex).key_id;
  nlohmann::json request = std::move(*body);
  auto done = co_await desktop::RunActions(desk, ctx.pool, id, request, by);
  if (!done) {
    co_await ex.SendError(done.error());
    co_return;
  }
  nlohmann::json out = {{"done", done->actions},
                        {"screen", {{"width", done->screen.width}, {"height", done->screen.height}}}};
  co_await ex.SendJson(status::ok, out);
}

// GET …/desktop/clipboard: the text on the guest's clipboard (desktop/clipboard.h), for a read
// key or a control link's ticket (the person's "Copy from VM"; a view link cannot); during a
// private takeover only its holder may, refused before anything wakes.
http::Task<void> GetClipboard(ApiContext& ctx, http::Exchange& ex) {
  auto caller = ControlCaller(ex, *ctx.desktop, Scope::kRead);
  if (caller && caller->ticket && caller->ticket->mode != desktop::ViewerMode::kControl) {
    caller = Fail(ErrorCode::kPermissionDenied, "a view link cannot read the clipboard");
  }
  auto ws = caller ? ControlWorkspace(ctx, ex, *caller) : Result<workspace::Workspace>(Fail(caller.error()));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto& desk = *ctx.desktop;
  // Refused before anything wakes.
  if (auto ok = desktop::MayReadClipboard(desk.control(), ws->id, caller->by); !ok) {
    co_await ex.SendError(ok.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout,
                                        store::KeyActor(caller->by), "a clipboard read");
  if (!link) {
    co_await ex.SendError(link.error());
    co_return;
  }
  auto text = co_await ctx.Blocking(
      [&] { return desktop::GetGuestClipboard(desk, *link, ws->id, caller->by, kNoDeadline); });
  if (!text) {
    co_await ex.SendError(text.error());
    co_return;
  }
  nlohmann::json out = {{"text", std::move(*text)}};
  co_await ex.SendJson(status::ok, out);
}

// PUT …/desktop/clipboard {text}: for the agent (then ctrl+v types any Unicode) or the person
// holding control (the desktop page's paste: their key, or their control link's ticket).
http::Task<void> PutClipboard(ApiContext& ctx, http::Exchange& ex) {
  auto caller = ControlCaller(ex, *ctx.desktop, Scope::kWrite);
  auto ws = caller ? ControlWorkspace(ctx, ex, *caller) : Result<workspace::Workspace>(Fail(caller.error()));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  // Room for the text escaped (\u00e9 for two bytes of UTF-8: at most 6 for every byte).
  auto body = co_await ex.ReadJson(desktop::kMaxClipboard * 6 + 4096);
  Result<std::string> text = Fail(ErrorCode::kInvalidArgument, "the body needs {\"text\": \"…\"}");
  if (!body) text = Fail(body.error());
  if (body && body->is_object() && body->contains("text") && (*body)["text"].is_string()) {
    text = (*body)["text"].get<std::string>();
  }
  auto& desk = *ctx.desktop;
  // Refused before anything wakes.
  if (auto ok = text ? desktop::MayWriteClipboard(desk.control(), ws->id, caller->by) : Status(Fail(text.error())); !ok) {
    co_await ex.SendError(ok.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout,
                                        store::KeyActor(caller->by), "a clipboard write");
  if (!link) {
    co_await ex.SendError(link.error());
    co_return;
  }
  std::string id = ws->id;
  std::string by = caller->by;
  auto bytes = co_await ctx.Blocking(
      [&] { return desktop::SetGuestClipboard(desk, *link, id, by, std::move(*text), kNoDeadline); });
  if (!bytes) {
    co_await ex.SendError(bytes.error());
    co_return;
  }
  nlohmann::json out = {{"bytes", *bytes}};
  co_await ex.SendJson(status::ok, out);
}

}  // namespace

// A browser's page may only come from berthd itself (the request's own Host) or an origin the
// operator listed; a client that sends no Origin is no browser, and must hold a key.
bool DesktopOriginAllowed(http::Exchange& ex, const desktop::DesktopConfig& config, bool key) {
  std::string origin(ex.header(field::origin));
  if (origin.empty()) return key;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  if (SameOrigin(origin, ex.header(field::host))) return true;
  origin = lower(origin);
  for (const auto& o : config.origins) {
    if (lower(o) == origin) return true;
  }
  return false;
}

static http::Task<desktop::ControlState> WaitForDesktop(workspace::WorkspaceService& service, desktop::DesktopControl& control,
                                                 std::string tenant_id, std::string workspace_id,
                                                 std::function<bool(const desktop::ControlState&)> done,
                                                 std::chrono::milliseconds timeout) {
  // Subscribed before the state is read again: a change between the two is not missed.
  auto changes = service.Subscribe(co_await boost::asio::this_coro::executor, tenant_id, workspace_id);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(control.Get(workspace_id))) {
    auto change = co_await changes->Next(deadline);
    if (!change && (changes->closed() || std::chrono::steady_clock::now() >= deadline)) break;
  }
  desktop::ControlState state = control.Get(workspace_id);
  co_return state;
}

http::Task<Result<desktop::ControlState>> WaitForDesktopRelease(workspace::WorkspaceService& service,
                                                        desktop::DesktopControl& control, std::string tenant_id,
                                                        std::string workspace_id, std::chrono::milliseconds timeout) {
  std::function<bool(const desktop::ControlState&)> released = [](const desktop::ControlState& s) {
    return s.holder == desktop::Holder::kAgent;
  };
  auto state = co_await WaitForDesktop(service, control, std::move(tenant_id), std::move(workspace_id),
                                       std::move(released), timeout);
  co_return state;
}

http::Task<Result<nlohmann::json>> RequestHuman(workspace::WorkspaceService& service, desktop::DesktopService& desk,
                                        workspace::Workspace ws, std::string by, std::string reason,
                                        std::chrono::milliseconds timeout, std::string desktop_url) {
  auto& control = desk.control();
  auto change = control.RequestHelp(ws.id, by, reason);
  const uint64_t request_id = change.state.request->id;
  for (auto& e : change.events) e.data["url"] = desktop_url;
  desk.Record(std::move(change.events));
  service.NoteActivity(ws.id);
  // Ours is open while the request is the same one (no newer request replaced it).
  auto ours = [request_id](const desktop::ControlState& s) { return s.request && s.request->id == request_id; };
  std::function<bool(const desktop::ControlState&)> settled = [ours](const desktop::ControlState& s) {
    return !ours(s);
  };
  desktop::ControlState state = control.Get(ws.id);
  if (timeout.count() > 0) {
    state = co_await WaitForDesktop(service, control, ws.tenant_id, ws.id, std::move(settled), timeout);
  }
  if (timeout.count() > 0 && ours(state) && !state.request->taken) {
    auto withdrawn = control.WithdrawHelp(ws.id, by);
    desk.Record(std::move(withdrawn.events));
    state = withdrawn.state;
  }
  nlohmann::json out = state.ToJson();
  // Answered: a person took over after the request and has handed back since.
  out["answered"] = state.handback && state.handback->request_id == request_id;
  out["url"] = desktop_url;
  Result<nlohmann::json> result = std::move(out);
  co_return result;
}

std::string DesktopPageUrl(http::Exchange& ex, const std::string& workspace_id) {
  return fmt::format("{}://{}/w/{}/desktop", ex.secure() ? "https" : "http", ex.header(field::host), workspace_id);
}

bool IsDesktopTicketRequest(http::Exchange& ex) {
  if (!ex.header(field::authorization).empty()) return false;
  // Exactly /v1/workspaces/{ws}/desktop/<tail>, so that no other route is reached keyless.
  std::string_view path = ex.path();
  constexpr std::string_view kPrefix = "/v1/workspaces/";
  if (!path.starts_with(kPrefix)) return false;
  path.remove_prefix(kPrefix.size());
  size_t slash = path.find('/');
  if (slash == 0 || slash == std::string_view::npos) return false;
  std::string_view tail = path.substr(slash);
  if (tail == "/desktop/vnc") return ex.method() == verb::get && ex.query().Has("ticket");
  if (ex.header(kTicketHeader).empty()) return false;
  if (tail == "/desktop/control") return ex.method() == verb::get;
  if (tail == "/desktop/clipboard") return ex.method() == verb::put || ex.method() == verb::get;
  return ex.method() == verb::post && (tail == "/desktop/control/takeover" || tail == "/desktop/control/release");
}

void AddDesktopRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/workspaces/{ws}/desktop/tickets", [&ctx](http::Exchange& ex) { return CreateTicket(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/vnc", [&ctx](http::Exchange& ex) { return Vnc(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/control", [&ctx](http::Exchange& ex) { return GetControl(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/desktop/control/takeover",
             [&ctx](http::Exchange& ex) { return ChangeControl(ctx, ex, true); });
  router.Add(verb::post, "/v1/workspaces/{ws}/desktop/control/release",
             [&ctx](http::Exchange& ex) { return ChangeControl(ctx, ex, false); });
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/screenshot", [&ctx](http::Exchange& ex) { return Screenshot(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/desktop/actions", [&ctx](http::Exchange& ex) { return Actions(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/desktop/clipboard", [&ctx](http::Exchange& ex) { return GetClipboard(ctx, ex); });
  router.Add(verb::put, "/v1/workspaces/{ws}/desktop/clipboard", [&ctx](http::Exchange& ex) { return PutClipboard(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/desktop/control/request",
             [&ctx](http::Exchange& ex) { return HelpRequest(ctx, ex, true); });
  router.Add(verb::delete_, "/v1/workspaces/{ws}/desktop/control/request",
             [&ctx](http::Exchange& ex) { return HelpRequest(ctx, ex, false); });
  AddDesktopCdpRoutes(router, ctx);
}

}  // namespace berth::api
