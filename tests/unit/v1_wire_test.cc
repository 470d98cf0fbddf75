// berthd's v1 wire types (common/v1/): every type round-trips through its JSON, and an answer
// that is not what docs/api.md says is an invalid_argument error naming the field, never a
// throw. No I/O.
#include <catch2/catch.hpp>

#include "common/v1/admin.h"
#include "common/v1/events.h"
#include "common/v1/time.h"
#include "common/v1/workspace.h"

using namespace berth;
using nlohmann::json;

namespace {

v1::Workspace FullWorkspace() {
  v1::Workspace ws;
  ws.id = "ws_0123456789abcdef";
  ws.name = "api-server";
  ws.tenant = "tn_1";
  ws.image = "base";
  ws.image_version = "20260101";
  ws.size = std::nullopt;
  ws.cpus = 2;
  ws.memory_mib = 4096;
  ws.disk_gib = 20;
  ws.idle_timeout = 600;
  ws.idle_action = v1::IdleAction::kHibernate;
  ws.max_runtime = 28800;
  ws.auto_start = false;
  ws.env = {{"GREETING", "hello"}};
  ws.labels = {{"team", "infra"}};
  ws.state = v1::State::kRunning;
  ws.error = std::nullopt;
  ws.transport = "forward";
  ws.created_at = 1'764'452'735;
  ws.updated_at = 1'764'452'800;
  ws.started_at = 1'764'452'900;
  ws.last_active_at = std::nullopt;
  v1::Awake awake;
  awake.reasons = {"exec stream", "lease: make test"};
  awake.idle_at = 1'764'453'500;
  ws.awake = awake;
  return ws;
}

// Whether parsing fails with invalid_argument and a message that names `field`.
void CheckRejected(const Result<v1::Workspace>& parsed, std::string_view field) {
  INFO(field);
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().code == ErrorCode::kInvalidArgument);
  CHECK(parsed.error().message.find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("a workspace round-trips through its JSON, field for field", "[v1]") {
  v1::Workspace ws = FullWorkspace();
  json j = v1::ToJson(ws);
  CHECK(j["created_at"] == "2025-11-29T21:45:35Z");
  CHECK(j["size"].is_null());
  CHECK(j["last_active_at"].is_null());
  CHECK(j["error"].is_null());
  CHECK(j["idle_action"] == "hibernate");
  CHECK(j["awake"]["reasons"].size() == 2);
  CHECK(j["env"] == json({{"GREETING", "hello"}}));
  auto back = v1::WorkspaceFromJson(j);
  REQUIRE(back);
  CHECK(v1::ToJson(*back) == j);
  CHECK(back->max_runtime == 28800);
  CHECK(back->awake->idle_at == 1'764'453'500);

  // Absent while not running; null fields may also be left out by a peer.
  ws.awake.reset();
  ws.state = v1::State::kError;
  ws.error = "boot failed";
  j = v1::ToJson(ws);
  CHECK_FALSE(j.contains("awake"));
  j.erase("last_active_at");
  j.erase("size");
  back = v1::WorkspaceFromJson(j);
  REQUIRE(back);
  CHECK(back->error == "boot failed");
  CHECK_FALSE(back->size);
  CHECK_FALSE(back->awake);
  // A newer berthd's extra fields are no error.
  j["a_later_field"] = json::array();
  CHECK(v1::WorkspaceFromJson(j).has_value());
  // The rolling checkpoint policy: null when off, {every, keep} when on.
  CHECK(j["checkpoints"].is_null());
  ws.checkpoints = v1::CheckpointPolicy{3600, 24};
  j = v1::ToJson(ws);
  CHECK(j["checkpoints"] == json({{"every", 3600}, {"keep", 24}}));
  back = v1::WorkspaceFromJson(j);
  REQUIRE(back);
  REQUIRE(back->checkpoints);
  CHECK(back->checkpoints->every == 3600);
  CHECK(back->checkpoints->keep == 24);
}

TEST_CASE("a malformed workspace answer is an error naming the field, never a throw", "[v1]") {
  const json good = v1::ToJson(FullWorkspace());
  for (const char* field : {"id", "name", "tenant", "image", "image_version", "cpus",
                            "memory_mib", "disk_gib", "idle_timeout", "idle_action",
                            "auto_start", "env", "labels", "state", "transport", "created_at",
                            "updated_at"}) {
    json missing = good;
    missing.erase(field);
    CheckRejected(v1::WorkspaceFromJson(missing), field);
  }
  auto with = [&](const char* field, json value) {
    json j = good;
    j[field] = std::move(value);
    return v1::WorkspaceFromJson(j);
  };
  CheckRejected(with("id", 5), "id");
  CheckRejected(with("cpus", "2"), "cpus");
  CheckRejected(with("cpus", 2.5), "cpus");
  CheckRejected(with("cpus", 0), "cpus");
  CheckRejected(with("memory_mib", 18446744073709551615ull), "memory_mib");
  CheckRejected(with("idle_timeout", -1), "idle_timeout");
  CheckRejected(with("max_runtime", "8h"), "max_runtime");
  CheckRejected(with("auto_start", "yes"), "auto_start");
  CheckRejected(with("state", "sleeping"), "state");
  CheckRejected(with("idle_action", "explode"), "idle_action");
  CheckRejected(with("created_at", "yesterday"), "created_at");
  CheckRejected(with("created_at", 1764452735), "created_at");
  CheckRejected(with("started_at", "2026-02-30T00:00:00Z"), "started_at");
  CheckRejected(with("env", json::array()), "env");
  CheckRejected(with("labels", {{"team", 1}}), "labels");
  CheckRejected(with("name", std::string(100'000, 'x')), "name");
  CheckRejected(with("error", std::string(100'000, 'x')), "error");
  CheckRejected(with("awake", {{"reasons", "busy"}}), "reasons");
  CheckRejected(with("awake", {{"reasons", {1, 2}}}), "reasons");
  CheckRejected(with("awake", 7), "awake");
  json big_env = json::object();
  for (int i = 0; i < 2000; ++i) big_env[fmt::format("V{}", i)] = "x";
  CheckRejected(with("env", big_env), "env");
  for (const json& not_object : {json(nullptr), json("ws"), json::array({good}), json(3)}) {
    CHECK_NOTHROW(v1::WorkspaceFromJson(not_object));
    CHECK_FALSE(v1::WorkspaceFromJson(not_object).has_value());
  }
  // Deeply nested garbage parses into an error, not a crash. 1,000 levels: far past
  // ParseJson's limit, and building and copying it here (nlohmann recurses) stays within the
  // stack of the ASan build, whose -O0 frames are many times larger.
  std::string nested(1'000, '[');
  nested += std::string(1'000, ']');
  auto deep = json::parse(nested, nullptr, false);
  CHECK_NOTHROW(v1::WorkspaceFromJson(deep));
  json page = {{"workspaces", deep}, {"next", nullptr}};
  CHECK_FALSE(v1::WorkspacePageFromJson(page).has_value());
}

TEST_CASE("a workspace page is bounded, and its next cursor optional", "[v1]") {
  json one = v1::ToJson(FullWorkspace());
  v1::WorkspacePage page;
  page.workspaces = {FullWorkspace(), FullWorkspace()};
  page.next = "ws_0123456789abcdef";
  json j = v1::ToJson(page);
  auto back = v1::WorkspacePageFromJson(j);
  REQUIRE(back);
  CHECK(back->workspaces.size() == 2);
  CHECK(back->next == "ws_0123456789abcdef");
  j["next"] = nullptr;
  CHECK_FALSE(v1::WorkspacePageFromJson(j)->next);
  j["next"] = "";
  CHECK_FALSE(v1::WorkspacePageFromJson(j)->next);
  j["next"] = 5;
  CHECK_FALSE(v1::WorkspacePageFromJson(j).has_value());

  json huge = {{"workspaces", json::array()}, {"next", nullptr}};
  for (int i = 0; i < v1::kMaxPageSize + 2; ++i) huge["workspaces"].push_back(one);
  auto refused = v1::WorkspacePageFromJson(huge);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("more than") != std::string::npos);

  json bad_item = {{"workspaces", {one, {{"id", "ws_x"}}}}, {"next", nullptr}};
  auto item = v1::WorkspacePageFromJson(bad_item);
  REQUIRE_FALSE(item);
  CHECK(item.error().message.find("workspaces[1]") != std::string::npos);
  CHECK_FALSE(v1::WorkspacePageFromJson(json::object()).has_value());
}

TEST_CASE("the list query carries the filter, percent-encoded", "[v1]") {
  v1::WorkspaceFilter filter;
  filter.state = v1::State::kHibernated;
  filter.labels = {{"team", "a b"}, {"tier", "x&y=z"}};
  CHECK(v1::ListQuery(filter, 50, "ws_x") ==
        "?limit=50&state=hibernated&label=team%3Da%20b&label=tier%3Dx%26y%3Dz&after=ws_x");
  CHECK(v1::ListQuery({}, 100) == "?limit=100");
}

TEST_CASE("create and patch bodies carry only what is set; unknown fields are refused", "[v1]") {
  v1::CreateWorkspace create;
  create.name = "proj";
  CHECK(v1::ToJson(create) == json({{"name", "proj"}}));
  create.max_runtime = 3600;
  create.idle_action = v1::IdleAction::kHibernate;
  create.labels = v1::StringMap{{"a", "b"}};
  create.auto_start = false;
  json j = v1::ToJson(create);
  CHECK(j == json({{"name", "proj"},
                   {"max_runtime", 3600},
                   {"idle_action", "hibernate"},
                   {"labels", {{"a", "b"}}},
                   {"auto_start", false}}));
  auto back = v1::CreateWorkspaceFromJson(j);
  REQUIRE(back);
  CHECK(v1::ToJson(*back) == j);
  j["surprise"] = 1;
  auto refused = v1::CreateWorkspaceFromJson(j);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("unknown field 'surprise'") != std::string::npos);
  CHECK_FALSE(v1::CreateWorkspaceFromJson(json({{"image", "base"}})).has_value());  // no name
  CHECK_FALSE(v1::CreateWorkspaceFromJson(json({{"name", "x"}, {"cpus", "2"}})).has_value());

  // max_runtime: unchanged, cleared, or set.
  v1::PatchWorkspace unchanged;
  unchanged.auto_start = true;
  CHECK_FALSE(v1::ToJson(unchanged).contains("max_runtime"));
  v1::PatchWorkspace cleared;
  cleared.max_runtime = std::optional<int64_t>();
  CHECK(v1::ToJson(cleared) == json({{"max_runtime", nullptr}}));
  auto clear_back = v1::PatchWorkspaceFromJson(v1::ToJson(cleared));
  REQUIRE(clear_back);
  REQUIRE(clear_back->max_runtime.has_value());
  CHECK_FALSE(clear_back->max_runtime->has_value());
  auto set_back = v1::PatchWorkspaceFromJson(json({{"max_runtime", 120}}));
  REQUIRE(set_back);
  CHECK(set_back->max_runtime == std::optional<int64_t>(120));
  CHECK_FALSE(v1::PatchWorkspaceFromJson(json({{"image", "desktop"}})).has_value());
  CHECK(v1::ToJson(v1::WaitRequest(v1::State::kStopped, 30)) ==
        json({{"state", "stopped"}, {"timeout_s", 30}}));
}

TEST_CASE("events, follow lines and usage round-trip; malformed ones are refused", "[v1]") {
  v1::Event e;
  e.id = 42;
  e.workspace = "ws_1";
  e.at = 1'764'452'735;
  e.type = "stopped_by_idle";
  e.message = "idle for 30m";
  e.data = {{"idle_s", 1800}};
  json j = v1::ToJson(e);
  CHECK(j["at"] == "2025-11-29T21:45:35Z");
  auto back = v1::EventFromJson(j);
  REQUIRE(back);
  CHECK(v1::ToJson(*back) == j);
  auto list = v1::EventListFromJson(v1::EventListJson({e, e}));
  REQUIRE(list);
  CHECK(list->size() == 2);

  auto keepalive = v1::FollowLineFromJson(json::parse(v1::kKeepaliveLine));
  REQUIRE(keepalive);
  CHECK_FALSE(keepalive->has_value());
  auto line = v1::FollowLineFromJson(j);
  REQUIRE(line);
  CHECK((*line)->id == 42);
  CHECK_FALSE(v1::FollowLineFromJson(json({{"type", "started"}})).has_value());

  json no_data = j;
  no_data.erase("data");
  CHECK_FALSE(v1::EventFromJson(no_data).has_value());
  json list_data = j;
  list_data["data"] = json::array();
  CHECK_FALSE(v1::EventFromJson(list_data).has_value());
  json big = j;
  big["data"] = {{"blob", std::string(100'000, 'x')}};
  CHECK_FALSE(v1::EventFromJson(big).has_value());
  json too_many = {{"events", json::array()}};
  for (int i = 0; i <= v1::kMaxEventPage; ++i) too_many["events"].push_back(j);
  CHECK_FALSE(v1::EventListFromJson(too_many).has_value());

  v1::Usage usage;
  usage.from = 1'764'000'000;
  usage.to = 1'764'452'735;
  v1::UsageRow row;
  row.workspace = "ws_1";
  row.size = "small";
  row.seconds = 3600;
  row.vcpu_seconds = 3600;
  usage.workspaces = {row};
  usage.total_seconds = 3600;
  usage.total_vcpu_seconds = 3600;
  json u = v1::ToJson(usage);
  CHECK(u["workspaces"][0]["name"].is_null());
  auto usage_back = v1::UsageFromJson(u);
  REQUIRE(usage_back);
  CHECK(v1::ToJson(*usage_back) == u);
  json no_total = u;
  no_total.erase("total");
  CHECK_FALSE(v1::UsageFromJson(no_total).has_value());
  u["workspaces"][0]["seconds"] = -5;
  CHECK_FALSE(v1::UsageFromJson(u).has_value());
}

TEST_CASE("identity, tenants and keys round-trip; an unknown scope is refused", "[v1]") {
  v1::Me me;
  me.tenant_id = "tn_1";
  me.tenant_name = "default";
  me.key_id = "key_1";
  me.key_prefix = "bk_12345678";
  me.scope = v1::Scope::kAdmin;
  json j = v1::ToJson(me);
  CHECK(j == json({{"tenant", {{"id", "tn_1"}, {"name", "default"}}},
                   {"key", {{"id", "key_1"}, {"prefix", "bk_12345678"}, {"scope", "admin"}}}}));
  auto back = v1::MeFromJson(j);
  REQUIRE(back);
  CHECK(back->scope == v1::Scope::kAdmin);
  // Every scope berthd writes reads back as itself (an operator key is no reader).
  for (auto scope : {v1::Scope::kRead, v1::Scope::kWrite, v1::Scope::kAdmin, v1::Scope::kOperator}) {
    me.scope = scope;
    auto round = v1::MeFromJson(v1::ToJson(me));
    REQUIRE(round);
    CHECK(round->scope == scope);
  }
  CHECK(v1::ScopeName(v1::Scope::kOperator) == "operator");
  j["key"]["scope"] = "root";
  CHECK_FALSE(v1::MeFromJson(j).has_value());
  CHECK_FALSE(v1::MeFromJson(json({{"tenant", {{"id", "tn_1"}, {"name", "x"}}}})).has_value());

  v1::NewKey key;
  key.record.id = "key_2";
  key.record.tenant = "tn_1";
  key.record.prefix = "bk_abcdefgh";
  key.record.scope = v1::Scope::kRead;
  key.record.name = "ci";
  key.record.created_at = 1'764'452'735;
  key.secret = "bk_" + std::string(64, 'a');
  key.tenant_name = "default";
  json k = v1::ToJson(key);
  CHECK(k["last_used_at"].is_null());
  CHECK(k["key"] == key.secret);
  auto key_back = v1::NewKeyFromJson(k);
  REQUIRE(key_back);
  CHECK(v1::ToJson(*key_back) == k);
  auto keys = v1::KeyListFromJson(v1::KeyListJson({key.record}));
  REQUIRE(keys);
  CHECK(keys->at(0).name == "ci");

  v1::Tenant tenant;
  tenant.id = "tn_2";
  tenant.name = "other";
  tenant.created_at = 1'764'452'735;
  auto tenants = v1::TenantListFromJson(v1::TenantListJson({tenant}));
  REQUIRE(tenants);
  CHECK(tenants->at(0).name == "other");
  CHECK_FALSE(v1::TenantListFromJson(json({{"tenants", {{{"id", "tn"}}}}})).has_value());
  CHECK(v1::ToJson(v1::CreateKey()) == json({{"scope", "write"}}));
}

TEST_CASE("times are ISO 8601 UTC both ways, strictly", "[v1]") {
  CHECK(v1::FormatTime(0) == "1970-01-01T00:00:00Z");
  for (int64_t t : {int64_t{0}, int64_t{951'782'400} /* 2000-02-29 */, int64_t{1'764'452'735},
                    int64_t{4'102'444'799}}) {
    INFO(t);
    CHECK(v1::ParseTime(v1::FormatTime(t)).value() == t);
  }
  CHECK(v1::ParseTime("2025-11-29T21:45:35.123456Z").value() == 1'764'452'735);
  CHECK(v1::ParseTime("2025-11-29T21:45:35+00:00").value() == 1'764'452'735);
  for (std::string_view bad : {"", "yesterday", "2025-11-29", "2025-11-29T21:45:35",
                               "2025-11-29T21:45:35+02:00", "2025-02-29T00:00:00Z",
                               "2025-11-29T24:00:00Z", "2025-13-01T00:00:00Z",
                               "2025-11-29T21:45:35.Z", "2025-1a-29T21:45:35Z",
                               "1969-12-31T23:59:59Z"}) {
    INFO(bad);
    CHECK_FALSE(v1::ParseTime(bad));
  }
  // What a caller types in ?from= and ?to=.
  CHECK(v1::ParseTimeArgument("1764452735").value() == 1'764'452'735);
  CHECK(v1::ParseTimeArgument("2025-11-29T21:45:35").value() == 1'764'452'735);
  CHECK(v1::ParseTimeArgument("2025-11-29T21:45:35Z").value() == 1'764'452'735);
  CHECK_FALSE(v1::ParseTimeArgument("1764452735000000"));
  CHECK_FALSE(v1::ParseTimeArgument("last week"));
}
