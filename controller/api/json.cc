#include "controller/api/json.h"

#include <ctime>

#include <fmt/format.h>

#include "common/protocol/ports.h"
#include "controller/workspace/request.h"

namespace berth::api {

std::string IsoTime(int64_t unix_seconds) {
  return protocol::Iso8601(std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)));
}

nlohmann::json IsoOrNull(const std::optional<int64_t>& unix_seconds) {
  return unix_seconds ? nlohmann::json(IsoTime(*unix_seconds)) : nlohmann::json(nullptr);
}

Result<int64_t> ParseTime(std::string_view text) {
  // 1970 to 2200: a time point in nanoseconds (system_clock's, which IsoTime goes through)
  // overflows past 2262, and strptime takes years such as 0206 (the fuzzer found both).
  constexpr int64_t kLatest = 7'258'118'400;  // 2200-01-01T00:00:00Z
  auto in_range = [&](int64_t t) -> Result<int64_t> {
    if (t < 0 || t > kLatest) {
      return Fail(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' is outside 1970-01-01 to 2200-01-01", text));
    }
    return t;
  };
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos &&
      text.size() <= 12) {
    return in_range(std::stoll(std::string(text)));
  }
  std::tm tm{};
  std::string s(text);
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || (*end != 'Z' && *end != '\0') || (*end == 'Z' && end[1] != '\0')) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'{}' is not a time (ISO 8601 UTC like 2026-01-31T12:00:00Z, or unix seconds)", text));
  }
  return in_range(static_cast<int64_t>(timegm(&tm)));
}

nlohmann::json WorkspaceJson(const workspace::Workspace& ws,
                             const std::optional<workspace::AwakeInfo>& awake) {
  nlohmann::json j = {
      {"id", ws.id},
      {"name", ws.name},
      {"tenant", ws.tenant_id},
      {"image", ws.image},
      {"image_version", ws.image_version},
      {"size", ws.size ? nlohmann::json(*ws.size) : nlohmann::json(nullptr)},
      {"cpus", ws.vcpus},
      {"memory_mib", ws.memory_mib},
      {"disk_gib", ws.disk_gib},
      {"idle_timeout", ws.idle_timeout_s},
      {"idle_action", workspace::IdleActionName(ws.idle_action)},
      {"max_runtime", ws.max_runtime_s ? nlohmann::json(*ws.max_runtime_s) : nlohmann::json(nullptr)},
      {"auto_start", ws.auto_start},
      {"env", ws.env},
      {"labels", ws.labels},
      {"state", workspace::StateName(ws.state)},
      {"error", ws.error ? nlohmann::json(*ws.error) : nlohmann::json(nullptr)},
      {"transport", ws.transport},
      {"created_at", IsoTime(ws.created_at)},
      {"updated_at", IsoTime(ws.updated_at)},
      {"started_at", IsoOrNull(ws.started_at)},
      {"last_active_at", IsoOrNull(ws.last_active_at)},
  };
  if (awake && ws.state == workspace::State::kRunning) {
    j["awake"] = {{"reasons", awake->reasons}, {"idle_at", IsoOrNull(awake->idle_at)}};
  }
  return j;
}

nlohmann::json TenantJson(const store::Tenant& t) {
  return {{"id", t.id}, {"name", t.name}, {"created_at", IsoTime(t.created_at)}};
}

nlohmann::json KeyJson(const store::ApiKey& k) {
  return {{"id", k.id},
          {"tenant", k.tenant_id},
          {"prefix", k.prefix},
          {"scope", k.scope},
          {"name", k.name},
          {"created_at", IsoTime(k.created_at)},
          {"last_used_at", IsoOrNull(k.last_used_at)},
          {"revoked_at", IsoOrNull(k.revoked_at)}};
}

nlohmann::json EventJson(const store::Event& e) {
  return {{"id", e.id}, {"at", IsoTime(e.at)}, {"type", e.type}, {"message", e.message},
          {"data", e.data}, {"workspace", e.workspace_id}};
}

}  // namespace berth::api
