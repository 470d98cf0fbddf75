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
  std::string tenant = PrincipalOf(ex).tenant_id;
  if (workspace::IsForkRequest(*body)) {
    // {"from": {...}}: a fork (controller/workspace/forks.cc).
    auto fork = workspace::ParseForkRequest(*body);
    if (!fork) {
      co_await ex.SendError(fork.error());
      co_return;
    }
    fork->by = ActorOf(ex);
    // A retry with the Idempotency-Key of a fork already made: that workspace, 200, and no
    // second checkpoint.
    fork->idempotency_key = std::string(ex.header("Idempotency-Key"));
    if (!fork->idempotency_key.empty()) {
      auto earlier = co_await ctx.Blocking([&] { return ctx.service.ByIdempotencyKey(tenant, fork->idempotency_key); });
      if (!earlier) {
        co_await ex.SendError(earlier.error());
        co_return;
      }
      if (*earlier) {
        Result<Workspace> ws = std::move(**earlier);
        co_await SendWorkspace(ctx, ex, status::ok, ws);
        co_return;
      }
    }
    auto forked = co_await ctx.service.Fork(tenant, std::move(*fork));
    if (!forked) {
      co_await ex.SendError(forked.error());
      co_return;
    }
    Result<Workspace> ws = std::move(forked->front());
    co_await SendWorkspace(ctx, ex, status::created, ws);
    co_return;
  }
  auto request = workspace::ParseCreateRequest(*body);
  if (!request) {
    co_await ex.SendError(request.error());
    co_return;
  }
  std::string key(ex.header("Idempotency-Key"));
  request->by = ActorOf(ex);
  auto created = co_await ctx.service.Create(tenant, *request, key);
  if (!created) {
    co_await ex.SendError(created.error());
    co_return;
  }
  status code = created->existed ? status::ok : status::created;
  Result<Workspace> ws = std::move(created->workspace);
  co_await SendWorkspace(ctx, ex, code, ws);
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
  auto list = ctx.service.List(tenant, filter);
  v1::WorkspacePage page;
  if (list.size() > static_cast<size_t>(*limit)) {
    list.resize(static_cast<size_t>(*limit));
    page.next = list.back().id;
  }
  for (const auto& ws : list) page.workspaces.push_back(WorkspaceWire(ws, ctx.service.Awake(ws.id)));
  auto body = v1::ToJson(page);
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> Get(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto ws = ctx.service.Get(tenant, ref);
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
  auto ws = co_await ctx.service.Patch(tenant, ref, *body, ActorOf(ex));
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
  std::string by = ActorOf(ex);
  Result<Workspace> ws = Fail(ErrorCode::kInternal, "unknown action");
  switch (action) {
    case Action::kStart: ws = co_await ctx.service.Start(tenant, ref, {}, by); break;
    case Action::kStop: ws = co_await ctx.service.Stop(tenant, ref, force, by); break;
    case Action::kHibernate: ws = co_await ctx.service.Hibernate(tenant, ref, by); break;
    case Action::kRestart: ws = co_await ctx.service.Restart(tenant, ref, by); break;
    case Action::kKeepAlive: ws = co_await ctx.service.KeepAlive(tenant, ref); break;
    case Action::kDelete: ws = co_await ctx.service.Delete(tenant, ref, by); break;
  }
  status code = action == Action::kKeepAlive ? status::ok : status::accepted;
  co_await SendWorkspace(ctx, ex, code, ws);
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
  // No polling: the service says when the state changes.
  auto ws = co_await ctx.service.WaitForState(tenant, ref, *want, std::chrono::seconds(timeout_s));
  co_await SendWorkspace(ctx, ex, status::ok, ws);
}

// ?after=&limit=&type=&actor=&since= (store/event_filter.h).
Result<store::EventFilter> EventFilterOf(const http::Exchange& ex) {
  store::EventFilter filter;
  auto after = ex.query().GetInt("after", 0, 0, INT64_MAX);
  if (!after) return Fail(after.error());
  auto limit = ex.query().GetInt("limit", 100, 1, v1::kMaxEventPage);
  if (!limit) return Fail(limit.error());
  filter.after_id = *after;
  filter.limit = static_cast<int>(*limit);
  const auto& q = ex.query();
  auto parsed = store::ParseEventFilter(q.Get("type").value_or(""), q.Get("actor").value_or(""),
                                        q.Get("since").value_or(""), filter);
  if (!parsed) return Fail(parsed.error());
  return filter;
}

