// Identity, tenants (with their limits) and keys. Tenants need an operator key; keys an admin key for its own
// tenant's, an operator key for any tenant's; /v1/me is for any key. Bodies are checked field
// by field: a field of the wrong type is a 400 naming it, never a throw.
#include <fmt/format.h>

#include "common/json.h"
#include "common/random.h"
#include "common/unix_time.h"
#include "controller/api/api_server.h"
#include "controller/api/json.h"

namespace berth::api {
namespace {

using http::bhttp::status;
using http::bhttp::verb;

// A tenant's limits (workspace::Limits) or its use of them (workspace::QuotaUse): the same four
// amounts on the wire.
template <class Amounts>
v1::TenantQuota QuotaWire(const Amounts& a) {
  v1::TenantQuota q;
  q.workspaces = a.workspaces;
  q.vcpus = a.vcpus;
  q.memory_mib = a.memory_mib;
  q.disk_gib = a.disk_gib;
  return q;
}

// The tenant with its limits and use. Blocking (a store read).
Result<v1::TenantDetail> DetailOf(ApiContext& ctx, const store::Tenant& tenant) {
  auto limits = ctx.service.LimitsOf(tenant.id);
  if (!limits) return Fail(limits.error());
  v1::TenantDetail d;
  d.tenant = TenantWire(tenant);
  d.limits = QuotaWire(*limits);
  d.usage = QuotaWire(ctx.service.UsageOf(tenant.id));
  return d;
}

http::Task<void> Me(ApiContext& ctx, http::Exchange& ex) {
  auto p = PrincipalOf(ex);
  v1::Me me;
  me.tenant_id = p.tenant_id;
  me.tenant_name = p.tenant_name;
  me.key_id = p.key_id;
  me.key_prefix = p.key_prefix;
  me.scope = p.scope;
  auto limits = co_await ctx.Blocking([&] { return ctx.service.LimitsOf(p.tenant_id); });
  if (!limits) {
    co_await ex.SendError(limits.error());
    co_return;
  }
  me.limits = QuotaWire(*limits);
  me.usage = QuotaWire(ctx.service.UsageOf(p.tenant_id));
  auto body = v1::ToJson(me);
  co_await ex.SendJson(status::ok, body);
}

// 403 for a tenant the principal may not manage keys of. Decided on the reference alone,
// before any lookup, so that an admin learns nothing about which other tenants exist.
Status CheckKeyTenant(const Principal& p, const std::string& tenant_ref) {
  if (p.Allows(Scope::kOperator) || tenant_ref == p.tenant_id || tenant_ref == p.tenant_name) {
    return {};
  }
  return Fail(ErrorCode::kPermissionDenied,
              "an admin key manages its own tenant's keys; other tenants need an operator key");
}

http::Task<void> CreateTenant(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kOperator)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  if (!body->is_object() || !body->contains("name") || !(*body)["name"].is_string()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "'name' is required (a string)"});
    co_return;
  }
  std::string name = (*body)["name"].get<std::string>();
  if (auto valid = workspace::ValidateName(name); !valid) {
    co_await ex.SendError(valid.error());
    co_return;
  }
  auto tenant = co_await ctx.Blocking([&] { return ctx.store.CreateTenant(name, UnixNow()); });
  if (!tenant) {
    co_await ex.SendError(tenant.error());
    co_return;
  }
  co_await ex.SendJson(status::created, TenantJson(*tenant));
}

http::Task<void> ListTenants(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kOperator)) co_return;
  auto tenants = co_await ctx.Blocking([&] { return ctx.store.ListTenants(); });
  if (!tenants) {
    co_await ex.SendError(tenants.error());
    co_return;
  }
  std::vector<v1::Tenant> list;
  for (const auto& t : *tenants) list.push_back(TenantWire(t));
  auto body = v1::TenantListJson(list);
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> GetTenant(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kOperator)) co_return;
  std::string ref(ex.param("id"));
  auto detail = co_await ctx.Blocking([&]() -> Result<v1::TenantDetail> {
    auto tenant = ctx.store.GetTenant(ref);
    if (!tenant) return Fail(tenant.error());
    return DetailOf(ctx, *tenant);
  });
  if (!detail) {
    co_await ex.SendError(detail.error());
    co_return;
  }
  auto body = v1::ToJson(*detail);
  co_await ex.SendJson(status::ok, body);
}

// Operator only, decided before the body is read or the tenant looked up: an admin key cannot
// raise its own tenant's limits, nor learn which other tenants exist.
http::Task<void> PatchTenant(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kOperator)) co_return;
  std::string ref(ex.param("id"));
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  auto patch = v1::TenantLimitsPatchFromJson(*body);
  if (!patch) {
    co_await ex.SendError(patch.error());
    co_return;
  }
  auto detail = co_await ctx.Blocking([&]() -> Result<v1::TenantDetail> {
    auto tenant = ctx.store.GetTenant(ref);
    if (!tenant) return Fail(tenant.error());
    auto current = ctx.store.GetTenantLimits(tenant->id);
    if (!current) return Fail(current.error());
    workspace::LimitOverrides next = *current;
    auto apply = [](const std::optional<std::optional<int64_t>>& given, std::optional<int64_t>& out) {
      if (given) out = *given;
    };
    apply(patch->workspaces, next.workspaces);
    apply(patch->vcpus, next.vcpus);
    apply(patch->memory_mib, next.memory_mib);
    apply(patch->disk_gib, next.disk_gib);
    // Lowering a limit below what the tenant uses stops nothing: it refuses the next create
    // or start that would need more.
    if (auto s = ctx.store.SetTenantLimits(tenant->id, next); !s) return Fail(s.error());
    return DetailOf(ctx, *tenant);
  });
  if (!detail) {
    co_await ex.SendError(detail.error());
    co_return;
  }
  auto out = v1::ToJson(*detail);
  co_await ex.SendJson(status::ok, out);
}

