// Per-tenant quotas and the host-disk floor (issue 12, "Floods and stalls"), through berthd's
// API on the unix transport (real host agents, no VMs): each limit refuses with 429
// quota_exceeded naming it and leaves nothing behind; parallel creates and starts take
// exactly what the limit allows; the operator reads and sets limits and a tenant's admin
// cannot; a host short of disk refuses creates with 507 insufficient_storage.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "common/client/berth_client.h"
#include "common/client/exec.h"
#include "common/json.h"
#include "controller/workspace/host_disk.h"
#include "controller/workspace/quota.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_berthd.h"
#include "tests/support/wait.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using http::bhttp::verb;
using nlohmann::json;
using testing::TestBerthd;
using testing::WaitFor;

// One daemon for the limit tests; each test has a tenant of its own.
TestBerthd& QuotaBerthd() {
  static TestBerthd berthd;
  return berthd;
}

struct NewTenantKey {
  client::ApiClient api;
  std::string tenant;  // its id
  std::string key;
};

// A new tenant with an admin key of its own.
NewTenantKey NewTenant(TestBerthd& d, const std::string& name) {
  auto op = d.Admin();
  auto tenant = op.Json(verb::post, "/v1/tenants", json{{"name", name}});
  INFO((tenant ? tenant->dump() : tenant.error().message));
  REQUIRE(tenant);
  auto key = op.Json(verb::post, "/v1/keys", json{{"tenant", name}, {"scope", "admin"}});
  INFO((key ? key->dump() : key.error().message));
  REQUIRE(key);
  std::string secret = (*key)["key"];
  return {d.WithKey(secret), (*tenant)["id"].get<std::string>(), secret};
}

void SetLimits(TestBerthd& d, const std::string& tenant, const json& limits) {
  auto op = d.Admin();
  auto set = op.Json(verb::patch, "/v1/tenants/" + tenant, json{{"limits", limits}});
  INFO((set ? set->dump() : set.error().message));
  REQUIRE(set);
}

struct Answer {
  int status = 0;
  json body;
};

Answer Send(client::ApiClient& api, verb method, const std::string& target, const json& body) {
  auto r = body.is_null() ? api.Request(method, target)
                          : api.Request(method, target, DumpJson(body), "application/json");
  REQUIRE(r);
  auto parsed = ParseJson(r->body);
  return Answer{r->status, parsed ? *parsed : json()};
}

std::string StateOf(client::ApiClient& api, const std::string& id) {
  auto ws = api.Json(verb::get, "/v1/workspaces/" + id);
  return ws ? (*ws)["state"].get<std::string>() : "error: " + ws.error().message;
}

std::string CreateRunning(client::ApiClient& api, json body) {
  auto made = api.Json(verb::post, "/v1/workspaces", body);
  INFO((made ? made->dump() : made.error().message));
  REQUIRE(made);
  std::string id = (*made)["id"];
  auto running = api.Json(verb::post, "/v1/workspaces/" + id + "/wait",
                          json{{"state", "running"}, {"timeout_s", 30}});
  INFO((running ? running->dump() : running.error().message));
  REQUIRE(running);
  return id;
}

void StopAndWait(client::ApiClient& api, const std::string& id) {
  REQUIRE(api.Json(verb::post, "/v1/workspaces/" + id + "/stop", json::object()));
  REQUIRE(WaitFor([&] { return StateOf(api, id) == "stopped"; }, std::chrono::seconds(20)));
}

size_t WorkspaceDirs(TestBerthd& d) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(d.data_dir() / "workspaces")) {
    if (entry.is_directory()) ++n;
  }
  return n;
}

size_t Listed(client::ApiClient& api) {
  auto list = api.Json(verb::get, "/v1/workspaces");
  REQUIRE(list);
  return (*list)["workspaces"].size();
}

std::vector<std::string> EventTypes(client::ApiClient& api, const std::string& id) {
  auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
  REQUIRE(events);
  std::vector<std::string> out;
  for (const auto& e : (*events)["events"]) out.push_back(e["type"].get<std::string>());
  return out;
}

