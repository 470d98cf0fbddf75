// /v1/workspaces: create, list, get, patch, delete, the lifecycle actions, waiting for a
// state, events and usage. Reads need a read key, everything else a write key; every lookup
// is by (the key's tenant, id or name), so another tenant's workspace is a 404.
#include <fmt/format.h>

#include "common/json.h"
#include "common/unix_time.h"
#include "controller/api/api_server.h"
#include "controller/api/json.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;
using workspace::State;
using workspace::Workspace;

constexpr std::chrono::milliseconds kPollEvery{250};
constexpr std::chrono::seconds kKeepaliveEvery{15};

nlohmann::json Present(ApiContext& ctx, const Workspace& ws) {
  return WorkspaceJson(ws, ctx.service.Awake(ws.id));
}

http::Task<void> SendWorkspace(ApiContext& ctx, http::Exchange& ex, status code,
                               const Result<Workspace>& ws) {
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  auto body = Present(ctx, *ws);
  co_await ex.SendJson(code, body);
}

http::Task<void> Create(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto request = workspace::ParseCreateRequest(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string key(ex.header("Idempotency-Key"));
  bool existed = false;
  auto ws = co_await ctx.Blocking([&] { return ctx.service.Create(tenant, *request, key, &existed); });
  co_await SendWorkspace(ctx, ex, existed ? status::ok : status::created, ws);
}

http::Task<void> List(ApiContext& ctx, http::Exchange& ex) {
  store::WorkspaceFilter filter;
  if (auto s = ex.query().Get("state")) {
    filter.state = workspace::StateFromName(*s);
    if (!filter.state) {
      co_await ex.SendError({ErrorCode::kInvalidArgument, fmt::format("unknown state '{}'", *s)});
      co_return;
    }
  }
  for (const auto& [k, v] : ex.query().items()) {
    if (k != "label") continue;
    auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      co_await ex.SendError({ErrorCode::kInvalidArgument, "label filters are label=KEY=VALUE"});
      co_return;
    }
    filter.labels.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  auto limit = ex.query().GetInt("limit", 100, 1, 1000);
  if (!limit) {
    co_await ex.SendError(limit.error());
    co_return;
  }
  filter.limit = static_cast<int>(*limit) + 1;  // one more tells whether there is a next page
  filter.after_id = ex.query().Get("after").value_or("");
  std::string tenant = PrincipalOf(ex).tenant_id;
  auto list = co_await ctx.Blocking([&] { return ctx.service.List(tenant, filter); });
  if (!list) {
    co_await ex.SendError(list.error());
    co_return;
  }
  nlohmann::json next = nullptr;
  if (list->size() > static_cast<size_t>(*limit)) {
    list->resize(static_cast<size_t>(*limit));
    next = list->back().id;
  }
  nlohmann::json items = nlohmann::json::array();
  for (const auto& ws : *list) items.push_back(Present(ctx, ws));
  nlohmann::json body = {{"workspaces", items}, {"next", next}};
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> Get(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto ws = co_await ctx.Blocking([&] { return ctx.service.Get(tenant, ref); });
  co_await SendWorkspace(ctx, ex, status::ok, ws);
}

http::Task<void> Patch(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto ws = co_await ctx.Blocking([&] { return ctx.service.Patch(tenant, ref, *body); });
  co_await SendWorkspace(ctx, ex, status::ok, ws);
}

enum class Action { kStart, kStop, kHibernate, kRestart, kKeepAlive, kDelete };

http::Task<void> Act(ApiContext& ctx, http::Exchange& ex, Action action) {
  if (!co_await Require(ex, Scope::kWrite)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  if (!body->is_object()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "the body must be a JSON object"});
    co_return;
  }
  bool force = false;
  if (action == Action::kStop && body->contains("force")) {
    if (!(*body)["force"].is_boolean()) {
      co_await ex.SendError({ErrorCode::kInvalidArgument, "'force' must be true or false"});
      co_return;
    }
    force = (*body)["force"].get<bool>();
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto ws = co_await ctx.Blocking([&]() -> Result<Workspace> {
    switch (action) {
      case Action::kStart: return ctx.service.Start(tenant, ref);
      case Action::kStop: return ctx.service.Stop(tenant, ref, force);
      case Action::kHibernate: return ctx.service.Hibernate(tenant, ref);
      case Action::kRestart: return ctx.service.Restart(tenant, ref);
      case Action::kKeepAlive: return ctx.service.KeepAlive(tenant, ref);
      case Action::kDelete: return ctx.service.Delete(tenant, ref);
    }
    return Fail(ErrorCode::kInternal, "unknown action");
  });
  co_await SendWorkspace(ctx, ex, action == Action::kKeepAlive ? status::ok : status::accepted, ws);
}

// Blocks (asynchronously) until the workspace is in the wanted state.
http::Task<void> Wait(ApiContext& ctx, http::Exchange& ex) {
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  if (!body->is_object()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "the body must be a JSON object"});
    co_return;
  }
  auto state_field = OptionalString(*body, "state");
  if (!state_field) {
    co_await ex.SendError(state_field.error());
    co_return;
  }
  std::string want_name = state_field->value_or("running");
  auto want = workspace::StateFromName(want_name);
  int64_t timeout_s = 300;
  if (body->contains("timeout_s")) {
    auto timeout = OptionalInt(*body, "timeout_s");
    if (!timeout || !*timeout || **timeout < 0 || **timeout > 3600) {
      co_await ex.SendError({ErrorCode::kInvalidArgument, "'timeout_s' must be 0..3600"});
      co_return;
    }
    timeout_s = **timeout;
  }
  if (!want) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, fmt::format("unknown state '{}'", want_name)});
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto ws = co_await ctx.Blocking([&] { return ctx.service.Get(tenant, ref); });
    if (!ws) {
      co_await ex.SendError(ws.error());
      co_return;
    }
    if (ws->state == *want) {
      co_await SendWorkspace(ctx, ex, status::ok, ws);
      co_return;
    }
    // States that will not turn into the wanted one by themselves.
    bool settled = ws->state == State::kError || ws->state == State::kStopped ||
                   ws->state == State::kHibernated || ws->state == State::kRunning;
    if (settled) {
      auto error = Error{ErrorCode::kFailedPrecondition,
                         fmt::format("workspace '{}' is {}{}{}", ws->name, workspace::StateName(ws->state),
                                     ws->error ? ": " : "", ws->error.value_or(""))};
      co_await ex.SendError(error);
      co_return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      auto error = Error{ErrorCode::kDeadlineExceeded,
                         fmt::format("workspace '{}' is still {} after {} s", ws->name,
                                     workspace::StateName(ws->state), timeout_s)};
      co_await ex.SendError(error);
      co_return;
    }
    co_await SleepFor(kPollEvery * 2);
  }
}

