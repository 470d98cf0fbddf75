#include <catch2/catch.hpp>

#include "controller/store/store.h"
#include "tests/support/temp_dir.h"

using namespace berth;
using namespace berth::store;
using berth::workspace::State;
using berth::workspace::Workspace;

namespace {

Workspace MakeWorkspace(const std::string& id, const std::string& tenant, const std::string& name) {
  Workspace ws;
  ws.id = id;
  ws.tenant_id = tenant;
  ws.name = name;
  ws.image = "base";
  ws.image_version = "abc";
  ws.size = "small";
  ws.transport = "forward";
  ws.uuid = "uuid-" + id;
  ws.created_at = ws.updated_at = 100;
  return ws;
}

}  // namespace

TEST_CASE("workspaces are found only by their tenant, by id or by name", "[store]") {
  auto store = Store::Open(":memory:");
  REQUIRE(store);
  Store& s = **store;
  REQUIRE(s.CreateTenant("a", 1));
  REQUIRE(s.CreateTenant("b", 1));
  CHECK(s.CreateTenant("a", 1).error().code == ErrorCode::kAlreadyExists);

  auto ws = MakeWorkspace("ws_1", "t_a", "proj");
  ws.labels = {{"team", "x"}};
  REQUIRE(s.InsertWorkspace(ws));
  CHECK(s.GetWorkspace("t_a", "ws_1").value().name == "proj");
  CHECK(s.GetWorkspace("t_a", "proj").value().id == "ws_1");
  CHECK(s.GetWorkspace("t_b", "ws_1").error().code == ErrorCode::kNotFound);
  CHECK(s.GetWorkspace("t_b", "proj").error().code == ErrorCode::kNotFound);

  // Names are unique per tenant, not globally.
  CHECK(s.InsertWorkspace(MakeWorkspace("ws_2", "t_a", "proj")).error().code ==
        ErrorCode::kAlreadyExists);
  REQUIRE(s.InsertWorkspace(MakeWorkspace("ws_3", "t_b", "proj")));

  auto updated = s.GetWorkspace("t_a", "ws_1").value();
  updated.state = State::kRunning;
  updated.error = "none";
  updated.started_at = 200;
  REQUIRE(s.UpdateWorkspace(updated));
  auto read = s.GetWorkspaceById("ws_1").value();
  CHECK(read.state == State::kRunning);
  CHECK(read.started_at == 200);
  CHECK(read.labels["team"] == "x");
}

TEST_CASE("listing filters by state and label and paginates", "[store]") {
  auto store = Store::Open(":memory:");
  Store& s = **store;
  REQUIRE(s.CreateTenant("a", 1));
  for (int i = 0; i < 5; ++i) {
    auto ws = MakeWorkspace("ws_" + std::to_string(i), "t_a", "n" + std::to_string(i));
    ws.state = i % 2 == 0 ? State::kRunning : State::kStopped;
    ws.labels = {{"env", i < 3 ? "dev" : "prod"}};
    REQUIRE(s.InsertWorkspace(ws));
  }
  WorkspaceFilter running;
  running.state = State::kRunning;
  CHECK(s.ListWorkspaces("t_a", running).value().size() == 3);
  WorkspaceFilter dev;
  dev.labels = {{"env", "dev"}};
  CHECK(s.ListWorkspaces("t_a", dev).value().size() == 3);
  WorkspaceFilter page;
  page.limit = 2;
  auto first = s.ListWorkspaces("t_a", page).value();
  REQUIRE(first.size() == 2);
  page.after_id = first.back().id;
  auto second = s.ListWorkspaces("t_a", page).value();
  REQUIRE(second.size() == 2);
  CHECK(second.front().id > first.back().id);
  CHECK(s.ListWorkspaces("t_other", {}).value().empty());
}

TEST_CASE("keys are found by hash until revoked", "[store]") {
  auto store = Store::Open(":memory:");
  Store& s = **store;
  REQUIRE(s.CreateTenant("a", 1));
  ApiKey key{"key_1", "t_a", "bk_abcd", "write", "ci", 5, std::nullopt, std::nullopt};
  REQUIRE(s.InsertKey(key, "hash1"));
  CHECK(s.FindKeyByHash("hash1").value().scope == "write");
  CHECK(s.FindKeyByHash("nope").error().code == ErrorCode::kUnauthenticated);
  REQUIRE(s.RevokeKey("key_1", 9));
  CHECK(s.FindKeyByHash("hash1").error().code == ErrorCode::kUnauthenticated);
  CHECK(s.RevokeKey("key_1", 9).error().code == ErrorCode::kNotFound);
  CHECK(s.ListKeys(std::nullopt).value().at(0).revoked_at == 9);
}