// The refusal's shape: 429 quota_exceeded with the limit named in the message and details.
void CheckQuotaRefusal(Answer a, const std::string& limit, int64_t allowed, int64_t in_use,
                       int64_t requested, const std::string& words) {
  INFO(a.body.dump());
  REQUIRE(a.status == 429);
  CHECK(a.body["error"]["code"] == "quota_exceeded");
  CHECK(a.body["error"]["message"].get<std::string>().find(words) != std::string::npos);
  CHECK(a.body["error"]["details"] ==
        json({{"limit", limit}, {"allowed", allowed}, {"in_use", in_use}, {"requested", requested}}));
}

}  // namespace

TEST_CASE("quotas: the pure checks name the first limit passed and leave room at the limit",
          "[quotas]") {
  workspace::Limits limits{2, 8, 4096, 20};
  workspace::QuotaUse in_use{1, 6, 2048, 10};
  CHECK(workspace::CheckQuota("t_a", limits, in_use, {1, 2, 2048, 10}));  // exactly at each
  auto over = workspace::CheckQuota("t_a", limits, in_use, {1, 4, 1024, 1});
  REQUIRE_FALSE(over);
  CHECK(over.error().code == ErrorCode::kQuotaExceeded);
  CHECK(over.error().message.starts_with("tenant t_a would use 10 vCPUs of its limit of 8"));
  CHECK(ParseJson(over.error().details).value() ==
        json({{"limit", "vcpus"}, {"allowed", 8}, {"in_use", 6}, {"requested", 4}}));
  // Over a lowered limit already, an ask that adds none of it still passes.
  CHECK(workspace::CheckQuota("t_a", {2, 1, 4096, 20}, in_use, {0, 0, 0, 5}));

  workspace::DiskFloor floor{uint64_t{5} << 30, 5.0};
  CHECK(workspace::CheckHostDisk({uint64_t{50} << 30, uint64_t{100} << 30}, floor));
  auto bytes = workspace::CheckHostDisk({uint64_t{4} << 30, uint64_t{50} << 30}, floor);
  REQUIRE_FALSE(bytes);
  CHECK(bytes.error().code == ErrorCode::kInsufficientStorage);
  auto percent = workspace::CheckHostDisk({uint64_t{6} << 30, uint64_t{1000} << 30}, floor);
  REQUIRE_FALSE(percent);
  CHECK(percent.error().message.find("0.6 %") != std::string::npos);
}

TEST_CASE("quotas: the workspace count is a limit in any state; a refused create leaves nothing",
          "[quotas]") {
  auto& d = QuotaBerthd();
  auto made_tenant = NewTenant(d, "q-count");
  auto& api = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  SetLimits(d, tenant, {{"workspaces", 2}});
  std::string first = CreateRunning(api, {{"name", "one"}});
  CreateRunning(api, {{"name", "two"}});
  StopAndWait(api, first);  // a stopped workspace still counts

  size_t dirs = WorkspaceDirs(d);
  auto refused = Send(api, verb::post, "/v1/workspaces", {{"name", "three"}});
  CheckQuotaRefusal(refused, "workspaces", 2, 2, 1,
                    "tenant t_q-count would use 3 workspaces of its limit of 2");
  // Nothing was made: no record, no directory, no name taken.
  CHECK(Listed(api) == 2);
  CHECK(WorkspaceDirs(d) == dirs);
  CHECK(Send(api, verb::get, "/v1/workspaces/three", json()).status == 404);

  // A delete frees its place at once, even before its files are gone.
  REQUIRE(api.Json(verb::delete_, "/v1/workspaces/" + first));
  CreateRunning(api, {{"name", "three"}});
}

