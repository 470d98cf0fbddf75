// The workspace-scoped routes that mirror the agent's API (DESIGN.md, "The path of a request"):
// authenticate, authorize, wake the workspace if it sleeps, count the request as activity and
// hold it open as a stream while it lasts, then stream it through to the agent.
#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/protocol/exec.h"
#include "controller/agent_client/agent_target.h"
#include "controller/api/agent_events.h"
#include "controller/api/api_server.h"

namespace berth::api {
namespace {

using http::bhttp::verb;
using workspace::State;
using workspace::Workspace;

// What the timeline needs of the request (agent_events.h), read before it is proxied.
AgentCall CallOf(http::Exchange& ex, const std::string& kind) {
  AgentCall call;
  call.kind = kind;
  call.method = ex.method();
  if (kind == "session") call.attach = ex.query().Get("attach");
  if (kind != "files") return call;
  std::string path(ex.param("rest"));
  if (!path.starts_with('/')) path.insert(0, 1, '/');
  call.path = path.substr(0, 1024);
  call.op = ex.query().Get("op");
  if (auto to = ex.query().Get("to")) call.to = to->substr(0, 1024);
  call.recursive = ex.query().GetBool("recursive", false).value_or(false);
  call.archive = ex.query().Get("archive").has_value() ||
                 http::beast::iequals(ex.header(http::bhttp::field::content_type), "application/x-tar");
  std::string_view length = ex.header(http::bhttp::field::content_length);
  uint64_t n = 0;
  if (!length.empty() && std::from_chars(length.data(), length.data() + length.size(), n).ec == std::errc()) {
    call.content_length = n;
  }
  return call;
}

http::Task<void> Forward(ApiContext& ctx, http::Exchange& ex, Scope needed, std::string kind) {
  if (!co_await Require(ex, needed)) co_return;
  std::string tenant = PrincipalOf(ex).tenant_id;
  std::string ref(ex.param("ws"));
  auto ws = ctx.service.Get(tenant, ref);
  if (!ws) {
    co_await ex.SendError(ws.error());
    co_return;
  }
  ctx.service.NoteActivity(ws->id);
  // Wake on request: a sleeping workspace is started and waited for (no polling: the service
  // says when it runs).
  auto link = co_await ctx.service.Wake(tenant, ws->id, ctx.options.wake_timeout, ActorOf(ex),
                                        fmt::format("a request to its agent ({})", kind));
  if (!link) {
    co_await ex.SendError(link.error());
    co_return;
  }
  // The workspace's env, under each exec's or session's own (the request's variables win).
  agent_client::ExtraHeaders headers;
  if ((kind == "exec" || kind == "session") && !ws->env.empty()) {
    headers.emplace_back(protocol::kDefaultEnvHeader, protocol::EnvHeaderValue(ws->env));
  }
  // Open for as long as the request lasts: a long exec, a PTY, a tunnel, a download.
  auto guard = ctx.service.OpenStream(ws->id, kind);
  // From what the router matched (decoded, re-encoded), never cut from the raw target.
  auto query = http::SplitTarget(ex.target()).second;
  auto target = agent_client::AgentTarget(ex.path(), ex.param("ws"), query);
  if (!target) {
    co_await ex.SendError(target.error());
    co_return;
  }
  AgentCall call = CallOf(ex, kind);
  // Only what the timeline records is traced: not reads, tunnels or process calls.
  const bool traced = kind == "exec" || kind == "session" ||
                      (kind == "files" && call.method != verb::get && call.method != verb::head);
  std::string actor = ActorOf(ex);
  agent_client::ProxyTrace trace;
  agent_client::ProxyTrace* tracing = traced ? &trace : nullptr;
  auto began = std::chrono::steady_clock::now();
  co_await agent_client::ProxyToAgent(ex, *link, std::move(*target), ctx.options.proxy,
                                      &ctx.agent_connections, headers, tracing);
  if (!traced) co_return;
  call.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - began).count();
  auto event = AgentEvent(call, trace);
  if (!event) co_return;
  auto record = [&] {
    return ctx.service.RecordEvent(ws->id, event->type, event->message, event->data, actor);
  };
  auto recorded = co_await ctx.Blocking(record);
  if (!recorded && recorded.error().code != ErrorCode::kNotFound) {
    spdlog::warn("workspace {}: {} event: {}", ws->id, event->type, recorded.error().message);
  }
}

}  // namespace

void AddAgentRoutes(http::Router& router, ApiContext& ctx) {
  struct Route {
    verb method;
    const char* path;
    Scope scope;
    const char* kind;
  };
  // GETs that act (a session, a tunnel) need a write key like any other action. GET …/ports is
  // preview_routes.cc's: it adds each port's preview address to the agent's list.
  const Route routes[] = {
      {verb::post, "exec", Scope::kWrite, "exec"},
      {verb::get, "exec/ws", Scope::kWrite, "session"},
      {verb::get, "processes", Scope::kRead, "processes"},
      {verb::get, "processes/{*rest}", Scope::kRead, "processes"},
      {verb::post, "processes/{*rest}", Scope::kWrite, "processes"},
      {verb::delete_, "processes/{*rest}", Scope::kWrite, "processes"},
      {verb::get, "files/{*rest}", Scope::kRead, "files"},
      {verb::put, "files/{*rest}", Scope::kWrite, "files"},
      {verb::post, "files/{*rest}", Scope::kWrite, "files"},
      {verb::delete_, "files/{*rest}", Scope::kWrite, "files"},
      {verb::get, "tunnel", Scope::kWrite, "tunnel"},
      {verb::get, "activity", Scope::kRead, "activity"},
      {verb::get, "info", Scope::kRead, "info"},
  };
  for (const auto& r : routes) {
    Scope scope = r.scope;
    std::string kind = r.kind;
    router.Add(r.method, fmt::format("/v1/workspaces/{{ws}}/{}", r.path),
               [&ctx, scope, kind](http::Exchange& ex) { return Forward(ctx, ex, scope, kind); });
  }
}

}  // namespace berth::api
