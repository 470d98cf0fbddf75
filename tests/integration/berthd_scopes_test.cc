// Scopes against a hostile key: an admin key manages its own tenant's keys and nothing else
// (not another tenant's, not tenants, not keys above its scope); the operator key (berthd's
// first) manages every tenant's; and the migration that gave databases from before the
// operator scope their operator key.
#include <fstream>
#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "controller/store/schema.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"
#include "tests/integration/berthd_hardening_util.h"
#include "tests/support/temp_dir.h"

namespace berth {
namespace {

using http::bhttp::verb;
using nlohmann::json;
using testing::HardeningBerthd;
using testing::MintKey;
using testing::StatusOf;
using testing::TestBerthd;

std::set<std::string> KeyTenants(const json& list) {
  std::set<std::string> out;
  for (const auto& k : list["keys"]) out.insert(k["tenant"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("berthd: an admin key manages its own tenant's keys only; the operator any tenant's",
          "[berthd][scopes]") {
  auto& d = HardeningBerthd();
  auto op = d.Admin();
  auto me = op.Json(verb::get, "/v1/me");
  REQUIRE(me);
  CHECK((*me)["key"]["scope"] == "operator");
  std::string op_key_id = (*me)["key"]["id"];
  for (const char* name : {"scope-a", "scope-b"}) {
    REQUIRE(op.Json(verb::post, "/v1/tenants", json{{"name", name}}));
  }
  std::string admin_a_secret = MintKey("scope-a", "admin").second;
  auto [b_key_id, b_key_secret] = MintKey("scope-b", "write");
  auto admin_a = d.WithKey(admin_a_secret);
  auto key_b = d.WithKey(b_key_secret);

  // Tenant B's keys are out of A's admin's reach: not minted, listed or revoked; whether the
  // tenant exists or not makes no difference to the answer.
  for (const char* tenant : {"scope-b", "t_scope-b", "no-such-tenant"}) {
    INFO(tenant);
    CHECK(StatusOf(admin_a, verb::post, "/v1/keys", {{"tenant", tenant}, {"scope", "read"}}) == 403);
    auto listed = admin_a.Request(verb::get, fmt::format("/v1/keys?tenant={}", tenant));
    REQUIRE(listed);
    CHECK(listed->status == 403);
  }
  auto revoke_b = admin_a.Request(verb::delete_, "/v1/keys/" + b_key_id);
  REQUIRE(revoke_b);
  CHECK(revoke_b->status == 404);
  CHECK(key_b.Json(verb::get, "/v1/me"));  // still works
  auto revoke_op = admin_a.Request(verb::delete_, "/v1/keys/" + op_key_id);
  REQUIRE(revoke_op);
  CHECK(revoke_op->status == 404);
  // Nor tenants, nor keys above its own scope.
  CHECK(StatusOf(admin_a, verb::post, "/v1/tenants", {{"name", "scope-c"}}) == 403);
  auto tenants = admin_a.Request(verb::get, "/v1/tenants");
  REQUIRE(tenants);
  CHECK(tenants->status == 403);
  CHECK(StatusOf(admin_a, verb::post, "/v1/keys", {{"scope", "operator"}}) == 403);
  std::string op_in_a_id = MintKey("scope-a", "operator").first;
  auto revoke_higher = admin_a.Request(verb::delete_, "/v1/keys/" + op_in_a_id);
  REQUIRE(revoke_higher);
  CHECK(revoke_higher->status == 403);

  // Its own tenant's keys it manages, by default and by name.
  auto own = admin_a.Json(verb::post, "/v1/keys", json{{"scope", "read"}, {"name", "ro"}});
  REQUIRE(own);
  CHECK((*own)["tenant"] == "t_scope-a");
  auto by_name = admin_a.Json(verb::post, "/v1/keys", json{{"tenant", "scope-a"}, {"scope", "write"}});
  REQUIRE(by_name);
  CHECK((*by_name)["tenant"] == "t_scope-a");
  auto listed = admin_a.Json(verb::get, "/v1/keys");
  REQUIRE(listed);
  CHECK(KeyTenants(*listed) == std::set<std::string>{"t_scope-a"});
  // Its own, the operator key minted in A, "ro" and the write key: nothing of B's or default's.
  CHECK((*listed)["keys"].size() == 4);
  auto own_read = d.WithKey((*own)["key"].get<std::string>());
  REQUIRE(own_read.Json(verb::get, "/v1/me"));
  auto revoked = admin_a.Request(verb::delete_, "/v1/keys/" + (*own)["id"].get<std::string>());
  REQUIRE(revoked);
  CHECK(revoked->status == 204);
  CHECK_FALSE(own_read.Json(verb::get, "/v1/me"));

  // The operator reaches every tenant.
  auto all = op.Json(verb::get, "/v1/keys");
  REQUIRE(all);
  CHECK(KeyTenants(*all).count("t_scope-a") == 1);
  CHECK(KeyTenants(*all).count("t_scope-b") == 1);
  CHECK(KeyTenants(*all).count("t_default") == 1);
  auto only_b = op.Json(verb::get, "/v1/keys?tenant=scope-b");
  REQUIRE(only_b);
  CHECK(KeyTenants(*only_b) == std::set<std::string>{"t_scope-b"});
  auto op_revoke = op.Request(verb::delete_, "/v1/keys/" + b_key_id);
  REQUIRE(op_revoke);
  CHECK(op_revoke->status == 204);
  auto gone = key_b.Json(verb::get, "/v1/me");
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == ErrorCode::kUnauthenticated);
}

TEST_CASE("migration 3 makes the first key the operator's and leaves other admins admin",
          "[berthd][scopes]") {
  testing::TempDir dir("berth-migrate");
  std::string path = dir / "berth.db";
  {
    auto db = store::Database::Open(path);
    REQUIRE(db);
    std::vector<std::string_view> before(store::Migrations().begin(), store::Migrations().begin() + 2);
    REQUIRE(db->Migrate(before));
    REQUIRE(db->Exec(
        "INSERT INTO tenants VALUES ('t_default', 'default', 100), ('t_x', 'x', 200);"
        "INSERT INTO api_keys (id, tenant_id, hash, prefix, scope, name, created_at) VALUES "
        "('key_first', 't_default', 'h1', 'bk_1', 'admin', 'first admin key', 100),"
        "('key_later', 't_default', 'h2', 'bk_2', 'admin', 'ops', 150),"
        "('key_x', 't_x', 'h3', 'bk_3', 'admin', 'first admin key', 200),"
        "('key_w', 't_x', 'h4', 'bk_4', 'write', '', 200);"));
  }
  auto store = store::Store::Open(path);
  REQUIRE(store);
  auto keys = (*store)->ListKeys(std::nullopt);
  REQUIRE(keys);
  std::map<std::string, std::string> scopes;
  for (const auto& k : *keys) scopes[k.id] = k.scope;
  CHECK(scopes == std::map<std::string, std::string>{{"key_first", "operator"},
                                                     {"key_later", "admin"},
                                                     {"key_x", "admin"},
                                                     {"key_w", "write"}});
  // Hashes and the rest survive the rebuilt table.
  auto found = (*store)->FindKeyByHash("h1");
  REQUIRE(found);
  CHECK(found->id == "key_first");
  CHECK(found->prefix == "bk_1");
}

TEST_CASE("berthd makes a new operator key at start-up when none is active", "[berthd][scopes]") {
  TestBerthd d;
  auto op = d.Admin();
  auto me = op.Json(verb::get, "/v1/me");
  REQUIRE(me);
  std::string first_id = (*me)["key"]["id"];
  // The operator revokes its own key: nobody can manage tenants any more.
  auto revoked = op.Request(verb::delete_, "/v1/keys/" + first_id);
  REQUIRE(revoked);
  REQUIRE(revoked->status == 204);
  REQUIRE_FALSE(op.Json(verb::get, "/v1/me"));
  d.Restart();
  std::ifstream in(d.daemon().admin_key_file());
  std::string secret;
  std::getline(in, secret);
  REQUIRE(secret.starts_with("bk_"));
  CHECK(secret != d.admin_key());
  auto fresh = d.WithKey(secret);
  auto now = fresh.Json(verb::get, "/v1/me");
  REQUIRE(now);
  CHECK((*now)["key"]["scope"] == "operator");
  CHECK((*now)["tenant"]["name"] == "default");
  CHECK(fresh.Json(verb::get, "/v1/tenants"));
  // With an operator key active, a restart leaves admin.key alone.
  d.Restart();
  std::ifstream again(d.daemon().admin_key_file());
  std::string same;
  std::getline(again, same);
  CHECK(same == secret);
}

}  // namespace berth