http::Task<void> CreateKey(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kAdmin)) co_return;
  auto body = co_await ex.ReadJson();
  if (!body) {
    co_await ex.SendError(body.error());
    co_return;
  }
  if (!body->is_object()) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "the body must be a JSON object"});
    co_return;
  }
  auto tenant_field = OptionalString(*body, "tenant");
  auto scope_field = OptionalString(*body, "scope");
  auto name_field = OptionalString(*body, "name");
  std::optional<Error> wrong_type;
  for (const auto* field : {&tenant_field, &scope_field, &name_field}) {
    if (!*field && !wrong_type) wrong_type = field->error();
  }
  if (wrong_type) {
    co_await ex.SendError(*wrong_type);
    co_return;
  }
  Principal principal = PrincipalOf(ex);
  std::string tenant_ref = tenant_field->value_or(principal.tenant_id);
  std::string name = name_field->value_or("");
  auto scope = ParseScope(scope_field->value_or(""));
  if (!scope) {
    co_await ex.SendError(scope.error());
    co_return;
  }
  if (name.size() > 200) {
    co_await ex.SendError({ErrorCode::kInvalidArgument, "'name' is longer than 200 characters"});
    co_return;
  }
  if (auto allowed = CheckKeyTenant(principal, tenant_ref); !allowed) {
    co_await ex.SendError(allowed.error());
    co_return;
  }
  // An admin's reference named its own tenant: look that up by id, not by the reference.
  if (!principal.Allows(Scope::kOperator)) tenant_ref = principal.tenant_id;
  // No key mints one that could do more than itself (an admin cannot make an operator).
  if (!principal.Allows(*scope)) {
    auto error = Error{ErrorCode::kPermissionDenied,
                       fmt::format("a key of {} scope cannot create one of {} scope",
                                   ScopeName(principal.scope), ScopeName(*scope))};
    co_await ex.SendError(error);
    co_return;
  }
  auto made = co_await ctx.Blocking([&]() -> Result<std::pair<NewKey, store::Tenant>> {
    auto tenant = ctx.store.GetTenant(tenant_ref);
    if (!tenant) return Fail(tenant.error());
    auto key = ctx.auth.CreateKey(tenant->id, *scope, name);
    if (!key) return Fail(key.error());
    return std::make_pair(std::move(*key), std::move(*tenant));
  });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  v1::NewKey key;
  key.record = KeyWire(made->first.record);
  key.secret = made->first.secret;
  key.tenant_name = made->second.name;
  auto out = v1::ToJson(key);
  co_await ex.SendJson(status::created, out);
}

http::Task<void> ListKeys(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kAdmin)) co_return;
  Principal principal = PrincipalOf(ex);
  auto tenant = ex.query().Get("tenant");
  if (tenant) {
    if (auto allowed = CheckKeyTenant(principal, *tenant); !allowed) {
      co_await ex.SendError(allowed.error());
      co_return;
    }
  }
  // An admin sees its own tenant's keys (by id, whatever the reference was).
  if (!principal.Allows(Scope::kOperator)) tenant = principal.tenant_id;
  auto keys = co_await ctx.Blocking([&]() -> Result<std::vector<store::ApiKey>> {
    std::optional<std::string> id;
    if (tenant) {
      auto t = ctx.store.GetTenant(*tenant);
      if (!t) return Fail(t.error());
      id = t->id;
    }
    return ctx.store.ListKeys(id);
  });
  if (!keys) {
    co_await ex.SendError(keys.error());
    co_return;
  }
  std::vector<v1::ApiKey> list;
  for (const auto& k : *keys) list.push_back(KeyWire(k));
  auto body = v1::KeyListJson(list);
  co_await ex.SendJson(status::ok, body);
}

http::Task<void> RevokeKey(ApiContext& ctx, http::Exchange& ex) {
  if (!co_await Require(ex, Scope::kAdmin)) co_return;
  std::string id(ex.param("id"));
  Principal principal = PrincipalOf(ex);
  auto revoked = co_await ctx.Blocking([&] { return ctx.auth.Revoke(id, principal); });
  if (!revoked) {
    co_await ex.SendError(revoked.error());
    co_return;
  }
  http::bhttp::response<http::bhttp::string_body> res{status::no_content, 11};
  co_await ex.Send(std::move(res));
}

}  // namespace

void AddAdminRoutes(http::Router& router, ApiContext& ctx) {
  router.Add(verb::get, "/v1/me", [&ctx](http::Exchange& ex) { return Me(ctx, ex); });
  router.Add(verb::post, "/v1/tenants", [&ctx](http::Exchange& ex) { return CreateTenant(ctx, ex); });
  router.Add(verb::get, "/v1/tenants", [&ctx](http::Exchange& ex) { return ListTenants(ctx, ex); });
  router.Add(verb::get, "/v1/tenants/{id}", [&ctx](http::Exchange& ex) { return GetTenant(ctx, ex); });
  router.Add(verb::patch, "/v1/tenants/{id}", [&ctx](http::Exchange& ex) { return PatchTenant(ctx, ex); });
  router.Add(verb::post, "/v1/keys", [&ctx](http::Exchange& ex) { return CreateKey(ctx, ex); });
  router.Add(verb::get, "/v1/keys", [&ctx](http::Exchange& ex) { return ListKeys(ctx, ex); });
  router.Add(verb::delete_, "/v1/keys/{id}", [&ctx](http::Exchange& ex) { return RevokeKey(ctx, ex); });
}

}  // namespace berth::api