TEST_CASE("quotas: vCPUs and memory of running workspaces; start, resume, wake and restart are "
          "refused over them", "[quotas]") {
  auto& d = QuotaBerthd();
  auto made_tenant = NewTenant(d, "q-cpu");
  auto& api = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  SetLimits(d, tenant, {{"vcpus", 2}, {"memory_mib", 3072}});
  std::string big = CreateRunning(api, {{"name", "big"}, {"cpus", 2}, {"memory_mib", 1024}});
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces", {{"name", "small"}, {"cpus", 1}}),
                    "vcpus", 2, 2, 1, "tenant t_q-cpu would use 3 vCPUs of its limit of 2");

  // A stopped workspace holds no vCPUs: another may run, and then the first cannot start.
  StopAndWait(api, big);
  std::string small = CreateRunning(api, {{"name", "small"}, {"cpus", 1}, {"memory_mib", 1024}});
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces/big/start", json::object()), "vcpus", 2,
                    1, 2, "would use 3 vCPUs of its limit of 2");
  CHECK(StateOf(api, big) == "stopped");
  auto types = EventTypes(api, big);
  CHECK(std::count(types.begin(), types.end(), "starting") == 1);  // its create's only

  // Wake on request gets the same answer at once, not a wait for a boot that never comes.
  protocol::ExecRequest exec;
  exec.cmd = std::string("true");
  auto t0 = std::chrono::steady_clock::now();
  auto woken = client::Exec(api, "/v1/workspaces/big", exec);
  REQUIRE_FALSE(woken);
  CHECK(woken.error().code == ErrorCode::kQuotaExceeded);
  CHECK(woken.error().message.find("would use 3 vCPUs of its limit of 2") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(StateOf(api, big) == "stopped");

  // Memory is a limit of its own: 1024 running + 4096 asked is over 3072.
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces",
                         {{"name", "wide"}, {"cpus", 1}, {"memory_mib", 4096}}),
                    "memory_mib", 3072, 1024, 4096, "would use 5120 MiB of memory of its limit of 3072");

  // A restart asks for its size again: over a limit lowered meanwhile, it is refused and the
  // workspace keeps running.
  SetLimits(d, tenant, {{"vcpus", 0}});
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces/small/restart", json::object()), "vcpus",
                    0, 0, 1, "would use 1 vCPUs of its limit of 0");
  CHECK(StateOf(api, small) == "running");

  // A hibernated workspace holds nothing either; resuming it is a start like any other.
  SetLimits(d, tenant, {{"vcpus", 2}});
  REQUIRE(api.Json(verb::post, "/v1/workspaces/small/hibernate", json::object()));
  REQUIRE(WaitFor([&] { return StateOf(api, small) == "hibernated"; }, std::chrono::seconds(20)));
  REQUIRE(api.Json(verb::post, "/v1/workspaces/big/start", json::object()));
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces/small/start", json::object()), "vcpus", 2,
                    2, 1, "would use 3 vCPUs of its limit of 2");
  CHECK(StateOf(api, small) == "hibernated");
}

TEST_CASE("quotas: disk is the sum of the workspaces' data disks", "[quotas]") {
  auto& d = QuotaBerthd();
  auto made_tenant = NewTenant(d, "q-disk");
  auto& api = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  SetLimits(d, tenant, {{"disk_gib", 15}});
  CreateRunning(api, {{"name", "ten"}, {"disk_gib", 10}});
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces", {{"name", "more"}, {"disk_gib", 10}}),
                    "disk_gib", 15, 10, 10, "would use 20 GiB of disk of its limit of 15");
  CreateRunning(api, {{"name", "five"}, {"disk_gib", 5}});
}

// The virtual size in the qcow2 header of a workspace's data disk, in GiB.
uint64_t DataDiskGib(TestBerthd& d, const std::string& id) {
  std::ifstream in(d.data_dir() / "workspaces" / id / "data.qcow2", std::ios::binary);
  unsigned char header[32] = {};
  REQUIRE(in.read(reinterpret_cast<char*>(header), sizeof(header)));
  uint64_t size = 0;
  for (int i = 24; i < 32; ++i) size = (size << 8) | header[i];
  return size >> 30;
}

