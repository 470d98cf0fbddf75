// A workspace's events (`berth events`, also `berth logs`), live with --follow, and usage.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/http/url.h"
#include "common/json.h"

namespace berth::cli {
namespace {

using boost::beast::http::verb;

struct EventOptions {
  std::string workspace;
  bool follow = false;
  std::optional<int64_t> after;
  std::optional<int> limit;
};

std::string EventLine(const nlohmann::json& event) {
  std::string message = Cell(event, "message");
  std::string line = fmt::format("{:<20}  {:<18}  {}", Cell(event, "at"), Cell(event, "type"),
                                 message == "-" ? "" : message);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

Result<int> Events(Context& ctx, const EventOptions& o) {
  std::string query = o.follow ? "?follow=1" : "?";
  auto add = [&](std::string_view key, int64_t value) {
    if (query.size() > 1) query += "&";
    query += fmt::format("{}={}", key, value);
  };
  if (o.after) add("after", *o.after);
  if (o.limit) add("limit", *o.limit);
  if (query == "?") query.clear();
  std::string route = ctx.WorkspaceRoute(o.workspace, "/events" + query);
  if (!o.follow) {
    auto json = ctx.Call(verb::get, route);
    if (!json) return Fail(json.error());
    nlohmann::json events = json->value("events", nlohmann::json::array());
    if (ctx.json()) {
      ctx.PrintJson(events);
      return kExitOk;
    }
    for (const auto& event : events) ctx.out() << EventLine(event);
    return kExitOk;
  }
  auto client = ctx.Client();
  if (!client) return Fail(client.error());
  client::NdjsonSplitter splitter([&](const nlohmann::json& event) -> Status {
    if (!event.is_object() || (event.contains("type") && event["type"] == "keepalive")) return {};
    if (ctx.json()) {
      ctx.out() << DumpJson(event) << "\n";
    } else {
      ctx.out() << EventLine(event);
    }
    ctx.out().flush();
    if (!ctx.out()) return Fail(ErrorCode::kUnavailable, "stdout is closed");
    return {};
  });
  // Runs until berthd ends the stream or the user interrupts.
  auto status = client->Stream(verb::get, route, {{"Accept", "application/x-ndjson"}}, nullptr, 0,
                               [&](std::string_view data) { return splitter.Feed(data); });
  if (!status) return Fail(status.error());
  if (auto last = splitter.Finish(); !last) return Fail(last.error());
  return kExitOk;
}

struct UsageOptions {
  std::string from;
  std::string to;
};

Result<int> Usage(Context& ctx, const UsageOptions& o) {
  std::string query;
  if (!o.from.empty()) query += "from=" + http::PercentEncode(o.from, false);
  if (!o.to.empty()) {
    query += (query.empty() ? "" : "&") + ("to=" + http::PercentEncode(o.to, false));
  }
  auto json = ctx.Call(verb::get, ctx.Route("/v1/usage" + (query.empty() ? "" : "?" + query)));
  if (!json) return Fail(json.error());
  if (ctx.json()) {
    ctx.PrintJson(*json);
    return kExitOk;
  }
  auto seconds = [](const nlohmann::json& row, const char* key) -> int64_t {
    auto it = row.find(key);
    return it != row.end() && it->is_number() ? it->get<int64_t>() : 0;
  };
  ctx.out() << fmt::format("From {} to {}\n\n", Cell(*json, "from"), Cell(*json, "to"));
  Table table({"NAME", "WORKSPACE", "SIZE", "RUNNING", "VCPU-HOURS"});
  for (const auto& row : json->value("workspaces", nlohmann::json::array())) {
    table.AddRow({Cell(row, "name"), Cell(row, "workspace"), Cell(row, "size"),
                  FormatDuration(seconds(row, "seconds")),
                  fmt::format("{:.2f}", static_cast<double>(seconds(row, "vcpu_seconds")) / 3600)});
  }
  nlohmann::json total = json->value("total", nlohmann::json::object());
  table.AddRow({"TOTAL", "", "", FormatDuration(seconds(total, "seconds")),
                fmt::format("{:.2f}", static_cast<double>(seconds(total, "vcpu_seconds")) / 3600)});
  ctx.out() << table.Render();
  return kExitOk;
}

}  // namespace

void AddEventCommands(Builder& b) {
  auto e = std::make_shared<EventOptions>();
  auto* events = b.Add("events", "a workspace's events: created, started, stopped_by_idle…",
                       [e](Context& ctx) { return Events(ctx, *e); });
  events->alias("logs");
  events->add_option("workspace", e->workspace, "workspace id or name")->required();
  events->add_flag("-f,--follow", e->follow, "keep printing new events as they happen");
  events->add_option("--after", e->after, "only events after this event id");
  events->add_option("--limit", e->limit, "at most this many events");
  b.AddJsonFlag(events);
  events->footer("With --follow --json, one JSON object per line (NDJSON).");

  auto u = std::make_shared<UsageOptions>();
  auto* usage = b.Add("usage", "running time per workspace (default: the last 30 days)",
                      [u](Context& ctx) { return Usage(ctx, *u); });
  usage->add_option("--from", u->from, "start: ISO 8601 time or unix seconds");
  usage->add_option("--to", u->to, "end: ISO 8601 time or unix seconds");
  b.AddJsonFlag(usage);
}

}  // namespace berth::cli