http::Task<void> Events(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto after = ex.query().GetInt("after", 0, 0, INT64_MAX);
  auto limit = ex.query().GetInt("limit", 100, 1, 1000);
  auto follow = ex.query().GetBool("follow", false);
  if (!after || !limit || !follow) {
    auto error = !after ? after.error() : !limit ? limit.error() : follow.error();
    co_await ex.SendError(error);
    co_return;
  }
  auto ws = co_await ctx.Blocking([&] { return ctx.service.Get(tenant, ref); });
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  std::string id = ws->id;
  int64_t cursor = *after;
  int n = static_cast<int>(*limit);
  auto events = co_await ctx.Blocking([&] { return ctx.store.ListEvents(id, cursor, n); });
  if (!events) {
    co_await ex.SendError(events.error());
    co_return;
  }
  if (!*follow) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : *events) list.push_back(EventJson(e));
    nlohmann::json body = {{"events", list}};
    co_await ex.SendJson(status::ok, body);
    co_return;
  }
  if (!co_await ex.BeginChunked(status::ok, "application/x-ndjson")) co_return;
  auto last_write = std::chrono::steady_clock::now();
  for (;;) {
    std::string out;
    for (const auto& e : *events) {
      // Event messages quote guest output (console lines): DumpJson never throws on them.
      out += DumpJson(EventJson(e)) + "\n";
      cursor = e.id;
    }
    if (out.empty() && std::chrono::steady_clock::now() - last_write >= kKeepaliveEvery) {
      out = "{\"type\":\"keepalive\"}\n";
    }
    if (!out.empty()) {
      if (!co_await ex.WriteChunk(out)) co_return;
      last_write = std::chrono::steady_clock::now();
    }
    co_await SleepFor(kPollEvery * 2);
    events = co_await ctx.Blocking([&] { return ctx.store.ListEvents(id, cursor, 1000); });
    if (!events) co_return;
    // The workspace is gone once its "deleted" event has gone out: end the stream.
    if (events->empty()) {
      auto still = co_await ctx.Blocking([&] { return ctx.store.GetWorkspaceById(id); });
      if (!still) {
        co_await ex.EndChunked();
        co_return;
      }
    }
  }
}

