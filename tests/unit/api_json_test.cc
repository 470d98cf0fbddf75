// berthd's answers are built from the v1 wire types (controller/api/json.cc): the JSON is what
// docs/api.md shows (the same as before the wire types), the clients' parsers read it back
// unchanged, and the request bodies the clients build are what berthd's own parsers take.
#include <catch2/catch.hpp>

#include "common/v1/time.h"
#include "controller/api/json.h"
#include "controller/workspace/request.h"

using namespace berth;
using nlohmann::json;

namespace {

workspace::Workspace Record() {
  workspace::Workspace ws;
  ws.id = "ws_0123456789abcdef";
  ws.tenant_id = "tn_1";
  ws.name = "api-server";
  ws.image = "base";
  ws.image_version = "20260101";
  ws.size = "small";
  ws.vcpus = 1;
  ws.memory_mib = 1024;
  ws.disk_gib = 10;
  ws.idle_timeout_s = 1800;
  ws.idle_action = workspace::IdleAction::kStop;
  ws.auto_start = true;
  ws.env = {{"GREETING", "hello"}};
  ws.labels = {{"team", "infra"}};
  ws.state = workspace::State::kRunning;
  ws.transport = "forward";
  ws.uuid = "not-on-the-wire";
  ws.created_at = 1'764'452'735;
  ws.updated_at = 1'764'452'800;
  ws.started_at = 1'764'452'900;
  ws.agent_port = 40000;
  return ws;
}

}  // namespace

TEST_CASE("a workspace answer is the documented JSON, and the clients read it back", "[api]") {
  workspace::AwakeInfo awake;
  awake.reasons = {"exec stream"};
  awake.idle_at = 1'764'454'700;
  json j = api::WorkspaceJson(Record(), awake);
  // Field for field what WorkspaceJson answered before the wire types (docs/api.md).
  json expected = json::parse(R"({
    "id": "ws_0123456789abcdef", "name": "api-server", "tenant": "tn_1",
    "image": "base", "image_version": "20260101", "size": "small",
    "cpus": 1, "memory_mib": 1024, "disk_gib": 10,
    "idle_timeout": 1800, "idle_action": "stop", "max_runtime": null, "checkpoints": null, "auto_start": true,
    "screen": "1280x800",
    "env": {"GREETING": "hello"}, "labels": {"team": "infra"},
    "state": "running", "error": null, "transport": "forward", "forked_from": null,
    "created_at": "2025-11-29T21:45:35Z", "updated_at": "2025-11-29T21:46:40Z",
    "started_at": "2025-11-29T21:48:20Z", "last_active_at": null,
    "awake": {"reasons": ["exec stream"], "idle_at": "2025-11-29T22:18:20Z"},
    "network": {"egress": "open", "allow": []}
  })");
  CHECK(j == expected);
  auto parsed = v1::WorkspaceFromJson(j);
  REQUIRE(parsed);
  CHECK(v1::ToJson(*parsed) == j);

  // `awake` only while running.
  auto stopped = Record();
  stopped.state = workspace::State::kStopped;
  stopped.error = "shut down by the guest";
  json s = api::WorkspaceJson(stopped, awake);
  CHECK_FALSE(s.contains("awake"));
  CHECK(s["error"] == "shut down by the guest");
  CHECK(v1::WorkspaceFromJson(s).has_value());
}

TEST_CASE("every state the service has is a state of the wire", "[api]") {
  for (auto state : {workspace::State::kCreating, workspace::State::kStarting,
                     workspace::State::kRunning, workspace::State::kStopping,
                     workspace::State::kStopped, workspace::State::kHibernating,
                     workspace::State::kHibernated, workspace::State::kDeleting,
                     workspace::State::kError}) {
    INFO(workspace::StateName(state));
    CHECK(v1::StateName(api::StateWire(state)) == workspace::StateName(state));
    CHECK(v1::StateFromName(workspace::StateName(state)) == api::StateWire(state));
  }
}

