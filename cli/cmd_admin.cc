// Administration: API keys (an admin key for its own tenant's, an operator key for any
// tenant's) and tenants (an operator key).
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/http/url.h"

namespace berth::cli {
namespace {

using boost::beast::http::verb;

struct KeyOptions {
  std::string tenant;
  std::string scope = "write";
  std::string name;
  std::vector<std::string> ids;
};

Result<int> ListKeys(Context& ctx, const KeyOptions& o) {
  std::string query = o.tenant.empty() ? "" : "?tenant=" + http::PercentEncode(o.tenant, false);
  auto json = ctx.Call(verb::get, ctx.Route("/v1/keys" + query));
  if (!json) return Fail(json.error());
  nlohmann::json keys = json->value("keys", nlohmann::json::array());
  if (ctx.json()) {
    ctx.PrintJson(keys);
    return kExitOk;
  }
  Table table({"ID", "PREFIX", "SCOPE", "TENANT", "NAME", "CREATED", "LAST USED", "REVOKED"});
  for (const auto& key : keys) {
    auto age = [&](const char* field) {
      std::string value = Cell(key, field);
      return value == "-" ? value : FormatAge(value, ctx.now()) + " ago";
    };
    table.AddRow({Cell(key, "id"), Cell(key, "prefix"), Cell(key, "scope"), Cell(key, "tenant"),
                  Cell(key, "name"), age("created_at"), age("last_used_at"), age("revoked_at")});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> CreateKey(Context& ctx, const KeyOptions& o) {
  nlohmann::json body = {{"scope", o.scope}};
  if (!o.tenant.empty()) body["tenant"] = o.tenant;  // berthd's default: the key's own tenant
  if (!o.name.empty()) body["name"] = o.name;
  auto key = ctx.Call(verb::post, ctx.Route("/v1/keys"), body);
  if (!key) return Fail(key.error());
  if (ctx.json()) {
    ctx.PrintJson(*key);
    return kExitOk;
  }
  // The key alone on stdout, for KEY=$(berth keys create …); the rest for people on stderr.
  ctx.out() << key->value("key", "") << "\n";
  ctx.out().flush();
  ctx.err() << fmt::format("created key {} (scope {}, tenant {}): store it now, it is not shown "
                           "again\n",
                           Cell(*key, "id"), Cell(*key, "scope"), Cell(*key, "tenant"));
  return kExitOk;
}

Result<int> RevokeKeys(Context& ctx, const KeyOptions& o) {
  int code = kExitOk;
  for (const auto& id : o.ids) {
    auto done = ctx.Call(verb::delete_, ctx.Route("/v1/keys/" + http::PercentEncode(id, false)));
    if (!done) {
      code = ctx.Report(Error{done.error().code, fmt::format("{}: {}", id, done.error().message)});
      continue;
    }
    if (!ctx.json()) ctx.out() << id << ": revoked\n";
  }
  return code;
}

Result<int> ListTenants(Context& ctx) {
  auto json = ctx.Call(verb::get, ctx.Route("/v1/tenants"));
  if (!json) return Fail(json.error());
  nlohmann::json tenants = json->value("tenants", nlohmann::json::array());
  if (ctx.json()) {
    ctx.PrintJson(tenants);
    return kExitOk;
  }
  Table table({"ID", "NAME", "CREATED"});
  for (const auto& t : tenants) {
    table.AddRow({Cell(t, "id"), Cell(t, "name"), Cell(t, "created_at")});
  }
  ctx.out() << table.Render();
  return kExitOk;
}

Result<int> CreateTenant(Context& ctx, const std::string& name) {
  auto tenant = ctx.Call(verb::post, ctx.Route("/v1/tenants"), nlohmann::json{{"name", name}});
  if (!tenant) return Fail(tenant.error());
  if (ctx.json()) {
    ctx.PrintJson(*tenant);
  } else {
    ctx.out() << fmt::format("{} ({}): created\n", Cell(*tenant, "name"), Cell(*tenant, "id"));
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