TEST_CASE("quotas: a stopped workspace's size and disk change by PATCH within the limits",
          "[quotas]") {
  auto& d = QuotaBerthd();
  auto made_tenant = NewTenant(d, "q-resize");
  auto& api = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  SetLimits(d, tenant, {{"vcpus", 2}, {"disk_gib", 35}});
  CreateRunning(api, {{"name", "other"}, {"disk_gib", 10}});
  std::string id = CreateRunning(api, {{"name", "grow"}, {"disk_gib", 10}});

  auto running = Send(api, verb::patch, "/v1/workspaces/grow", {{"disk_gib", 20}});
  CHECK(running.status == 409);
  CHECK(running.body["error"]["message"] == "workspace 'grow' is running: stop it to change its size");
  StopAndWait(api, id);

  CheckQuotaRefusal(Send(api, verb::patch, "/v1/workspaces/grow", {{"cpus", 3}}), "vcpus", 2, 0, 3,
                    "would use 3 vCPUs of its limit of 2");
  CheckQuotaRefusal(Send(api, verb::patch, "/v1/workspaces/grow", {{"disk_gib", 30}}), "disk_gib", 35,
                    10, 30, "would use 40 GiB of disk of its limit of 35");
  auto shrink = Send(api, verb::patch, "/v1/workspaces/grow", {{"disk_gib", 5}});
  CHECK(shrink.status == 400);
  CHECK(shrink.body["error"]["message"] == "'disk_gib' can only grow (it is 10 GiB)");
  CHECK(Send(api, verb::patch, "/v1/workspaces/grow", {{"size", "medium"}, {"cpus", 1}}).status == 400);

  auto resized = api.Json(verb::patch, "/v1/workspaces/grow", json{{"cpus", 2}, {"memory_mib", 2048}, {"disk_gib", 25}});
  REQUIRE(resized);
  CHECK((*resized)["cpus"] == 2);
  CHECK((*resized)["size"].is_null());
  CHECK((*resized)["disk_gib"] == 25);
  CHECK(DataDiskGib(d, id) == 10);  // grown at the next boot, before the VM opens it

  // Two running vCPUs of 'other' and 'grow' would be 3 of 2: the new size is what a start asks.
  CheckQuotaRefusal(Send(api, verb::post, "/v1/workspaces/grow/start", json::object()), "vcpus", 2,
                    1, 2, "would use 3 vCPUs of its limit of 2");
  REQUIRE(api.Json(verb::delete_, "/v1/workspaces/other"));
  REQUIRE(api.Json(verb::post, "/v1/workspaces/grow/start", json::object()));
  REQUIRE(api.Json(verb::post, "/v1/workspaces/grow/wait", json{{"state", "running"}}));
  CHECK(DataDiskGib(d, id) == 25);
}

TEST_CASE("quotas: parallel creates and starts against a limit take exactly the limit",
          "[quotas]") {
  auto& d = QuotaBerthd();
  auto made_tenant = NewTenant(d, "q-race");
  auto& api = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  SetLimits(d, tenant, {{"workspaces", 3}});
  constexpr int kCreates = 8;
  std::vector<int> statuses(kCreates);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kCreates; ++i) {
      threads.emplace_back([&, i] {
        auto own = api;  // a client of its own: a connection each
        auto r = own.Request(verb::post, "/v1/workspaces", DumpJson(json{{"name", fmt::format("race-{}", i)}}),
                             "application/json");
        statuses[i] = r ? r->status : -1;
      });
    }
    for (auto& t : threads) t.join();
  }
  CHECK(std::count(statuses.begin(), statuses.end(), 201) == 3);
  CHECK(std::count(statuses.begin(), statuses.end(), 429) == kCreates - 3);
  CHECK(Listed(api) == 3);

  // The same for starts: three stopped workspaces of one vCPU each, a limit of two.
  auto list = api.Json(verb::get, "/v1/workspaces");
  REQUIRE(list);
  std::vector<std::string> ids;
  for (const auto& ws : (*list)["workspaces"]) ids.push_back(ws["id"]);
  for (const auto& id : ids) {
    REQUIRE(api.Json(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "running"}}));
    StopAndWait(api, id);
  }
  SetLimits(d, tenant, {{"vcpus", 2}});
  std::vector<int> starts(ids.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ids.size(); ++i) {
      threads.emplace_back([&, i] {
        auto own = api;
        auto r = own.Request(verb::post, "/v1/workspaces/" + ids[i] + "/start", "{}", "application/json");
        starts[i] = r ? r->status : -1;
      });
    }
    for (auto& t : threads) t.join();
  }
  CHECK(std::count(starts.begin(), starts.end(), 202) == 2);
  CHECK(std::count(starts.begin(), starts.end(), 429) == 1);
}

