// Wire types of berthd's identity and administration routes (docs/api.md): health, the
// caller's identity, tenants and API keys.
//
//   GET  /v1/health              -> Health (no key needed)
//   GET  /v1/me                  -> Me
//   POST /v1/tenants {name}      -> 201 Tenant;   GET /v1/tenants -> {tenants: [Tenant]}
//   POST /v1/keys CreateKey      -> 201 NewKey;   GET /v1/keys[?tenant=ID] -> {keys: [ApiKey]}
//   DELETE /v1/keys/{id}         -> 204
//   GET|PATCH /v1/tenants/{id} [{limits: TenantLimitsPatch}] -> TenantDetail
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::v1 {

// What a key may do: read (GET only) < write (the tenant's workspaces) < admin (also its own
// tenant's keys) < operator (tenants, and the keys of every tenant).
enum class Scope { kRead, kWrite, kAdmin, kOperator };
std::string_view ScopeName(Scope scope);
std::optional<Scope> ScopeFromName(std::string_view name);

struct Health {
  Health() = default;
  std::string status;  // "ok"
  std::string version;
  std::optional<std::string> accel;      // "kvm" | "tcg": what runs the guests
  std::optional<std::string> transport;  // "vsock" | "forward" | "unix"
  // Guest network isolation: "isolated", "off" (the operator turned it off, or no guests),
  // "failed" (the nftables table could not be installed: no guest boots; the log says why).
  std::optional<std::string> network;
};
nlohmann::json ToJson(const Health& health);
Result<Health> HealthFromJson(const nlohmann::json& json);

// A tenant's limits, or what it uses, in the same units (docs/api.md, "Quotas"): workspaces
// in any state; vCPUs and memory of those that hold the host's (running, or on the way up or
// down); the sum of their data disks.
struct TenantQuota {
  TenantQuota() = default;
  int64_t workspaces = 0;
  int64_t vcpus = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;
};
// {"workspaces", "vcpus", "memory_mib", "disk_gib"}
nlohmann::json ToJson(const TenantQuota& quota);
Result<TenantQuota> TenantQuotaFromJson(const nlohmann::json& json, std::string_view what);

// Which tenant and key a call runs as.
struct Me {
  Me() = default;
  std::string tenant_id;
  std::string tenant_name;
  std::string key_id;
  std::string key_prefix;
  Scope scope = Scope::kRead;
  // The tenant's limits and use (absent from a berthd before quotas).
  std::optional<TenantQuota> limits;
  std::optional<TenantQuota> usage;
};
// {"tenant": {"id", "name"}, "key": {"id", "prefix", "scope"}, "limits", "usage"}
nlohmann::json ToJson(const Me& me);
Result<Me> MeFromJson(const nlohmann::json& json);

struct Tenant {
  Tenant() = default;
  std::string id;
  std::string name;
  int64_t created_at = 0;  // unix seconds
};
nlohmann::json ToJson(const Tenant& tenant);
Result<Tenant> TenantFromJson(const nlohmann::json& json);
// {"tenants": [...]}
nlohmann::json TenantListJson(const std::vector<Tenant>& tenants);
Result<std::vector<Tenant>> TenantListFromJson(const nlohmann::json& json);

// GET|PATCH /v1/tenants/{id} (operator): the tenant, its limits and its use.
struct TenantDetail {
  TenantDetail() = default;
  Tenant tenant;
  TenantQuota limits;
  TenantQuota usage;
};
// {"id", "name", "created_at", "limits": {...}, "usage": {...}}
nlohmann::json ToJson(const TenantDetail& detail);
Result<TenantDetail> TenantDetailFromJson(const nlohmann::json& json);

// The body of PATCH /v1/tenants/{id}: {"limits": {"vcpus": 32, "memory_mib": null}}. A field
// given a number sets the tenant's own limit, null returns it to berthd's default, absent
// leaves it as it is.
struct TenantLimitsPatch {
  TenantLimitsPatch() = default;
  // nullopt: not given; a nullopt inside: null (the default).
  std::optional<std::optional<int64_t>> workspaces;
  std::optional<std::optional<int64_t>> vcpus;
  std::optional<std::optional<int64_t>> memory_mib;
  std::optional<std::optional<int64_t>> disk_gib;
};
inline constexpr int64_t kMaxTenantLimit = int64_t{1} << 40;
nlohmann::json ToJson(const TenantLimitsPatch& patch);
// Strict: unknown fields, a value that is neither null nor an integer in [0, kMaxTenantLimit],
// or no "limits" object are a 400 naming the field.
Result<TenantLimitsPatch> TenantLimitsPatchFromJson(const nlohmann::json& json);

// A key as lists show it: its prefix, never the key or its hash.
struct ApiKey {
  ApiKey() = default;
  std::string id;
  std::string tenant;
  std::string prefix;
  Scope scope = Scope::kRead;
  std::string name;
  int64_t created_at = 0;
  std::optional<int64_t> last_used_at;
  std::optional<int64_t> revoked_at;
};
nlohmann::json ToJson(const ApiKey& key);
Result<ApiKey> ApiKeyFromJson(const nlohmann::json& json);
// {"keys": [...]}
nlohmann::json KeyListJson(const std::vector<ApiKey>& keys);
Result<std::vector<ApiKey>> KeyListFromJson(const nlohmann::json& json);

// The body of POST /v1/keys.
struct CreateKey {
  CreateKey() = default;
  std::optional<std::string> tenant;  // id or name; default: the caller's
  Scope scope = Scope::kWrite;
  std::optional<std::string> name;
};
nlohmann::json ToJson(const CreateKey& request);

// The answer of POST /v1/keys: the key's record, the key itself (shown only here) and the
// tenant's name, in one object.
struct NewKey {
  NewKey() = default;
  ApiKey record;
  std::string secret;  // "key"
  std::string tenant_name;
};
nlohmann::json ToJson(const NewKey& key);
Result<NewKey> NewKeyFromJson(const nlohmann::json& json);

}  // namespace berth::v1
