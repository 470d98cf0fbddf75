// /v1/workspaces/{ws}/checkpoints: a workspace's checkpoints (controller/workspace/
// checkpoints.cc). Taking, restoring and deleting need a write key, reading a read key. Each
// call answers once the operation is done: it runs behind the workspace's queued operations.
#include <fmt/format.h>

#include "common/v1/checkpoint.h"
#include "controller/api/api_server.h"
#include "controller/api/json.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

// The checkpoint just taken, with its size read from its layers.
http::Task<nlohmann::json> Shown(ApiContext& ctx, const std::string& tenant, const std::string& ws,
                                 const store::Checkpoint& c) {
  auto info = co_await ctx.Blocking([&] { return ctx.service.GetCheckpoint(tenant, ws, c.id); });
  co_return v1::ToJson(CheckpointWire(c, info ? info->size_bytes : 0));
}

http::Task<void> Take(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = v1::CreateCheckpointFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ws(ex.param("ws"));
  workspace::CheckpointRequest take{request->name.value_or(""), request->memory};
  auto taken = co_await ctx.service.TakeCheckpoint(tenant, ws, std::move(take), ActorOf(ex));
  if (!taken) {
    co_await ex.SendError(taken.error());
    co_return;
  }
  auto json = co_await Shown(ctx, tenant, ws, *taken);
  co_await ex.SendJson(status::created, json);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ws(ex.param("ws"));
  auto listed = co_await ctx.Blocking([&] { return ctx.service.ListCheckpoints(tenant, ws); });
  if (!listed) {
    co_await ex.SendError(listed.error());
    co_return;
  }
  std::vector<v1::Checkpoint> wire;
  for (const auto& info : *listed) wire.push_back(CheckpointWire(info.checkpoint, info.size_bytes));
  co_await ex.SendJson(status::ok, v1::CheckpointListJson(wire));
}

http::Task<void> Get(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ws(ex.param("ws"));
  std::string cp(ex.param("cp"));
  auto info = co_await ctx.Blocking([&] { return ctx.service.GetCheckpoint(tenant, ws, cp); });
  if (!info) {
    co_await ex.SendError(info.error());
    co_return;
  }
  co_await ex.SendJson(status::ok, v1::ToJson(CheckpointWire(info->checkpoint, info->size_bytes)));
}

http::Task<void> Delete(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto gone = co_await ctx.service.DeleteCheckpoint(tenant, std::string(ex.param("ws")),
                                                    std::string(ex.param("cp")), ActorOf(ex));
  if (!gone) {
    co_await ex.SendError(gone.error());
    co_return;
  }
  co_await ex.SendJson(status::ok, v1::ToJson(CheckpointWire(*gone, 0)));
}

http::Task<void> Restore(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = v1::RestoreCheckpointFromJson(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ws(ex.param("ws"));
  auto restored = co_await ctx.service.RestoreCheckpoint(tenant, ws, std::string(ex.param("cp")),
                                                         request->undo, ActorOf(ex));
  if (!restored) {
    co_await ex.SendError(restored.error());
    co_return;
  }
  nlohmann::json answer = {{"workspace", WorkspaceJson(restored->workspace)}, {"undo", nullptr}};
  if (restored->undo) answer["undo"] = co_await Shown(ctx, tenant, ws, *restored->undo);
  co_await ex.SendJson(status::ok, answer);
}

// POST …/checkpoints/{cp}/fork {name, count?, labels?}: new workspaces, 201 once recorded
// (creating); their boots follow.
http::Task<void> ForkFrom(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request =
      workspace::ParseForkCheckpointRequest(*body, std::string(ex.param("ws")), std::string(ex.param("cp")));
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  request->by = ActorOf(ex);
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto forked = co_await ctx.service.Fork(tenant, std::move(*request));
  if (!forked) {
    co_await ex.SendError(forked.error());
    co_return;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& ws : *forked) list.push_back(WorkspaceJson(ws));
  nlohmann::json answer = {{"workspaces", std::move(list)}};
  co_await ex.SendJson(status::created, answer);
}

// GET …/checkpoints/{cp}/diff?to={checkpoint|current}&max_entries=N: what changed since the
// checkpoint (controller/workspace/diff.cc). The guest compares, so a stopped or hibernated
// workspace is started first (as exec does); a read key may ask.
http::Task<void> Diff(ApiContext& ctx, http::Exchange& ex) {
  workspace::DiffRequest request;
  request.from = std::string(ex.param("cp"));
  if (auto to = ex.query().Get("to"); to && !to->empty()) request.to = to->substr(0, 256);
  auto max = ex.query().GetInt("max_entries", protocol::kDefaultDiffEntries, 1, protocol::kMaxDiffEntries);
  if (!max) {
    co_await ex.SendError(max.error());
    co_return;
  }
  request.max_entries = static_cast<int>(*max);
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto diff = co_await ctx.service.DiffCheckpoints(tenant, std::string(ex.param("ws")), std::move(request),
                                                   ctx.options.wake_timeout, ActorOf(ex));
  if (!diff) {
    co_await ex.SendError(diff.error());
    co_return;
  }
  v1::CheckpointDiff wire;
  wire.from = std::move(diff->from);
  wire.to = std::move(diff->to);
  wire.result = std::move(diff->result);
  co_await ex.SendJson(status::ok, v1::ToJson(wire));
}

}  // namespace

void AddCheckpointRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/workspaces/{ws}/checkpoints", [&ctx](http::Exchange& ex) { return Take(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/checkpoints", [&ctx](http::Exchange& ex) { return List(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/checkpoints/{cp}", [&ctx](http::Exchange& ex) { return Get(ctx, ex); });
  router.Add(verb::delete_, "/v1/workspaces/{ws}/checkpoints/{cp}",
             [&ctx](http::Exchange& ex) { return Delete(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/checkpoints/{cp}/restore",
             [&ctx](http::Exchange& ex) { return Restore(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/checkpoints/{cp}/diff",
             [&ctx](http::Exchange& ex) { return Diff(ctx, ex); });
  router.Add(verb::post, "/v1/workspaces/{ws}/checkpoints/{cp}/fork",
             [&ctx](http::Exchange& ex) { return ForkFrom(ctx, ex); });
}

}  // namespace berth::api
