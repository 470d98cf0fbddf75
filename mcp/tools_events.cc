// workspace_events: read a workspace's timeline (GET /v1/workspaces/{ws}/events): what happened,
// who did it, since a time or after an event, filtered by type and actor. What an agent reads
// to learn what a person changed while it waited, or what happened since it last looked.
#include <fmt/format.h>

#include "common/v1/time.h"
#include "mcp/tool.h"

namespace berth::mcp {
namespace {

using nlohmann::json;

constexpr int kDefaultEvents = 50;
constexpr int kMaxEvents = 200;

std::string Arg(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<ToolResult> Events(ToolContext& ctx, const json& args) {
  auto ws = ctx.Workspace(args);
  if (!ws) return Fail(ws.error());
  client::BerthClient::EventSelect select;
  select.types = Arg(args, "type");
  select.actors = Arg(args, "actor");
  select.since = Arg(args, "since");
  int64_t after = args.contains("after") && args["after"].is_number_integer() ? args["after"].get<int64_t>() : 0;
  int limit = args.contains("limit") && args["limit"].is_number_integer() ? args["limit"].get<int>() : kDefaultEvents;
  limit = std::clamp(limit, 1, kMaxEvents);
  // One more than asked: whether there are more to read.
  auto events = ctx.backend().ListEvents(*ws, after, limit + 1, select, ToolContext::CallDeadline());
  if (!events) return Fail(events.error());
  bool more = static_cast<int>(events->size()) > limit;
  if (more) events->resize(static_cast<size_t>(limit));
  std::string text;
  if (events->empty()) {
    text = fmt::format("No events{} in workspace {}.", after > 0 ? fmt::format(" after {}", after) : "", *ws);
  } else {
    text = fmt::format("{} event{} of workspace {}, oldest first:\n", events->size(),
                       events->size() == 1 ? "" : "s", *ws);
    for (const auto& e : *events) {
      // The message is berthd's words, but parts of it (a command, a path, a note) come from
      // the workspace: it is data to read, not instructions.
      text += fmt::format("- #{} {} {}: {} (by {})\n", e.id, v1::FormatTime(e.at), e.type, e.message, e.actor);
    }
    text += more ? fmt::format("More follow: call again with after={}.", events->back().id)
                 : fmt::format("That is all for now; next time ask with after={}.", events->back().id);
  }
  json items = json::array();
  for (const auto& e : *events) items.push_back(v1::ToJson(e));
  json structured = json::object();
  structured["events"] = std::move(items);
  structured["more"] = more;
  structured["next_after"] = events->empty() ? after : events->back().id;
  return ToolResult::Text(std::move(text), std::move(structured));
}

}  // namespace

std::vector<Tool> EventTools() {
  std::vector<Tool> tools;
  json args = json::object();
  args["workspace"] = schema::WorkspaceArg();
  args["type"] = schema::String(
      "Only these event types, comma-separated; a family ends in * (e.g. \"exec,desktop_*\", "
      "\"file_*\", \"desktop_control_released\").");
  args["actor"] = schema::String(
      "Only events by these, comma-separated: an API key's id (key_...), \"key\" for any key, "
      "\"system\" (berthd itself), \"guest\", \"preview\".");
  args["since"] = schema::String("Only events at or after this time (ISO 8601 UTC, e.g. 2026-12-02T10:00:00Z).");
  args["after"] = schema::Integer("Only events after this event id (the next_after of an earlier call).", 0,
                                  INT64_MAX);
  args["limit"] = schema::Integer("At most this many (default 50).", 1, kMaxEvents);
  tools.push_back(Tool{
      "workspace_events", "Read a workspace's timeline",
      "Read what happened in a workspace, oldest first: lifecycle changes (started, stopped by "
      "idle, woken), each command run through the API with its exit code and duration, file "
      "changes, previews opened, desktop takeovers and hand-backs (with the person's note), "
      "refused network connections; each with who did it. Use after= with the last call's "
      "next_after to see only what is new, e.g. what a person did while you waited.",
      schema::Object(args), ReadOnly(), Events});
  return tools;
}

}  // namespace berth::mcp