TEST_CASE("quotas: the operator reads and sets a tenant's limits, kept across a restart; the "
          "tenant's admin sees them and cannot change them", "[quotas]") {
  TestBerthd d([](Config& c) { c.limits = workspace::Limits{5, 4, 8192, 100}; });
  auto made_tenant = NewTenant(d, "q-op");
  auto& admin = made_tenant.api;
  const std::string& tenant = made_tenant.tenant;
  const std::string& admin_key = made_tenant.key;
  auto op = d.Admin();
  auto got = op.Json(verb::get, "/v1/tenants/q-op");  // by name or id
  REQUIRE(got);
  CHECK((*got)["id"] == tenant);
  CHECK((*got)["limits"] == json({{"workspaces", 5}, {"vcpus", 4}, {"memory_mib", 8192}, {"disk_gib", 100}}));
  CHECK((*got)["usage"] == json({{"workspaces", 0}, {"vcpus", 0}, {"memory_mib", 0}, {"disk_gib", 0}}));

  auto set = op.Json(verb::patch, "/v1/tenants/" + tenant, json{{"limits", {{"vcpus", 12}, {"disk_gib", 40}}}});
  REQUIRE(set);
  CHECK((*set)["limits"] == json({{"workspaces", 5}, {"vcpus", 12}, {"memory_mib", 8192}, {"disk_gib", 40}}));

  // The tenant sees its limits and use in /v1/me, through the typed client too.
  CreateRunning(admin, {{"name", "w"}, {"cpus", 2}, {"memory_mib", 2048}, {"disk_gib", 7}});
  auto me = admin.Json(verb::get, "/v1/me");
  REQUIRE(me);
  CHECK((*me)["limits"]["vcpus"] == 12);
  CHECK((*me)["usage"] == json({{"workspaces", 1}, {"vcpus", 2}, {"memory_mib", 2048}, {"disk_gib", 7}}));
  client::BerthClient berth(d.daemon().endpoint(), admin_key);
  auto typed = berth.Me(DeadlineIn(std::chrono::seconds(10)));
  REQUIRE(typed);
  REQUIRE(typed->usage);
  CHECK(typed->usage->vcpus == 2);

  // Its admin may neither raise them nor read the operator's view; nor may a write key.
  auto raise = Send(admin, verb::patch, "/v1/tenants/" + tenant, {{"limits", {{"vcpus", 1000}}}});
  CHECK(raise.status == 403);
  CHECK(Send(admin, verb::get, "/v1/tenants/" + tenant, json()).status == 403);
  CHECK(Send(admin, verb::patch, "/v1/tenants/t_default", {{"limits", {{"vcpus", 1000}}}}).status == 403);
  auto after = op.Json(verb::get, "/v1/tenants/" + tenant);
  REQUIRE(after);
  CHECK((*after)["limits"]["vcpus"] == 12);

  // Bad bodies are a 400 naming the problem; an unknown tenant a 404.
  for (const json& bad : {json::object(), json{{"limits", {{"vcpus", -1}}}}, json{{"limits", {{"cpus", 2}}}},
                          json{{"limits", {{"vcpus", "8"}}}}, json{{"limits", 3}},
                          json{{"limits", {{"vcpus", 2}}}, {"name", "x"}}}) {
    INFO(bad.dump());
    CHECK(Send(op, verb::patch, "/v1/tenants/" + tenant, bad).status == 400);
  }
  CHECK(Send(op, verb::patch, "/v1/tenants/nobody", {{"limits", {{"vcpus", 1}}}}).status == 404);
  CHECK(Send(op, verb::get, "/v1/tenants/nobody", json()).status == 404);

  // Stored: a restarted berthd has them; null returns one to the default.
  d.Restart();
  auto op_again = d.Admin();  // a new port
  auto kept = op_again.Json(verb::get, "/v1/tenants/" + tenant);
  REQUIRE(kept);
  CHECK((*kept)["limits"]["vcpus"] == 12);
  CHECK((*kept)["limits"]["disk_gib"] == 40);
  auto reset = op_again.Json(verb::patch, "/v1/tenants/" + tenant, json{{"limits", {{"vcpus", nullptr}}}});
  REQUIRE(reset);
  CHECK((*reset)["limits"]["vcpus"] == 4);
  CHECK((*reset)["limits"]["disk_gib"] == 40);
}

