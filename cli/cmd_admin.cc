// Administration: API keys (an admin key for its own tenant's, an operator key for any
// tenant's) and tenants (an operator key).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/v1/time.h"

namespace berth::cli {
namespace {

constexpr std::chrono::seconds kCallTimeout{120};

Deadline CallDeadline() { return DeadlineIn(kCallTimeout); }

struct KeyOptions {
  std::string tenant;
  std::string scope = "write";
  std::string name;
  std::vector<std::string> ids;
};

std::string TimeOrDash(const std::optional<int64_t>& t) {
  return t ? v1::FormatTime(*t) : std::string("-");
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

Result<int> ListKeys(Context& ctx, const KeyOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto keys = berth->ListKeys(o.tenant, CallDeadline());
  if (!keys) return Fail(keys.error());
  if (ctx.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& key : *keys) out.push_back(v1::ToJson(key));
    ctx.PrintJson(out);
    return kExitOk;
  }
  Table table({"ID", "PREFIX", "SCOPE", "TENANT", "NAME", "CREATED", "LAST USED", "REVOKED"});
  auto age = [&](const std::optional<int64_t>& t) {
    return t ? FormatAge(*t, ctx.now()) + " ago" : std::string("-");
  };
  for (const auto& key : *keys) {
    table.AddRow({OrDash(key.id), OrDash(key.prefix), std::string(v1::ScopeName(key.scope)),
                  OrDash(key.tenant), OrDash(key.name), age(key.created_at),
                  age(key.last_used_at), age(key.revoked_at)});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> CreateKey(Context& ctx, const KeyOptions& o) {
  v1::CreateKey request;
  if (!o.tenant.empty()) request.tenant = o.tenant;
  auto scope = v1::ScopeFromName(o.scope);
  if (!scope) return Fail(ErrorCode::kInvalidArgument, "--scope is read, write, admin or operator");
  request.scope = *scope;
  if (!o.name.empty()) request.name = o.name;
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto key = berth->CreateKey(request, CallDeadline());
  if (!key) return Fail(key.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*key));
    return kExitOk;
  }
  // The key alone on stdout, for KEY=$(berth keys create …); the rest for people on stderr.
  ctx.out() << key->secret << "\n";
  ctx.out().flush();
  ctx.err() << fmt::format("created key {} (scope {}, tenant {}): store it now, it is not shown "
                           "again\n",
                           OrDash(key->record.id), v1::ScopeName(key->record.scope),
                           OrDash(key->record.tenant));
  return kExitOk;
}

Result<int> RevokeKeys(Context& ctx, const KeyOptions& o) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  int code = kExitOk;
  for (const auto& id : o.ids) {
    auto done = berth->RevokeKey(id, CallDeadline());
    if (!done) {
      code = ctx.Report(Error{done.error().code, fmt::format("{}: {}", id, done.error().message)});
      continue;
    }
    if (!ctx.json()) ctx.out() << id << ": revoked\n";
  }
  return code;
}

Result<int> ListTenants(Context& ctx) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto tenants = berth->ListTenants(CallDeadline());
  if (!tenants) return Fail(tenants.error());
  if (ctx.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : *tenants) out.push_back(v1::ToJson(t));
    ctx.PrintJson(out);
    return kExitOk;
  }
  Table table({"ID", "NAME", "CREATED"});
  for (const auto& t : *tenants) {
    table.AddRow({OrDash(t.id), OrDash(t.name), TimeOrDash(t.created_at)});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> CreateTenant(Context& ctx, const std::string& name) {
  auto berth = ctx.Berth();
  if (!berth) return Fail(berth.error());
  auto tenant = berth->CreateTenant(name, CallDeadline());
  if (!tenant) return Fail(tenant.error());
  if (ctx.json()) {
    ctx.PrintJson(v1::ToJson(*tenant));
  } else {
    ctx.out() << fmt::format("{} ({}): created\n", OrDash(tenant->name), OrDash(tenant->id));
  }
  return kExitOk;
}

}  // namespace

void AddAdminCommands(Builder& b) {
  auto k = std::make_shared<KeyOptions>();
  auto* keys = b.Group("keys", "API keys (admin: its tenant's; operator: any tenant's)");
  auto* list = b.Add("ls", "list API keys", [k](Context& ctx) { return ListKeys(ctx, *k); }, keys);
  list->alias("list");
  list->add_option("--tenant", k->tenant,
                   "only this tenant's keys (default: an admin's own, an operator's all)");
  b.AddJsonFlag(list);
  auto* create = b.Add("create", "create an API key (printed once)",
                       [k](Context& ctx) { return CreateKey(ctx, *k); }, keys);
  create->add_option("--tenant", k->tenant,
                     "the tenant (id or name) it belongs to (default: the caller's own)");
  create->add_option("--scope", k->scope,
                     "read | write | admin (its tenant's keys) | operator (tenants, all keys)")
      ->check(CLI::IsMember({"read", "write", "admin", "operator"}))
      ->capture_default_str();
  create->add_option("--name", k->name, "a name to recognise it by");
  b.AddJsonFlag(create);
  auto* revoke = b.Add("revoke", "revoke API keys (they stop working at once)",
                       [k](Context& ctx) { return RevokeKeys(ctx, *k); }, keys);
  revoke->alias("rm");
  revoke->add_option("id", k->ids, "key ids")->required();

  auto name = std::make_shared<std::string>();
  auto* tenants = b.Group("tenants", "tenants (operator)");
  auto* tlist = b.Add("ls", "list tenants", [](Context& ctx) { return ListTenants(ctx); }, tenants);
  tlist->alias("list");
  b.AddJsonFlag(tlist);
  auto* tcreate = b.Add("create", "create a tenant",
                        [name](Context& ctx) { return CreateTenant(ctx, *name); }, tenants);
  tcreate->add_option("name", *name, "the tenant's name")->required();
  b.AddJsonFlag(tcreate);
}

}  // namespace berth::cli
