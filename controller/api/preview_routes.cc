// /v1/workspaces/{ws}/previews: preview grants of a workspace's ports (controller/preview/),
// and GET /v1/workspaces/{ws}/ports, the agent's list of listening ports with each one's
// preview address. Creating and revoking need a write key, listing a read key.
#include <fmt/format.h>

#include "common/blocking.h"
#include "common/client/ports.h"
#include "common/v1/preview.h"
#include "controller/api/api_server.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

// How long GET …/ports waits for the agent's answer (it reads /proc: a moment).
constexpr std::chrono::seconds kPortsDeadline{15};

v1::Preview Present(ApiContext& ctx, const store::Preview& p, const workspace::Workspace& ws) {
  v1::Preview out;
  out.id = p.id;
  out.workspace_id = p.workspace_id;
  out.port = static_cast<uint16_t>(p.port);
  out.is_public = p.is_public;
  int64_t now = ctx.previews.grants().Now();
  out.status = p.revoked_at ? "revoked" : p.expires_at <= now ? "expired" : "active";
  // The name reads better in a link; the id when the name has no preview host.
  out.url = ctx.previews.Url(out.port, ws.name).value_or(ctx.previews.Url(out.port, ws.id).value_or(""));
  out.created_at = p.created_at;
  out.expires_at = p.expires_at;
  out.last_used_at = p.last_used_at;
  out.revoked_at = p.revoked_at;
  return out;
}

http::Task<void> Create(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto principal = PrincipalOf(ex);
  auto ws = ctx.service.Get(principal.tenant_id, std::string(ex.param("ws")));
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
  const auto& config = ctx.previews.config();
  auto ttl = request->expires_in_s ? std::chrono::seconds(*request->expires_in_s) : config.default_ttl;
  if (ttl > config.max_ttl || ttl.count() < 60) {
    Error error(ErrorCode::kInvalidArgument,
                fmt::format("'expires_in' must be between 60 s and {} s (this berthd's preview.max_ttl)",
                            config.max_ttl.count()));
    co_await ex.SendError(error);
    co_return;
  }
  auto made = co_await ctx.Blocking([&] {
    return ctx.previews.grants().Create(ws->tenant_id, ws->id, request->port, request->is_public, ttl,
                                        principal.key_id);
  });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  auto out = Present(ctx, made->record, *ws);
  if (!made->token.empty()) {
    out.token = made->token;
    out.link = fmt::format("{}?berth_preview_token={}", out.url, made->token);
  }
  auto json = v1::ToJson(out);
  co_await ex.SendJson(status::created, json);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  auto principal = PrincipalOf(ex);
  auto ws = ctx.service.Get(principal.tenant_id, std::string(ex.param("ws")));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto rows = co_await ctx.Blocking([&] { return ctx.store.ListPreviews(ws->tenant_id, ws->id); });
  if (!rows) {
    co_await ex.SendError(rows.error());
    co_return;
  }
  std::vector<v1::Preview> out;
  for (const auto& p : *rows) out.push_back(Present(ctx, p, *ws));
  auto json = v1::PreviewListJson(out);
  co_await ex.SendJson(status::ok, json);
}

http::Task<void> Revoke(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto principal = PrincipalOf(ex);
  auto ws = ctx.service.Get(principal.tenant_id, std::string(ex.param("ws")));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  std::string id(ex.param("id"));
  auto revoked = co_await ctx.Blocking([&]() -> Result<store::Preview> {
    if (auto s = ctx.previews.grants().Revoke(ws->tenant_id, ws->id, id); !s) return Fail(s.error());
    return ctx.store.GetPreview(ws->tenant_id, ws->id, id);
  });
  if (!revoked) {
    co_await ex.SendError(revoked.error());
    co_return;
  }
  auto json = v1::ToJson(Present(ctx, *revoked, *ws));
  co_await ex.SendJson(status::ok, json);
}

// The agent's list, each port with its preview address. Wakes a sleeping workspace, like the
// routes that stream through to the agent.
http::Task<void> Ports(ApiContext& ctx, http::Exchange& ex) {
  auto principal = PrincipalOf(ex);
  auto ws = ctx.service.Get(principal.tenant_id, std::string(ex.param("ws")));
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  auto link = co_await ctx.service.Wake(principal.tenant_id, ws->id, ctx.options.wake_timeout);
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
}

}  // namespace berth::api