TEST_CASE("quotas: limits and the disk floor come from berthd's config file", "[quotas]") {
  testing::TempDir dir("quota-config");
  auto path = dir.path() / "berthd.json";
  std::ofstream(path) << R"({"limits": {"vcpus": 3, "workspaces": 7},
                             "min_free_disk": {"bytes": 1024, "percent": 2.5}})";
  Config c;
  REQUIRE(c.LoadFile(path));
  CHECK(c.limits.vcpus == 3);
  CHECK(c.limits.workspaces == 7);
  CHECK(c.limits.memory_mib == workspace::Limits{}.memory_mib);
  CHECK(c.min_free_disk.min_free_bytes == 1024);
  CHECK(c.min_free_disk.min_free_percent == 2.5);
  for (const char* bad : {R"({"limits": {"cpus": 3}})", R"({"limits": {"vcpus": -3}})",
                          R"({"min_free_disk": {"percent": 101}})", R"({"min_free_disk": 5})"}) {
    INFO(bad);
    std::ofstream(path) << bad;
    Config other;
    CHECK_FALSE(other.LoadFile(path));
  }
}

TEST_CASE("host disk: creates are refused with 507 while the data directory is short of space",
          "[quotas]") {
  static std::atomic<uint64_t> free_bytes{uint64_t{50} << 30};
  TestBerthd d([](Config& c) {
    c.min_free_disk = workspace::DiskFloor{uint64_t{5} << 30, 5.0};
    c.host_disk_for_test = [](const fs::path&) -> Result<workspace::HostDisk> {
      return workspace::HostDisk{free_bytes.load(), uint64_t{100} << 30};
    };
  });
  auto api = d.Admin();
  std::string before = CreateRunning(api, {{"name", "before"}});
  StopAndWait(api, before);

  free_bytes = uint64_t{4} << 30;  // 4 GiB of 100: under both floors
  size_t dirs = WorkspaceDirs(d);
  auto refused = Send(api, verb::post, "/v1/workspaces", {{"name", "short"}});
  INFO(refused.body.dump());
  REQUIRE(refused.status == 507);
  CHECK(refused.body["error"]["code"] == "insufficient_storage");
  CHECK(refused.body["error"]["message"].get<std::string>().find("short of disk: 4096 MiB free") !=
        std::string::npos);
  const uint64_t four_gib = uint64_t{4} << 30;
  const uint64_t five_gib = uint64_t{5} << 30;
  CHECK(refused.body["error"]["details"]["free_bytes"] == four_gib);
  CHECK(refused.body["error"]["details"]["min_free_bytes"] == five_gib);
  CHECK(Listed(api) == 1);
  CHECK(WorkspaceDirs(d) == dirs);
  // The typed client carries the code and the message as it is.
  client::BerthClient typed(d.daemon().endpoint(), d.admin_key());
  v1::CreateWorkspace create;
  create.name = "short";
  auto made = typed.CreateWorkspace(create, DeadlineIn(std::chrono::seconds(10)));
  REQUIRE_FALSE(made);
  CHECK(made.error().code == ErrorCode::kInsufficientStorage);

  // Guests that exist keep running and starting: their disks are made already.
  REQUIRE(api.Json(verb::post, "/v1/workspaces/" + before + "/start", json::object()));
  REQUIRE(api.Json(verb::post, "/v1/workspaces/" + before + "/wait", json{{"state", "running"}}));

  // Nor does a disk grow while the host is short.
  StopAndWait(api, before);
  CHECK(Send(api, verb::patch, "/v1/workspaces/before", {{"disk_gib", 20}}).status == 507);

  free_bytes = uint64_t{50} << 30;
  CreateRunning(api, {{"name", "short"}});
  CHECK(api.Json(verb::patch, "/v1/workspaces/before", json{{"disk_gib", 20}}));
}

}  // namespace berth
