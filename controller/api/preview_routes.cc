// /v1/workspaces/{ws}/previews: preview grants of a workspace's ports (controller/preview/),
// and GET /v1/workspaces/{ws}/ports, the agent's list of listening ports with each one's
// preview address. Creating and revoking need a write key, listing a read key.
#include <fmt/format.h>

#include "common/blocking.h"
#include "common/client/ports.h"
#include "common/v1/preview.h"
#include "controller/api/api_server.h"
#include "controller/preview/preview_host.h"
#include "controller/preview/preview_request.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

// How long GET …/ports waits for the agent's answer (it reads /proc: a moment).
constexpr std::chrono::seconds kPortsDeadline{15};

// The route's workspace, looked up for the key's tenant (another tenant's is a 404).
Result<workspace::Workspace> WorkspaceOf(ApiContext& ctx, http::Exchange& ex) {
  return ctx.service.Get(PrincipalOf(ex).tenant_id, std::string(ex.param("ws")));
}

http::Task<void> Create(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto principal = PrincipalOf(ex);
  auto ws = WorkspaceOf(ctx, ex);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = v1::CreatePreviewFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  auto made = co_await ctx.Blocking([&] { return ctx.previews.Create(*ws, *request, principal.key_id); });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  auto json = v1::ToJson(*made);
  co_await ex.SendJson(status::created, json);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  auto ws = WorkspaceOf(ctx, ex);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto listed = co_await ctx.Blocking([&] { return ctx.previews.List(*ws); });
  if (!listed) {
    co_await ex.SendError(listed.error());
    co_return;
  }
  auto json = v1::PreviewListJson(*listed);
  co_await ex.SendJson(status::ok, json);
}

http::Task<void> Revoke(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto ws = WorkspaceOf(ctx, ex);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  std::string id(ex.param("id"));
  auto revoked = co_await ctx.Blocking([&] { return ctx.previews.Revoke(*ws, id); });
  if (!revoked) {
    co_await ex.SendError(revoked.error());
    co_return;
  }
  auto json = v1::ToJson(*revoked);
  co_await ex.SendJson(status::ok, json);
}

// POST /v1/workspaces/{ws}/ports/{port}/open: the web UI's way into a private preview. Preview
// hosts are other origins, which the session cookie never reaches; the signed-in page gets a
// link carrying a pass for this port and this session (sessions.h), which the preview host
// trades for its own cookie. No grant is made: the pass ends with the session.
http::Task<void> OpenForSession(ApiContext& ctx, http::Exchange& ex) {
  std::string session_id = ex.context().value("session_id", std::string());
  auto cookie = CookieValue(ex.header(http::bhttp::field::cookie), kSessionCookie);
  if (session_id.empty() || !cookie) {
    co_await ex.SendError({ErrorCode::kInvalidArgument,
                           "this opens a preview for a web UI session; with an API key, make a link "
                           "(POST /v1/workspaces/{ws}/previews) or send the key to the preview host"});
    co_return;
  }
  auto port = preview::ParseStrictPort(ex.param("port"));
  if (!port) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "the port is a number from 1 to 65535"});
    co_return;
  }
  auto ws = WorkspaceOf(ctx, ex);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  std::string pass = Sessions::PreviewPass(*cookie, session_id, ws->id, *port);
  std::string url = fmt::format("{}?{}={}", ctx.previews.UrlOf(*port, *ws), preview::kTokenParam, pass);
  nlohmann::json body = {{"url", url}, {"port", *port}, {"workspace", ws->id}};
  co_await ex.SendJson(status::ok, body);
}

// The agent's list, each port with its preview address. Wakes a sleeping workspace, like the
// routes that stream through to the agent.
http::Task<void> Ports(ApiContext& ctx, http::Exchange& ex) {
  auto ws = WorkspaceOf(ctx, ex);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(ws->tenant_id, ws->id, ctx.options.wake_timeout, ActorOf(ex),
                                        "a request for its ports");
  if (!link) {
    co_await ex.SendError(link.error());
    co_return;
  }
  auto ports = co_await ctx.Blocking([&] {
    client::ClientOptions options;
    options.deadline = DeadlineIn(kPortsDeadline);
    client::ApiClient agent(link->endpoint, link->token, options);
    return client::ListPorts(agent, "/v1");
  });
  if (!ports) {
    co_await ex.SendError(ports.error());
    co_return;
  }
  nlohmann::json list = nlohmann::json::array();
  for (auto& p : *ports) {
    p.preview_url = ctx.previews.Url(p.port, ws->name);
    list.push_back(protocol::ToJson(p));
  }
  nlohmann::json body = {{"ports", std::move(list)}};
  co_await ex.SendJson(status::ok, body);
}

}  // namespace

void AddPreviewRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/workspaces/{ws}/previews", [&ctx](http::Exchange& ex) { return Create(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/previews", [&ctx](http::Exchange& ex) { return List(ctx, ex); });
  router.Add(verb::delete_, "/v1/workspaces/{ws}/previews/{id}",
             [&ctx](http::Exchange& ex) { return Revoke(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/ports", [&ctx](http::Exchange& ex) { return Ports(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/ports/{port}/open",
             [&ctx](http::Exchange& ex) { return OpenForSession(ctx, ex); });
}

}  // namespace berth::api
