#include "common/v1/events.h"

#include "common/json.h"
#include "common/v1/reader.h"
#include "common/v1/time.h"

namespace berth::v1 {
namespace {

using nlohmann::json;

// An event's data is small structured detail (an exit code, a reason); an answer's whole size
// is bounded by the client, this bounds one event's share of it.
constexpr size_t kMaxEventDataBytes = 64 * 1024;
// A tenant's usage has a row per workspace that ran in the period.
constexpr size_t kMaxUsageRows = 100'000;
constexpr int64_t kMaxSeconds = 1LL << 50;

json OptionalJson(const auto& value) { return value ? json(*value) : json(nullptr); }

Result<UsageRow> UsageRowFromJson(const json& j) {
  UsageRow row;
  Reader r(j, "usage row");
  r.String("workspace", row.workspace)
      .OptString("name", row.name)
      .OptString("size", row.size)
      .Integer("seconds", row.seconds, 0, kMaxSeconds)
      .Integer("vcpu_seconds", row.vcpu_seconds, 0, kMaxSeconds);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return row;
}

}  // namespace

json ToJson(const Event& e) {
  json j = json::object();
  j["id"] = e.id;
  j["at"] = FormatTime(e.at);
  j["type"] = e.type;
  j["message"] = e.message;
  j["data"] = e.data;
  j["workspace"] = e.workspace;
  j["actor"] = e.actor;
  return j;
}

Result<Event> EventFromJson(const json& j) {
  Event e;
  Reader r(j, "event");
  r.Integer("id", e.id, 0)
      .String("workspace", e.workspace)
      .Time("at", e.at)
      .String("type", e.type)
      .String("message", e.message, kMaxTextBytes)
      .Object("data", e.data);
  // Absent from berthd before the timeline had actors.
  std::optional<std::string> actor;
  r.OptString("actor", actor);
  if (actor) e.actor = std::move(*actor);
  if (r.ok() && DumpJson(e.data).size() > kMaxEventDataBytes) {
    r.Problem(fmt::format("'data' is larger than {} bytes", kMaxEventDataBytes));
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  return e;
}

json EventListJson(const std::vector<Event>& events) {
  json list = json::array();
  for (const auto& e : events) list.push_back(ToJson(e));
  json j = json::object();
  j["events"] = std::move(list);
  return j;
}

Result<std::vector<Event>> EventListFromJson(const json& j) {
  std::vector<Event> events;
  if (auto read = ReadList(j, "events", "event list", kMaxEventPage, EventFromJson, events);
      !read) {
    return Fail(read.error());
  }
  return events;
}

Result<std::optional<Event>> FollowLineFromJson(const json& j) {
  if (j.is_object() && j.size() == 1 && j.contains("type") && j["type"] == "keepalive") {
    return std::optional<Event>();
  }
  auto event = EventFromJson(j);
  if (!event) return Fail(event.error());
  return std::optional<Event>(std::move(*event));
}

json ToJson(const Usage& u) {
  json rows = json::array();
  for (const auto& row : u.workspaces) {
    json item = json::object();
    item["workspace"] = row.workspace;
    item["name"] = OptionalJson(row.name);
    item["size"] = OptionalJson(row.size);
    item["seconds"] = row.seconds;
    item["vcpu_seconds"] = row.vcpu_seconds;
    rows.push_back(std::move(item));
  }
  json total = json::object();
  total["seconds"] = u.total_seconds;
  total["vcpu_seconds"] = u.total_vcpu_seconds;
  json j = json::object();
  j["from"] = FormatTime(u.from);
  j["to"] = FormatTime(u.to);
  j["workspaces"] = std::move(rows);
  j["total"] = std::move(total);
  return j;
}

Result<Usage> UsageFromJson(const json& j) {
  Usage u;
  Reader r(j, "usage");
  r.Time("from", u.from).Time("to", u.to);
  if (const json* total = r.Find("total"); r.ok()) {
    if (!total) {
      r.Problem("'total' is missing");
    } else {
      Reader t(*total, "usage total");
      t.Integer("seconds", u.total_seconds, 0, kMaxSeconds)
          .Integer("vcpu_seconds", u.total_vcpu_seconds, 0, kMaxSeconds);
      if (auto done = t.Done(); !done) r.Problem(done.error().message);
    }
  }
  if (auto done = r.Done(); !done) return Fail(done.error());
  if (auto rows = ReadList(j, "workspaces", "usage", kMaxUsageRows, UsageRowFromJson,
                           u.workspaces);
      !rows) {
    return Fail(rows.error());
  }
  return u;
}

}  // namespace berth::v1
