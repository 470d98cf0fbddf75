#include "cli/workspace_api.h"

#include <fmt/format.h>

#include "common/http/url.h"

namespace berth::cli {
namespace {

using boost::beast::http::verb;

std::string State(const nlohmann::json& ws) {
  return ws.is_object() && ws.contains("state") && ws["state"].is_string()
             ? ws["state"].get<std::string>()
             : std::string();
}

}  // namespace

Result<nlohmann::json> GetWorkspace(Context& ctx, std::string_view ws) {
  auto client = ctx.Client();
  if (!client) return Fail(client.error());
  return client->Json(verb::get, ctx.WorkspaceRoute(ws));
}

Result<std::vector<nlohmann::json>> ListWorkspaces(Context& ctx, const ListFilter& filter) {
  auto client = ctx.Client();
  if (!client) return Fail(client.error());
  std::vector<nlohmann::json> out;
  std::string after;
  // Bounded: a server that kept answering `next` would otherwise loop forever.
  for (int page = 0; page < 10'000; ++page) {
    std::string query = "?limit=100";
    if (!filter.state.empty()) query += "&state=" + http::PercentEncode(filter.state, false);
    for (const auto& label : filter.labels) query += "&label=" + http::PercentEncode(label, false);
    if (!after.empty()) query += "&after=" + http::PercentEncode(after, false);
    auto json = client->Json(verb::get, ctx.Route("/v1/workspaces" + query));
    if (!json) return Fail(json.error());
    if (!json->contains("workspaces") || !(*json)["workspaces"].is_array()) {
      return Fail(ErrorCode::kInternal, "berthd answered a list without workspaces");
    }
    for (auto& ws : (*json)["workspaces"]) out.push_back(std::move(ws));
    auto next = json->find("next");
    if (next == json->end() || !next->is_string() || next->get<std::string>().empty()) break;
    after = next->get<std::string>();
  }
  return out;
}

Result<nlohmann::json> WaitForState(Context& ctx, std::string_view ws, std::string_view state,
                                    int64_t timeout_s) {
  client::ClientOptions options;
  // The answer comes when the state is reached: give the server its whole timeout and more.
  options.io_timeout = std::chrono::seconds(timeout_s + 30);
  nlohmann::json body = {{"state", std::string(state)}, {"timeout_s", timeout_s}};
  auto client = ctx.Client(options);
  if (!client) return Fail(client.error());
  auto result = client->Json(verb::post, ctx.WorkspaceRoute(ws, "/wait"), body);
  if (!result && result.error().code == ErrorCode::kDeadlineExceeded) {
    return Fail(ErrorCode::kDeadlineExceeded,
                fmt::format("{} did not become {} within {}s: {}", ws, state, timeout_s,
                            result.error().message));
  }
  return result;
}

Result<nlohmann::json> EnsureRunning(Context& ctx, std::string_view ws) {
  auto got = GetWorkspace(ctx, ws);
  if (!got) return Fail(got.error());
  std::string state = State(*got);
  if (state == "running") return got;
  std::string name = got->value("name", std::string(ws));
  // Let a transition finish before starting again.
  if (state == "stopping" || state == "hibernating") {
    ctx.Note(fmt::format("waiting for {} to finish {}…", name, state));
    auto settled = WaitForState(ctx, ws, state == "stopping" ? "stopped" : "hibernated",
                                kDefaultWaitSeconds);
    if (!settled) return Fail(settled.error());
    state = State(*settled);
  }
  if (state == "stopped" || state == "hibernated") {
    if (!got->value("auto_start", true)) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} is {} and its auto_start is off: run `berth start {}` first",
                              name, state, ws));
    }
    ctx.Note(fmt::format("starting {} ({})…", name, state));
    auto started = ctx.Call(verb::post, ctx.WorkspaceRoute(ws, "/start"));
    if (!started) return Fail(started.error());
    state = State(*started);
  } else if (state == "creating" || state == "starting") {
    ctx.Note(fmt::format("waiting for {} to finish {}…", name, state));
  } else if (state != "running") {
    return Fail(ErrorCode::kFailedPrecondition,
                fmt::format("{} is {}{}", name, state,
                            got->contains("error") && (*got)["error"].is_string()
                                ? ": " + (*got)["error"].get<std::string>()
                                : std::string()));
  }
  if (state == "running") return got;
  return WaitForState(ctx, ws, "running", kDefaultWaitSeconds);
}

std::string StateLine(const nlohmann::json& ws) {
  return fmt::format("{} ({}): {}", ws.value("name", "?"), ws.value("id", "?"), State(ws));
}

}  // namespace berth::cli
