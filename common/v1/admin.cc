#include "common/v1/admin.h"

#include "common/v1/reader.h"
#include "common/v1/time.h"

namespace berth::v1 {
namespace {

using nlohmann::json;

// Tenants and keys an admin may list at once: far past one host's.
constexpr size_t kMaxListed = 100'000;
constexpr size_t kMaxKeyBytes = 512;

void ReadScope(Reader& r, Scope& out) {
  std::string name;
  r.String("scope", name);
  if (!r.ok()) return;
  auto scope = ScopeFromName(name);
  if (!scope) {
    r.Problem(fmt::format("'scope' must be read, write or admin (not '{}')", name));
    return;
  }
  out = *scope;
}

void ReadKeyFields(Reader& r, ApiKey& k) {
  r.String("id", k.id)
      .String("tenant", k.tenant)
      .String("prefix", k.prefix)
      .String("name", k.name)
      .Time("created_at", k.created_at)
      .OptTime("last_used_at", k.last_used_at)
      .OptTime("revoked_at", k.revoked_at);
  ReadScope(r, k.scope);
}

}  // namespace

std::string_view ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kRead: return "read";
    case Scope::kWrite: return "write";
    case Scope::kAdmin: return "admin";
    case Scope::kOperator: return "operator";
  }
  return "read";
}

std::optional<Scope> ScopeFromName(std::string_view name) {
  if (name == "read") return Scope::kRead;
  if (name == "write") return Scope::kWrite;
  if (name == "admin") return Scope::kAdmin;
  if (name == "operator") return Scope::kOperator;
  return std::nullopt;
}

json ToJson(const Health& h) {
  json j = json::object();
  j["status"] = h.status;
  j["version"] = h.version;
  if (h.accel) j["accel"] = *h.accel;
  if (h.transport) j["transport"] = *h.transport;
  if (h.network) j["network"] = *h.network;
  return j;
}

Result<Health> HealthFromJson(const json& j) {
  Health h;
  Reader r(j, "health");
  r.String("status", h.status).String("version", h.version).OptString("accel", h.accel).OptString("transport", h.transport)
      .OptString("network", h.network);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return h;
}

json ToJson(const Me& me) {
  json tenant = json::object();
  tenant["id"] = me.tenant_id;
  tenant["name"] = me.tenant_name;
  json key = json::object();
  key["id"] = me.key_id;
  key["prefix"] = me.key_prefix;
  key["scope"] = ScopeName(me.scope);
  json j = json::object();
  j["tenant"] = std::move(tenant);
  j["key"] = std::move(key);
  if (me.limits) j["limits"] = ToJson(*me.limits);
  if (me.usage) j["usage"] = ToJson(*me.usage);
  return j;
}

