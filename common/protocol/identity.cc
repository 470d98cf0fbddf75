#include "common/protocol/identity.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json.h"

namespace berth::protocol {
namespace {

using nlohmann::json;

Status Invalid(std::string_view field, std::string_view why) {
  return Fail(ErrorCode::kInvalidArgument, fmt::format("'{}' {}", field, why));
}

Status CheckToken(const std::string& token) {
  if (token.size() < 16 || token.size() > 512) return Invalid("token", "must be 16 to 512 bytes");
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
    return Invalid("token", "must be printable ASCII without spaces");
  }
  return {};
}

Status CheckHostname(const std::string& name) {
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  if (name.empty() || name.size() > 63 || !std::all_of(name.begin(), name.end(), ok) || name.front() == '-' ||
      name.back() == '-') {
    return Invalid("hostname", "must be 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'");
  }
  return {};
}

Status CheckMachineId(const std::string& id) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (id.size() != 32 || !std::all_of(id.begin(), id.end(), hex) || id == std::string(32, '0')) {
    return Invalid("machine_id", "must be 32 lowercase hex digits, not all zero");
  }
  return {};
}

Status CheckMac(const std::string& mac) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  bool shaped = mac.size() == 17;
  for (size_t i = 0; shaped && i < mac.size(); ++i) shaped = (i % 3 == 2) ? mac[i] == ':' : hex(mac[i]);
  if (!shaped) return Invalid("mac", "must be six lowercase hex pairs separated by ':'");
  int first = std::stoi(mac.substr(0, 2), nullptr, 16);
  if (first & 1) return Invalid("mac", "must be a unicast address (the first byte even)");
  return {};
}

}  // namespace

json ToJson(const IdentityRequest& r) {
  json out = {{"token", r.token}};
  if (!r.hostname.empty()) out["hostname"] = r.hostname;
  if (!r.machine_id.empty()) out["machine_id"] = r.machine_id;
  if (!r.mac.empty()) out["mac"] = r.mac;
  if (r.regenerate_ssh_host_keys) out["regenerate_ssh_host_keys"] = true;
  if (!r.entropy.empty()) out["entropy"] = r.entropy;
  return out;
}

Result<IdentityRequest> IdentityRequestFromJson(const json& j) {
  if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "token" && key != "hostname" && key != "machine_id" && key != "mac" &&
        key != "regenerate_ssh_host_keys" && key != "entropy") {
      return Fail(ErrorCode::kInvalidArgument, fmt::format("unknown field '{}'", key));
    }
  }
  IdentityRequest out;
  auto token = OptionalString(j, "token");
  auto hostname = OptionalString(j, "hostname");
  auto machine_id = OptionalString(j, "machine_id");
  auto mac = OptionalString(j, "mac");
  auto ssh = OptionalBool(j, "regenerate_ssh_host_keys");
  auto entropy = OptionalString(j, "entropy");
  for (const auto* r : {&token, &hostname, &machine_id, &mac, &entropy}) {
    if (!*r) return Fail(r->error());
  }
  if (!ssh) return Fail(ssh.error());
  if (!token->has_value()) return Fail(Invalid("token", "is required").error());
  out.token = **token;
  if (auto ok = CheckToken(out.token); !ok) return Fail(ok.error());
  out.hostname = hostname->value_or("");
  if (hostname->has_value()) {
    if (auto ok = CheckHostname(out.hostname); !ok) return Fail(ok.error());
  }
  out.machine_id = machine_id->value_or("");
  if (machine_id->has_value()) {
    if (auto ok = CheckMachineId(out.machine_id); !ok) return Fail(ok.error());
  }
  out.mac = mac->value_or("");
  if (mac->has_value()) {
    if (auto ok = CheckMac(out.mac); !ok) return Fail(ok.error());
  }
  out.regenerate_ssh_host_keys = ssh->value_or(false);
  out.entropy = entropy->value_or("");
  if (entropy->has_value()) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
    if (out.entropy.size() != 64 || !std::all_of(out.entropy.begin(), out.entropy.end(), hex)) {
      return Fail(Invalid("entropy", "must be 64 lowercase hex digits").error());
    }
  }
  return out;
}

json ToJson(const IdentityApplied& a) { return {{"applied", a.applied}}; }

Result<IdentityApplied> IdentityAppliedFromJson(const json& j) {
  if (!j.is_object() || !j.contains("applied") || !j["applied"].is_array()) {
    return Fail(ErrorCode::kInvalidArgument, "identity answer without 'applied'");
  }
  IdentityApplied out;
  for (const auto& item : j["applied"]) {
    if (!item.is_string()) return Fail(ErrorCode::kInvalidArgument, "identity answer: 'applied' holds a non-string");
    out.applied.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace berth::protocol