http::Task<void> Usage(ApiContext& ctx, http::Exchange& ex) {
  int64_t now = UnixNow();
  int64_t from = now - 30 * 24 * 3600;
  int64_t to = now;
  for (auto [key, target] : {std::pair<const char*, int64_t*>{"from", &from}, {"to", &to}}) {
    if (auto v = ex.query().Get(key)) {
      auto t = ParseTime(*v);
      if (!t) {
        co_await ex.SendError(t.error());
        co_return;
      }
      *target = *t;
    }
  }
  if (to <= from) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "'to' must be after 'from'"});
    co_return;
  }
  std::string tenant = PrincipalOf(ex).tenant_id;
  // Rows and the names of their workspaces in one trip to the pool (deleted ones have none).
  using Named = std::pair<store::Store::UsageRow, std::optional<std::string>>;
  auto rows = co_await ctx.Blocking([&]() -> Result<std::vector<Named>> {
    auto usage = ctx.store.Usage(tenant, from, to, now);
    if (!usage) return Fail(usage.error());
    std::vector<Named> out;
    for (auto& r : *usage) {
      auto ws = ctx.store.GetWorkspaceById(r.workspace_id);
      out.emplace_back(std::move(r), ws ? std::optional<std::string>(ws->name) : std::nullopt);
    }
    return out;
  });
  if (!rows) {
    co_await ex.SendError(rows.error());
    co_return;
  }
  nlohmann::json list = nlohmann::json::array();
  int64_t seconds = 0, vcpu_seconds = 0;
  for (const auto& [r, name] : *rows) {
    list.push_back({{"workspace", r.workspace_id},
                    {"name", name ? nlohmann::json(*name) : nlohmann::json(nullptr)},
                    {"size", r.size ? nlohmann::json(*r.size) : nlohmann::json(nullptr)},
                    {"seconds", r.seconds},
                    {"vcpu_seconds", r.vcpu_seconds}});
    seconds += r.seconds;
    vcpu_seconds += r.vcpu_seconds;
  }
  nlohmann::json body = {{"from", IsoTime(from)},
                         {"to", IsoTime(to)},
                         {"workspaces", list},
                         {"total", {{"seconds", seconds}, {"vcpu_seconds", vcpu_seconds}}}};
  co_await ex.SendJson(status::ok, body);
}

}  // namespace

void AddWorkspaceRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::post, "/v1/workspaces", [&ctx](http::Exchange& ex) { return Create(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces", [&ctx](http::Exchange& ex) { return List(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}", [&ctx](http::Exchange& ex) { return Get(ctx, ex); });
  router.Add(verb::patch, "/v1/workspaces/{ws}", [&ctx](http::Exchange& ex) { return Patch(ctx, ex); });
  router.Add(verb::delete_, "/v1/workspaces/{ws}",
             [&ctx](http::Exchange& ex) { return Act(ctx, ex, Action::kDelete); });
  const std::pair<const char*, Action> actions[] = {
      {"start", Action::kStart},   {"stop", Action::kStop},         {"hibernate", Action::kHibernate},
      {"restart", Action::kRestart}, {"keepalive", Action::kKeepAlive}};
  for (const auto& [name, action] : actions) {
    Action a = action;
    router.Add(verb::post, fmt::format("/v1/workspaces/{{ws}}/{}", name),
               [&ctx, a](http::Exchange& ex) { return Act(ctx, ex, a); });
  }
  router.Add(verb::post, "/v1/workspaces/{ws}/wait", [&ctx](http::Exchange& ex) { return Wait(ctx, ex); });
  router.Add(verb::get, "/v1/workspaces/{ws}/events", [&ctx](http::Exchange& ex) { return Events(ctx, ex); });
  router.Add(verb::get, "/v1/usage", [&ctx](http::Exchange& ex) { return Usage(ctx, ex); });
}

}  // namespace berth::api