TEST_CASE("events, tenants and keys are the documented JSON", "[api]") {
  store::Event e;
  e.id = 7;
  e.workspace_id = "ws_1";
  e.at = 1'764'452'735;
  e.type = "woken";
  e.message = "a request started it";
  e.data = {{"by", "exec"}};
  e.actor = "key_1";
  json j = api::EventJson(e);
  CHECK(j == json::parse(R"({"id": 7, "at": "2025-11-29T21:45:35Z", "type": "woken",
                             "message": "a request started it", "data": {"by": "exec"},
                             "workspace": "ws_1", "actor": "key_1"})"));
  CHECK(v1::EventFromJson(j).value().actor == "key_1");
  // From a berthd before actors: berthd's own.
  j.erase("actor");
  CHECK(v1::EventFromJson(j).value().actor == "system");

  store::ApiKey k;
  k.id = "key_1";
  k.tenant_id = "tn_1";
  k.prefix = "bk_12345678";
  k.scope = "write";
  k.name = "ci";
  k.created_at = 1'764'452'735;
  k.revoked_at = 1'764'452'800;
  json key = api::KeyJson(k);
  CHECK(key == json::parse(R"({"id": "key_1", "tenant": "tn_1", "prefix": "bk_12345678",
                               "scope": "write", "name": "ci",
                               "created_at": "2025-11-29T21:45:35Z", "last_used_at": null,
                               "revoked_at": "2025-11-29T21:46:40Z"})"));
  CHECK(v1::ApiKeyFromJson(key).has_value());

  store::Tenant t;
  t.id = "tn_1";
  t.name = "default";
  t.created_at = 1'764'452'735;
  CHECK(api::TenantJson(t) ==
        json({{"id", "tn_1"}, {"name", "default"}, {"created_at", "2025-11-29T21:45:35Z"}}));
}

TEST_CASE("the create and patch bodies clients build are what berthd parses", "[api]") {
  v1::CreateWorkspace create;
  create.name = "proj";
  create.image = "base";
  create.cpus = 2;
  create.memory_mib = 2048;
  create.disk_gib = 20;
  create.idle_timeout = 600;
  create.idle_action = v1::IdleAction::kHibernate;
  create.max_runtime = 8 * 3600;
  create.auto_start = false;
  create.env = v1::StringMap{{"A", "1"}};
  create.labels = v1::StringMap{{"team", "x"}};
  create.screen = "1920x1080";
  auto parsed = workspace::ParseCreateRequest(v1::ToJson(create));
  INFO((parsed ? "" : parsed.error().message));
  REQUIRE(parsed);
  CHECK(parsed->name == "proj");
  CHECK(parsed->vcpus == 2);
  CHECK(parsed->memory_mib == 2048);
  CHECK_FALSE(parsed->size);
  CHECK(parsed->disk_gib == 20);
  CHECK(parsed->idle_timeout_s == 600);
  CHECK(parsed->idle_action == workspace::IdleAction::kHibernate);
  CHECK(parsed->max_runtime_s == 8 * 3600);
  CHECK_FALSE(parsed->auto_start);
  CHECK(parsed->env == json({{"A", "1"}}));
  CHECK(parsed->labels == json({{"team", "x"}}));
  CHECK(parsed->screen == "1920x1080");

  v1::PatchWorkspace patch;
  patch.name = "renamed";
  patch.idle_action = v1::IdleAction::kStop;
  patch.max_runtime = std::optional<int64_t>();  // clear it
  patch.env = v1::StringMap{{"B", "2"}};
  auto ws = Record();
  ws.max_runtime_s = 3600;
  auto applied = workspace::ApplyPatch(v1::ToJson(patch), ws);
  INFO((applied ? "" : applied.error().message));
  REQUIRE(applied);
  CHECK(ws.name == "renamed");
  CHECK_FALSE(ws.max_runtime_s);
  CHECK(ws.env == json({{"B", "2"}}));
}

TEST_CASE("a desktop screen size is WIDTHxHEIGHT within bounds, the width a multiple of 8", "[api]") {
  auto screen = [](json value) {
    return workspace::ParseCreateRequest(json{{"name", "desk"}, {"screen", std::move(value)}});
  };
  CHECK(workspace::ParseCreateRequest(json{{"name", "desk"}}).value().screen == "1280x800");
  CHECK(screen("1024x768").value().screen == "1024x768");
  CHECK(screen("3840x2160").value().screen == "3840x2160");
  for (const char* bad : {"1366x768" /* not a multiple of 8 */, "632x480", "3848x2160", "1280x479", "1280x2161",
                          "1280X800", "1280x", "x800", "01280x800", "1280x800x1", " 1280x800", "-1280x800", ""}) {
    INFO(bad);
    auto parsed = screen(bad);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == ErrorCode::kInvalidArgument);
  }
  CHECK_FALSE(screen(1280));
}

TEST_CASE("query times take ISO 8601 or unix seconds, as before", "[api]") {
  CHECK(api::ParseTime("1764452735").value() == 1'764'452'735);
  CHECK(api::ParseTime("2025-11-29T21:45:35Z").value() == 1'764'452'735);
  CHECK(api::ParseTime("2025-11-29T21:45:35").value() == 1'764'452'735);
  CHECK_FALSE(api::ParseTime("tomorrow"));
  CHECK(api::IsoTime(0) == "1970-01-01T00:00:00Z");
  CHECK(api::IsoOrNull(std::nullopt).is_null());
}
