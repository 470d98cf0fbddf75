// A workspace's events (`berth events`, also `berth logs`), live with --follow, and usage.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/v1/time.h"
#include "common/json.h"

namespace berth::cli {
namespace {

constexpr std::chrono::seconds kCallTimeout{120};

struct EventOptions {
  std::string workspace;
  bool follow = false;
  std::optional<int64_t> after;
  std::optional<int> limit;
  client::BerthClient::EventSelect select;
};

std::string EventLine(const v1::Event& event) {
  std::string line =
      fmt::format("{:<20}  {:<18}  {}", v1::FormatTime(event.at), event.type, event.message);
  if (event.actor != "system") line += fmt::format("  [{}]", event.actor);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

Result<int> Events(Context& ctx, const EventOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  int64_t after = o.after.value_or(0);
  if (!o.follow) {
    // berthd's default page, as before a --limit is given.
    auto events = berth->ListEvents(o.workspace, after, o.limit.value_or(100),
                                    DeadlineIn(kCallTimeout), o.select);
    if (!events) return Fail(events.error());
    if (ctx.json()) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : *events) out.push_back(v1::ToJson(e));
      ctx.PrintJson(out);
      return kExitOk;
    }
    for (const auto& event : *events) ctx.out() << EventLine(event);
    return kExitOk;
  }
  // Runs until berthd ends the stream or the user interrupts.
  auto status = berth->FollowEvents(
      o.workspace, after,
      [&](const v1::Event& event) -> Status {
        if (ctx.json()) {
          ctx.out() << DumpJson(v1::ToJson(event)) << "\n";
        } else {
          ctx.out() << EventLine(event);
        }
        ctx.out().flush();
        if (!ctx.out()) return Fail(ErrorCode::kUnavailable, "stdout is closed");
        return {};
      },
      kNoDeadline, o.select);
  if (!status) return Fail(status.error());
  return kExitOk;
}

struct UsageOptions {
  std::string from;
  std::string to;
};

Result<int> Usage(Context& ctx, const UsageOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto usage = berth->GetUsage(o.from, o.to, DeadlineIn(kCallTimeout));
  if (!usage) return Fail(usage.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*usage));
    return kExitOk;
  }
  auto hours = [](int64_t seconds) {
    return fmt::format("{:.2f}", static_cast<double>(seconds) / 3600);
  };
  ctx.out() << fmt::format("From {} to {}\n\n", v1::FormatTime(usage->from),
                           v1::FormatTime(usage->to));
  Table table({"NAME", "WORKSPACE", "SIZE", "RUNNING", "VCPU-HOURS"});
  for (const auto& row : usage->workspaces) {
    table.AddRow({row.name.value_or("-"), row.workspace.empty() ? "-" : row.workspace,
                  row.size.value_or("-"), FormatDuration(std::chrono::seconds(row.seconds)),
                  hours(row.vcpu_seconds)});
  }
  table.AddRow({"TOTAL", "", "", FormatDuration(std::chrono::seconds(usage->total_seconds)),
                hours(usage->total_vcpu_seconds)});
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
  events->add_option("--type", e->select.types,
                     "only these types, comma-separated; a family ends in * (exec,desktop_*)");
  events->add_option("--actor", e->select.actors,
                     "only by these, comma-separated: a key id (key_…), key for every key, system, preview");
  events->add_option("--since", e->select.since,
                     "only events at or after this time (ISO 8601 UTC or unix seconds)");
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