TEST_CASE("usage counts running seconds clipped to the range", "[store]") {
  auto store = Store::Open(":memory:");
  Store& s = **store;
  REQUIRE(s.CreateTenant("a", 1));
  auto ws = MakeWorkspace("ws_1", "t_a", "n");
  ws.vcpus = 2;
  REQUIRE(s.InsertWorkspace(ws));
  REQUIRE(s.OpenUsage(ws, 100));
  REQUIRE(s.CloseUsage("ws_1", 160));
  REQUIRE(s.OpenUsage(ws, 200));  // still running at now=250
  auto all = s.Usage("t_a", 0, 1000, 250).value();
  REQUIRE(all.size() == 1);
  CHECK(all[0].seconds == 60 + 50);
  CHECK(all[0].vcpu_seconds == 2 * 110);
  auto clipped = s.Usage("t_a", 150, 210, 250).value();
  CHECK(clipped[0].seconds == 10 + 10);
  // A workspace that started this very second (the default range ends at now) is listed.
  auto fresh = MakeWorkspace("ws_2", "t_a", "fresh");
  REQUIRE(s.InsertWorkspace(fresh));
  REQUIRE(s.OpenUsage(fresh, 250));
  auto now_range = s.Usage("t_a", 0, 250, 250).value();
  REQUIRE(now_range.size() == 2);
  CHECK(now_range[1].workspace_id == "ws_2");
  CHECK(now_range[1].seconds == 0);
  // Before its range: not listed.
  CHECK(s.Usage("t_a", 0, 99, 250).value().empty());
}

TEST_CASE("events list in order after a cursor; state survives reopening", "[store]") {
  testing::TempDir dir;
  {
    auto store = Store::Open(dir / "berth.db");
    REQUIRE(store);
    REQUIRE((*store)->CreateTenant("a", 1));
    REQUIRE((*store)->InsertWorkspace(MakeWorkspace("ws_1", "t_a", "n")));
    REQUIRE((*store)->AddEvent("ws_1", "t_a", 1, "created", "created"));
    REQUIRE((*store)->AddEvent("ws_1", "t_a", 2, "started", "started"));
  }
  auto store = Store::Open(dir / "berth.db");
  REQUIRE(store);
  auto events = (*store)->ListEvents("ws_1", 0, 10).value();
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == "created");
  auto after = (*store)->ListEvents("ws_1", events[0].id, 10).value();
  REQUIRE(after.size() == 1);
  CHECK(after[0].type == "started");
  REQUIRE((*store)->DeleteWorkspace("ws_1"));
  CHECK((*store)->GetWorkspaceById("ws_1").error().code == ErrorCode::kNotFound);
}

TEST_CASE("store: a workspace keeps its network uid; new ones take the lowest free", "[store][network]") {
  auto store = berth::store::Store::Open(":memory:");
  REQUIRE(store);
  auto& s = **store;
  REQUIRE(s.CreateTenant("t", 1));
  auto make = [&](const std::string& id) {
    berth::workspace::Workspace ws;
    ws.id = id;
    ws.tenant_id = "t_t";
    ws.name = id.substr(3);
    ws.image = "base";
    ws.image_version = "v1";
    ws.transport = "forward";
    ws.uuid = "uuid-" + id;
    REQUIRE(s.InsertWorkspace(ws));
  };
  make("ws_a");
  make("ws_b");
  make("ws_c");
  CHECK(s.AssignNetworkUid("ws_a", 5000, 3).value() == 5000);
  CHECK(s.AssignNetworkUid("ws_b", 5000, 3).value() == 5001);
  CHECK(s.AssignNetworkUid("ws_a", 5000, 3).value() == 5000);  // kept
  // An UpdateWorkspace from a copy read before the uid was assigned does not drop it.
  auto stale = s.GetWorkspaceById("ws_a").value();
  stale.net_uid.reset();
  REQUIRE(s.UpdateWorkspace(stale));
  CHECK(s.GetWorkspaceById("ws_a")->net_uid == 5000);
  REQUIRE(s.DeleteWorkspace("ws_a"));
  CHECK(s.AssignNetworkUid("ws_c", 5000, 3).value() == 5000);  // freed by the delete
  make("ws_d");
  CHECK(s.AssignNetworkUid("ws_d", 5000, 3).value() == 5002);
  make("ws_e");
  auto full = s.AssignNetworkUid("ws_e", 5000, 3);
  REQUIRE_FALSE(full);
  CHECK(full.error().code == berth::ErrorCode::kResourceExhausted);
  CHECK(s.AssignNetworkUid("ws_nope", 5000, 3).error().code == berth::ErrorCode::kNotFound);
}

