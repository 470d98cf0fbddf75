// /v1/templates: a tenant's templates (controller/workspace/templates.cc). Publishing and
// deleting need a write key, reading a read key. A workspace is made from one with
// POST /v1/workspaces {"name", "template"} (workspace_routes.cc).
#include <fmt/format.h>

#include "controller/api/api_server.h"
#include "controller/api/json.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

nlohmann::json Shown(ApiContext& ctx, const store::Template& t, bool with_log = false) {
  return v1::ToJson(TemplateWire(ctx.service, t, with_log));
}

http::Task<void> Create(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = workspace::ParseTemplateRequest(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  request->by = ActorOf(ex);
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto made = co_await ctx.service.CreateTemplate(tenant, std::move(*request));
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  auto json = Shown(ctx, *made);
  // A build goes on after the answer: GET /v1/templates/{tpl} says when it is ready.
  const auto code = made->state == "building" ? status::accepted : status::created;
  co_await ex.SendJson(code, json);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto listed = co_await ctx.Blocking([&] { return ctx.service.ListTemplates(tenant); });
  if (!listed) {
    co_await ex.SendError(listed.error());
    co_return;
  }
  nlohmann::json items = nlohmann::json::array();
  for (const auto& t : *listed) items.push_back(Shown(ctx, t));
  nlohmann::json answer = nlohmann::json::object();
  answer["templates"] = std::move(items);
  co_await ex.SendJson(status::ok, answer);
}

http::Task<void> Get(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string name(ex.param("tpl"));
  auto found = co_await ctx.Blocking([&] { return ctx.service.GetTemplate(tenant, name); });
  if (!found) {
    co_await ex.SendError(found.error());
    co_return;
  }
  auto json = Shown(ctx, *found, true);
  co_await ex.SendJson(status::ok, json);
}

http::Task<void> Delete(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string name(ex.param("tpl"));
  std::string by = ActorOf(ex);
  auto gone = co_await ctx.service.DeleteTemplate(tenant, name, by);
  if (!gone) {
    co_await ex.SendError(gone.error());
    co_return;
  }
  auto json = Shown(ctx, *gone);
  co_await ex.SendJson(status::ok, json);
}

}  // namespace

void AddTemplateRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/templates", [&ctx](http::Exchange& ex) { return Create(ctx, ex); });
  router.Add(verb::get, "/v1/templates", [&ctx](http::Exchange& ex) { return List(ctx, ex); });
  router.Add(verb::get, "/v1/templates/{tpl}", [&ctx](http::Exchange& ex) { return Get(ctx, ex); });
  router.Add(verb::delete_, "/v1/templates/{tpl}", [&ctx](http::Exchange& ex) { return Delete(ctx, ex); });
}

}  // namespace berth::api