http::Task<void> Events(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto filter = EventFilterOf(ex);
  auto follow = ex.query().GetBool("follow", false);
  if (!filter || !follow) {
    auto error = !filter ? filter.error() : follow.error();
    co_await ex.SendError(error);
    co_return;
  }
  auto ws = ctx.service.Get(tenant, ref);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  std::string id = ws->id;
  int64_t& cursor = filter->after_id;
  int& n = filter->limit;
  // Subscribed before the backlog is read: nothing between the two is missed (and what both
  // carry is sent once, by id).
  std::unique_ptr<workspace::Subscription> changes;
  if (*follow) changes = ctx.service.Subscribe(co_await boost::asio::this_coro::executor, tenant, id);
  auto read = [&] { return ctx.store.ListEvents(id, *filter); };
  auto events = co_await ctx.Blocking(read);
  if (!events) {
    co_await ex.SendError(events.error());
    co_return;
  }
  if (!*follow) {
    std::vector<v1::Event> list;
    for (const auto& e : *events) list.push_back(EventWire(e));
    auto body = v1::EventListJson(list);
    co_await ex.SendJson(status::ok, body);
    co_return;
  }
  if (!co_await ex.BeginChunked(status::ok, "application/x-ndjson")) co_return;
  // A backlog longer than the first page is read on, page by page, before the live events.
  bool more = events->size() >= static_cast<size_t>(n);
  n = 1000;
  for (;;) {
    std::string out;
    for (const auto& e : *events) {
      if (e.id <= cursor) continue;
      out += DumpJson(EventJson(e)) + "\n";
      cursor = e.id;
    }
    events->clear();
    if (!out.empty()) {
      auto wrote = co_await ex.WriteChunk(out);
      if (!wrote) co_return;
    }
    if (more) {
      auto next = co_await ctx.Blocking(read);
      if (!next) co_return;
      more = next->size() >= static_cast<size_t>(n);
      events = std::move(next);
      continue;
    }
    auto change = co_await changes->Next(std::chrono::steady_clock::now() + kKeepaliveEvery);
    if (changes->TakeLagged()) {
      // This follower fell behind and lost changes: the store has them all.
      auto again = co_await ctx.Blocking(read);
      if (!again) co_return;
      more = again->size() >= static_cast<size_t>(n);
      events = std::move(again);
      continue;
    }
    if (!change) {
      if (changes->closed()) co_return;  // berthd is shutting down
      std::string keepalive = std::string(v1::kKeepaliveLine) + "\n";
      if (!co_await ex.WriteChunk(keepalive)) co_return;
      continue;
    }
    if (change->event && filter->Matches(change->event->type, change->event->actor, change->event->at)) {
      events->push_back(std::move(*change->event));
    }
    if (change->deleted) {
      // The workspace is gone once its "deleted" event has gone out: end the stream.
      std::string last;
      for (const auto& e : *events) {
        if (e.id > cursor) last += DumpJson(EventJson(e)) + "\n";
      }
      if (!last.empty()) {
        auto wrote = co_await ex.WriteChunk(last);
        if (!wrote) co_return;
      }
      co_await ex.EndChunked();
      co_return;
    }
  }
}

// Every workspace of the tenant, in pages from memory.
std::vector<Workspace> AllOf(ApiContext& ctx, const std::string& tenant) {
  std::vector<Workspace> all;
  store::WorkspaceFilter filter;
  filter.limit = 1000;
  for (;;) {
    auto page = ctx.service.List(tenant, filter);
    all.insert(all.end(), page.begin(), page.end());
    if (page.size() < static_cast<size_t>(filter.limit)) return all;
    filter.after_id = page.back().id;
  }
}

std::string SseEvent(std::string_view name, const nlohmann::json& data) {
  // DumpJson writes one line: the data never needs splitting into several "data:" lines.
  return fmt::format("event: {}\ndata: {}\n\n", name, DumpJson(data));
}

// GET /v1/watch/workspaces: the tenant's workspaces as server-sent events (the web UI's live
// list; a browser's EventSource reconnects by itself and gets a fresh snapshot).
http::Task<void> Watch(ApiContext& ctx, http::Exchange& ex) {
  std::string tenant = PrincipalOf(ex).tenant_id;
  // Subscribed before the snapshot is taken: a change in between is sent twice at worst,
  // never lost.
  auto changes = ctx.service.Subscribe(co_await boost::asio::this_coro::executor, tenant);
  auto snapshot = [&] {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& ws : AllOf(ctx, tenant)) list.push_back(Present(ctx, ws));
    return SseEvent("snapshot", {{"workspaces", std::move(list)}});
  };
  // Named locals, not temporaries in the co_await (docs/architecture.md, g++ 12 pitfalls).
  const std::vector<std::pair<std::string, std::string>> headers = {{"Cache-Control", "no-store"},
                                                                    {"X-Accel-Buffering", "no"}};
  if (!co_await ex.BeginChunked(status::ok, "text/event-stream", headers)) co_return;
  std::string first = "retry: 2000\n\n" + snapshot();
  if (!co_await ex.WriteChunk(first)) co_return;
  for (;;) {
    auto change = co_await changes->Next(std::chrono::steady_clock::now() + kKeepaliveEvery);
    std::string out;
    if (changes->TakeLagged()) {
      out = snapshot();  // this watcher lost changes: start it over
    } else if (!change) {
      if (changes->closed()) co_return;  // berthd is shutting down
      out = ": keepalive\n\n";
    } else if (change->deleted) {
      nlohmann::json gone = {{"id", change->workspace_id}};
      out = SseEvent("deleted", gone);
    } else if (change->workspace) {
      out = SseEvent("workspace", Present(ctx, *change->workspace));
    } else {
      continue;  // a timeline event alone: the record did not change
    }
    if (!co_await ex.WriteChunk(out)) co_return;
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
  v1::Usage usage;
  usage.from = from;
  usage.to = to;
  for (const auto& [r, name] : *rows) {
    v1::UsageRow row;
    row.workspace = r.workspace_id;
    row.name = name;
    row.size = r.size;
    row.seconds = r.seconds;
    row.vcpu_seconds = r.vcpu_seconds;
    usage.workspaces.push_back(std::move(row));
    usage.total_seconds += r.seconds;
    usage.total_vcpu_seconds += r.vcpu_seconds;
  }
  auto body = v1::ToJson(usage);
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
  router.Add(verb::get, "/v1/watch/workspaces", [&ctx](http::Exchange& ex) { return Watch(ctx, ex); });
}

}  // namespace berth::api