TEST_CASE("store: the network policy is stored with the workspace", "[store][network]") {
  auto store = berth::store::Store::Open(":memory:");
  REQUIRE(store);
  auto& s = **store;
  REQUIRE(s.CreateTenant("t", 1));
  berth::workspace::Workspace ws;
  ws.id = "ws_p";
  ws.tenant_id = "t_t";
  ws.name = "p";
  ws.image = "base";
  ws.image_version = "v1";
  ws.transport = "forward";
  ws.uuid = "uuid-p";
  REQUIRE(s.InsertWorkspace(ws));
  CHECK(s.GetWorkspaceById("ws_p")->network.egress == berth::network::Egress::kOpen);
  ws.network = berth::network::ParsePolicy(nlohmann::json::parse(R"({"allow":["github.com","10.0.0.0/8"]})")).value();
  REQUIRE(s.UpdateWorkspace(ws));
  auto back = s.GetWorkspaceById("ws_p").value();
  CHECK(back.network == ws.network);
}

TEST_CASE("a workspace's change and its event are written together or not at all", "[store]") {
  auto store = Store::Open(":memory:");
  REQUIRE(store);
  Store& s = **store;
  REQUIRE(s.CreateTenant("a", 1));  // t_a
  NewEvent created{100, "created", "", {{"state", "creating"}}};
  auto first = s.InsertWorkspace(MakeWorkspace("ws_1", "t_a", "proj"), created, "key-1");
  REQUIRE(first);
  CHECK(first->type == "created");
  CHECK(s.FindIdempotencyKey("t_a", "key-1").value() == std::optional<std::string>("ws_1"));

  // A second workspace of that name: no row, no event, no key.
  CHECK(s.InsertWorkspace(MakeWorkspace("ws_2", "t_a", "proj"), created, "key-2").error().code ==
        ErrorCode::kAlreadyExists);
  CHECK_FALSE(s.GetWorkspaceById("ws_2").has_value());
  CHECK(s.ListEvents("ws_2", 0, 10)->empty());
  CHECK_FALSE(s.FindIdempotencyKey("t_a", "key-2").value().has_value());

  // An update of a workspace that is not there adds no event.
  auto ghost = MakeWorkspace("ws_ghost", "t_a", "ghost");
  CHECK(s.UpdateWorkspace(ghost, NewEvent{101, "stopping", "", nlohmann::json::object()}).error().code == ErrorCode::kNotFound);
  CHECK(s.ListEvents("ws_ghost", 0, 10)->empty());

  auto ws = s.GetWorkspaceById("ws_1").value();
  ws.state = State::kRunning;
  auto started = s.UpdateWorkspace(ws, NewEvent{102, "started", "", {{"state", "running"}}});
  REQUIRE(started);
  CHECK(s.GetWorkspaceById("ws_1")->state == State::kRunning);

  auto deleted = s.DeleteWorkspace("ws_1", "t_a", NewEvent{103, "deleted", "", nlohmann::json::object()});
  REQUIRE(deleted);
  CHECK_FALSE(s.GetWorkspaceById("ws_1").has_value());
  CHECK_FALSE(s.FindIdempotencyKey("t_a", "key-1").value().has_value());
  std::vector<std::string> types;
  auto events = s.ListEvents("ws_1", 0, 10);
  REQUIRE(events);
  for (const auto& e : *events) types.push_back(e.type);
  CHECK(types == std::vector<std::string>{"created", "started", "deleted"});
}