Result<Me> MeFromJson(const json& j) {
  Me me;
  Reader r(j, "identity");
  const json* tenant = r.Find("tenant");
  const json* key = r.Find("key");
  if (r.ok() && (!tenant || !key)) r.Problem("'tenant' and 'key' are required");
  if (auto done = r.Done(); !done) return Fail(done.error());
  Reader t(*tenant, "identity's tenant");
  t.String("id", me.tenant_id).String("name", me.tenant_name);
  if (auto done = t.Done(); !done) return Fail(done.error());
  Reader k(*key, "identity's key");
  k.String("id", me.key_id).String("prefix", me.key_prefix);
  ReadScope(k, me.scope);
  if (auto done = k.Done(); !done) return Fail(done.error());
  for (auto [key, out] : {std::pair{"limits", &me.limits}, std::pair{"usage", &me.usage}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    auto quota = TenantQuotaFromJson(*it, fmt::format("identity's {}", key));
    if (!quota) return Fail(quota.error());
    *out = *quota;
  }
  return me;
}

json ToJson(const TenantQuota& q) {
  json j = json::object();
  j["workspaces"] = q.workspaces;
  j["vcpus"] = q.vcpus;
  j["memory_mib"] = q.memory_mib;
  j["disk_gib"] = q.disk_gib;
  return j;
}

Result<TenantQuota> TenantQuotaFromJson(const json& j, std::string_view what) {
  TenantQuota q;
  Reader r(j, what);
  r.Integer("workspaces", q.workspaces, 0)
      .Integer("vcpus", q.vcpus, 0)
      .Integer("memory_mib", q.memory_mib, 0)
      .Integer("disk_gib", q.disk_gib, 0);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return q;
}

json ToJson(const TenantDetail& d) {
  json j = ToJson(d.tenant);
  j["limits"] = ToJson(d.limits);
  j["usage"] = ToJson(d.usage);
  return j;
}

Result<TenantDetail> TenantDetailFromJson(const json& j) {
  TenantDetail d;
  auto tenant = TenantFromJson(j);
  if (!tenant) return Fail(tenant.error());
  d.tenant = std::move(*tenant);
  Reader r(j, "tenant");
  const json* limits = r.Find("limits");
  const json* usage = r.Find("usage");
  if (!limits || !usage) return Fail(ErrorCode::kInvalidArgument, "tenant: 'limits' and 'usage' are required");
  auto l = TenantQuotaFromJson(*limits, "tenant's limits");
  if (!l) return Fail(l.error());
  auto u = TenantQuotaFromJson(*usage, "tenant's usage");
  if (!u) return Fail(u.error());
  d.limits = *l;
  d.usage = *u;
  return d;
}

json ToJson(const TenantLimitsPatch& p) {
  json limits = json::object();
  auto put = [&](const char* key, const std::optional<std::optional<int64_t>>& v) {
    if (!v) return;
    limits[key] = *v ? json(**v) : json(nullptr);
  };
  put("workspaces", p.workspaces);
  put("vcpus", p.vcpus);
  put("memory_mib", p.memory_mib);
  put("disk_gib", p.disk_gib);
  json j = json::object();
  j["limits"] = std::move(limits);
  return j;
}

Result<TenantLimitsPatch> TenantLimitsPatchFromJson(const json& j) {
  Reader top(j, "tenant patch");
  top.OnlyFields({"limits"});
  const json* limits = top.Find("limits");
  if (top.ok() && (limits == nullptr || !limits->is_object())) {
    top.Problem("'limits' is required (an object)");
  }
  if (auto done = top.Done(); !done) return Fail(done.error());
  TenantLimitsPatch p;
  Reader r(*limits, "limits");
  r.OnlyFields({"workspaces", "vcpus", "memory_mib", "disk_gib"});
  if (auto done = r.Done(); !done) return Fail(done.error());
  auto field = [&](const char* key, std::optional<std::optional<int64_t>>& out) {
    if (!limits->contains(key)) return;
    std::optional<int64_t> value;
    r.OptInteger(key, value, 0, kMaxTenantLimit);
    out = value;
  };
  field("workspaces", p.workspaces);
  field("vcpus", p.vcpus);
  field("memory_mib", p.memory_mib);
  field("disk_gib", p.disk_gib);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return p;
}

json ToJson(const Tenant& t) {
  json j = json::object();
  j["id"] = t.id;
  j["name"] = t.name;
  j["created_at"] = FormatTime(t.created_at);
  return j;
}

Result<Tenant> TenantFromJson(const json& j) {
  Tenant t;
  Reader r(j, "tenant");
  r.String("id", t.id).String("name", t.name).Time("created_at", t.created_at);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return t;
}

json TenantListJson(const std::vector<Tenant>& tenants) {
  json list = json::array();
  for (const auto& t : tenants) list.push_back(ToJson(t));
  json j = json::object();
  j["tenants"] = std::move(list);
  return j;
}

Result<std::vector<Tenant>> TenantListFromJson(const json& j) {
  std::vector<Tenant> out;
  if (auto read = ReadList(j, "tenants", "tenant list", kMaxListed, TenantFromJson, out); !read) {
    return Fail(read.error());
  }
  return out;
}

json ToJson(const ApiKey& k) {
  json j = json::object();
  j["id"] = k.id;
  j["tenant"] = k.tenant;
  j["prefix"] = k.prefix;
  j["scope"] = ScopeName(k.scope);
  j["name"] = k.name;
  j["created_at"] = FormatTime(k.created_at);
  j["last_used_at"] = TimeOrNull(k.last_used_at);
  j["revoked_at"] = TimeOrNull(k.revoked_at);
  return j;
}

Result<ApiKey> ApiKeyFromJson(const json& j) {
  ApiKey k;
  Reader r(j, "key");
  ReadKeyFields(r, k);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return k;
}

json KeyListJson(const std::vector<ApiKey>& keys) {
  json list = json::array();
  for (const auto& k : keys) list.push_back(ToJson(k));
  json j = json::object();
  j["keys"] = std::move(list);
  return j;
}

Result<std::vector<ApiKey>> KeyListFromJson(const json& j) {
  std::vector<ApiKey> out;
  if (auto read = ReadList(j, "keys", "key list", kMaxListed, ApiKeyFromJson, out); !read) {
    return Fail(read.error());
  }
  return out;
}

json ToJson(const CreateKey& c) {
  json j = json::object();
  if (c.tenant) j["tenant"] = *c.tenant;
  j["scope"] = ScopeName(c.scope);
  if (c.name) j["name"] = *c.name;
  return j;
}

json ToJson(const NewKey& k) {
  json j = ToJson(k.record);
  j["key"] = k.secret;
  j["tenant_name"] = k.tenant_name;
  return j;
}

Result<NewKey> NewKeyFromJson(const json& j) {
  NewKey k;
  Reader r(j, "new key");
  ReadKeyFields(r, k.record);
  r.String("key", k.secret, kMaxKeyBytes).String("tenant_name", k.tenant_name);
  if (auto done = r.Done(); !done) return Fail(done.error());
  return k;
}

}  // namespace berth::v1
