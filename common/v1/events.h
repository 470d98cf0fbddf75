// Wire types of a workspace's timeline and of usage (docs/api.md): events as GET …/events lists
// them and as ?follow=1 streams them (NDJSON, with keepalive lines), and GET /v1/usage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

struct Event {
  Event() = default;
  int64_t id = 0;  // increasing within berthd; the cursor of ?after=
  std::string workspace;
  int64_t at = 0;  // unix seconds
  std::string type;  // created, started, stopped_by_idle, woken, error, ... (docs/api.md)
  std::string message;
  nlohmann::json data = nlohmann::json::object();
  // Who caused it: "system" (berthd), an API key's id ("key_…"), "preview" (docs/api.md).
  std::string actor = "system";
};
nlohmann::json ToJson(const Event& event);
Result<Event> EventFromJson(const nlohmann::json& json);

// GET …/events answers at most this many (?limit= 1..1000).
inline constexpr int kMaxEventPage = 1000;
// {"events": [...]}
nlohmann::json EventListJson(const std::vector<Event>& events);
Result<std::vector<Event>> EventListFromJson(const nlohmann::json& json);

// The line a follow stream sends when nothing happened for a while.
inline constexpr std::string_view kKeepaliveLine = "{\"type\":\"keepalive\"}";
// One line of a follow stream: an event, or nullopt for a keepalive.
Result<std::optional<Event>> FollowLineFromJson(const nlohmann::json& json);

struct UsageRow {
  UsageRow() = default;
  std::string workspace;            // its id
  std::optional<std::string> name;  // null once deleted
  std::optional<std::string> size;
  int64_t seconds = 0;
  int64_t vcpu_seconds = 0;
};

struct Usage {
  Usage() = default;
  int64_t from = 0;  // unix seconds
  int64_t to = 0;
  std::vector<UsageRow> workspaces;
  int64_t total_seconds = 0;
  int64_t total_vcpu_seconds = 0;
};
nlohmann::json ToJson(const Usage& usage);
Result<Usage> UsageFromJson(const nlohmann::json& json);

}  // namespace berth::v1