TEST_CASE("store: events carry their actor and are picked by type, family, actor, kind and time",
          "[store][timeline]") {
  auto store = Store::Open(":memory:");
  REQUIRE(store);
  auto& s = **store;
  auto add = [&](int64_t at, const std::string& type, const std::string& actor) {
    REQUIRE(s.AddEvent("ws_1", "t_a", NewEvent{at, type, "", nlohmann::json::object(), actor}));
  };
  add(10, "created", "key_1");
  add(20, "exec", "key_2");
  add(30, "desktop_control_taken", "key_1");
  add(40, "desktop_input", "system");
  add(50, "exec", "key_1");
  add(60, "preview_token_used", "preview");
  REQUIRE(s.AddEvent("ws_2", "t_a", 70, "exec", ""));  // another workspace; berthd's by default

  auto pick = [&](EventFilter f) {
    std::vector<std::string> out;
    auto listed = s.ListEvents("ws_1", f);
    REQUIRE(listed.has_value());
    for (const auto& e : *listed) out.push_back(e.type + "@" + e.actor);
    return out;
  };
  using V = std::vector<std::string>;
  EventFilter f;
  f.types = {"exec"};
  CHECK(pick(f) == V{"exec@key_2", "exec@key_1"});
  f.types = {"desktop_*", "created"};
  CHECK(pick(f) == V{"created@key_1", "desktop_control_taken@key_1", "desktop_input@system"});
  f = {};
  f.actors = {"key_1"};
  CHECK(pick(f) == V{"created@key_1", "desktop_control_taken@key_1", "exec@key_1"});
  f.actors = {"key"};  // a kind: every key, not "keyboard_x" or "system"
  CHECK(pick(f).size() == 4);
  f.actors = {"system", "preview"};
  CHECK(pick(f) == V{"desktop_input@system", "preview_token_used@preview"});
  f = {};
  f.since = 30;
  f.types = {"exec"};
  CHECK(pick(f) == V{"exec@key_1"});
  // The cursor and the limit apply after the filter: pages of matches.
  f = {};
  f.actors = {"key"};
  f.limit = 2;
  auto page = s.ListEvents("ws_1", f).value();
  REQUIRE(page.size() == 2);
  f.after_id = page.back().id;
  CHECK(pick(f) == V{"desktop_control_taken@key_1", "exec@key_1"});
  CHECK(s.ListEvents("ws_2", EventFilter{}).value().at(0).actor == "system");

  // The filter the live follower applies says the same as the SQL.
  EventFilter live;
  live.types = {"desktop_*"};
  live.actors = {"key"};
  CHECK(live.Matches("desktop_control_taken", "key_1", 30));
  CHECK_FALSE(live.Matches("desktop_input", "system", 40));
  CHECK_FALSE(live.Matches("exec", "key_1", 50));
  CHECK_FALSE(live.Matches("desktop_x", "keyboard_1", 50));
}

TEST_CASE("store: each workspace keeps its newest events up to the retention, and no fewer",
          "[store][timeline]") {
  auto store = Store::Open(":memory:");
  REQUIRE(store);
  auto& s = **store;
  s.SetEventRetention(10);  // raised to the floor
  const int64_t keep = kMinEventsKept;
  const int64_t added = keep + 3 * Store::kEventPruneBatch + 5;
  for (int64_t i = 0; i < added; ++i) REQUIRE(s.AddEvent("ws_busy", "t_a", i, "exec", std::to_string(i)));
  for (int i = 0; i < 3; ++i) REQUIRE(s.AddEvent("ws_quiet", "t_a", i, "exec", ""));
  EventFilter all;
  all.limit = 100000;
  auto busy = s.ListEvents("ws_busy", all).value();
  // Never fewer than `keep`, never more than a batch over it, and always the newest.
  CHECK(static_cast<int64_t>(busy.size()) >= keep);
  CHECK(static_cast<int64_t>(busy.size()) < keep + Store::kEventPruneBatch);
  CHECK(busy.back().message == std::to_string(added - 1));
  CHECK(std::stoll(busy.front().message) == added - static_cast<int64_t>(busy.size()));
  CHECK(s.ListEvents("ws_quiet", all).value().size() == 3);  // another workspace's bound is its own
}

TEST_CASE("event filters: lists of types and actors are checked, and none can carry a pattern",
          "[store][timeline]") {
  CHECK(ParseEventTypes("exec,desktop_*").value() == std::vector<std::string>{"exec", "desktop_*"});
  CHECK(ParseEventTypes("exec,,").value() == std::vector<std::string>{"exec"});
  for (const std::string& bad : std::vector<std::string>{"*", "Exec", "exec;drop", "de*sk", "a?", "[a]", "exec**",
                                                         std::string(65, 'a')}) {
    INFO(bad);
    CHECK(ParseEventTypes(bad).error().code == ErrorCode::kInvalidArgument);
  }
  CHECK(ParseEventActors("key_1,system").value() == std::vector<std::string>{"key_1", "system"});
  for (const std::string& bad : std::vector<std::string>{"key_*", "a b", "key_k?", "x[1]", std::string(129, 'a')}) {
    INFO(bad);
    CHECK(ParseEventActors(bad).error().code == ErrorCode::kInvalidArgument);
  }
  std::string many;
  for (size_t i = 0; i <= kMaxFilterEntries; ++i) many += "t" + std::to_string(i) + ",";
  CHECK(ParseEventTypes(many).error().code == ErrorCode::kInvalidArgument);
}
