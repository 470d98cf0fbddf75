#include "common/protocol/ports.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace berth::protocol {
namespace {

using nlohmann::json;

json OptionalJson(const auto& value) { return value ? json(*value) : json(nullptr); }

Result<std::optional<std::string>> OptionalString(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a string", key));
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::chrono::seconds> Duration(const json& object) {
  auto it = object.find("duration_s");
  if (it == object.end()) return Fail(ErrorCode::kInvalidArgument, "'duration_s' is required");
  if (!it->is_number_integer()) {
    return Fail(ErrorCode::kInvalidArgument, "'duration_s' must be an integer number of seconds");
  }
  // Compared in the number's own signedness: a huge unsigned value must not wrap to a small one.
  bool in_range = it->is_number_unsigned()
                      ? it->get<uint64_t>() >= static_cast<uint64_t>(kMinLease.count()) &&
                            it->get<uint64_t>() <= static_cast<uint64_t>(kMaxLease.count())
                      : it->get<int64_t>() >= kMinLease.count() &&
                            it->get<int64_t>() <= kMaxLease.count();
  if (!in_range) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'duration_s' must be between {} and {} seconds", kMinLease.count(),
                            kMaxLease.count()));
  }
  return std::chrono::seconds(it->get<int64_t>());
}

}  // namespace

std::string Iso8601(std::chrono::system_clock::time_point t) {
  return fmt::format("{:%FT%TZ}", std::chrono::floor<std::chrono::seconds>(t));
}

json ToJson(const PortInfo& port) {
  json j = {{"port", port.port},
            {"address", port.address},
            {"family", port.family},
            {"pid", OptionalJson(port.pid)},
            {"process", OptionalJson(port.process)},
            {"cmdline", OptionalJson(port.cmdline)},
            {"user", OptionalJson(port.user)}};
  if (port.preview_url) j["preview_url"] = *port.preview_url;  // berthd's, not the agent's
  return j;
}

Result<PortInfo> PortInfoFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "port entry is not an object");
  PortInfo out;
  auto port = j.find("port");
  if (port == j.end() || !port->is_number_unsigned() || port->get<uint64_t>() > 65535) {
    return Fail(ErrorCode::kInvalidArgument, "port entry without a valid 'port'");
  }
  out.port = static_cast<uint16_t>(port->get<uint64_t>());
  auto address = OptionalString(j, "address");
  auto family = OptionalString(j, "family");
  auto process = OptionalString(j, "process");
  auto cmdline = OptionalString(j, "cmdline");
  auto user = OptionalString(j, "user");
  auto preview_url = OptionalString(j, "preview_url");
  for (const auto* r : {&address, &family, &process, &cmdline, &user, &preview_url}) {
    if (!*r) return Fail(r->error());
  }
  out.address = address->value_or("");
  out.family = family->value_or("");
  out.process = *process;
  out.cmdline = *cmdline;
  out.user = *user;
  out.preview_url = *preview_url;
  auto pid = j.find("pid");
  if (pid != j.end() && !pid->is_null()) {
    if (!pid->is_number_integer()) return Fail(ErrorCode::kInvalidArgument, "'pid' is not a number");
    out.pid = pid->get<int>();
  }
  return out;
}

Result<std::vector<PortInfo>> PortListFromJson(const json& j) {
  if (!j.is_object() || !j.contains("ports") || !j["ports"].is_array()) {
    return Fail(ErrorCode::kInvalidArgument, "answer has no 'ports' list");
  }
  std::vector<PortInfo> out;
  for (const auto& entry : j["ports"]) {
    auto port = PortInfoFromJson(entry);
    if (!port) return Fail(port.error());
    out.push_back(std::move(*port));
  }
  return out;
}

Result<uint16_t> ParseTunnelPort(long long port) {
  if (port < 1 || port > 65535) {
    return Fail(ErrorCode::kInvalidArgument, "port must be between 1 and 65535");
  }
  return static_cast<uint16_t>(port);
}

bool HasToken(std::string_view list, std::string_view token) {
  constexpr std::string_view kSpace = " \t";
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    size_t first = item.find_first_not_of(kSpace);
    if (first == std::string_view::npos) continue;
    item = item.substr(first, item.find_last_not_of(kSpace) - first + 1);
    if (item.size() == token.size() &&
        std::equal(item.begin(), item.end(), token.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return true;
    }
  }
  return false;
}

Result<LeaseRequest> LeaseRequestFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "body must be a JSON object");
  LeaseRequest out;
  auto reason = OptionalString(j, "reason");
  if (!reason) return Fail(reason.error());
  out.reason = reason->value_or("");
  if (out.reason.size() > kMaxLeaseReason) {
    return Fail(ErrorCode::kInvalidArgument,
                fmt::format("'reason' is longer than {} bytes", kMaxLeaseReason));
  }
  auto duration = Duration(j);
  if (!duration) return Fail(duration.error());
  out.duration = *duration;
  return out;
}

json ToJson(const LeaseRequest& request) {
  return {{"reason", request.reason}, {"duration_s", request.duration.count()}};
}

Result<std::chrono::seconds> LeaseDurationFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "body must be a JSON object");
  return Duration(j);
}

json ToJson(const Lease& lease) {
  return {{"id", lease.id}, {"reason", lease.reason}, {"until", lease.until}};
}

Result<Lease> LeaseFromJson(const json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned() ||
      !j.contains("until") || !j["until"].is_string()) {
    return Fail(ErrorCode::kInvalidArgument, "lease answer without 'id' and 'until'");
  }
  Lease out;
  out.id = j["id"].get<uint64_t>();
  out.until = j["until"].get<std::string>();
  if (j.contains("reason") && j["reason"].is_string()) out.reason = j["reason"].get<std::string>();
  return out;
}

Result<uint64_t> ParseLeaseId(std::string_view text) {
  uint64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || id == 0) {
    return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' is not a lease id", text));
  }
  return id;
}

}  // namespace berth::protocol
