// Checkpoints through berthd's API, in-process on libvirt's test driver: the disks are real
// qcow2 chains made by qemu-img, and what a layer reads is checked with qemu-img itself (the
// test writes into a top layer with qemu-io, standing in for a guest). The real VM's side is in
// tests/e2e/berthd/ (a file written in the guest comes back with a restore).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "controller/store/store.h"
#include "tests/support/mcp_exchange.h"
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

std::string Run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  INFO(cmd << ": " << out);
  REQUIRE(rc == 0);
  return out;
}

// The first bytes a disk reads through its whole chain.
std::string FirstBytes(const fs::path& disk, const fs::path& scratch) {
  fs::path out = scratch / "first.bin";
  fs::remove(out);
  Run("qemu-img dd -f qcow2 -O raw bs=4096 count=1 if=" + disk.string() + " of=" + out.string());
  std::ifstream in(out, std::ios::binary);
  std::string bytes(16, '\0');
  in.read(bytes.data(), 16);
  return bytes;
}

// A guest's write, into the layer a running VM would write.
void Write(const fs::path& disk, char pattern) {
  Run(fmt::format("qemu-io -f qcow2 -c 'write -P {} 0 4096' {}", static_cast<int>(pattern), disk.string()));
}

std::string Backing(const fs::path& disk) {
  auto info = json::parse(Run("qemu-img info --output=json -U " + disk.string()));
  return info.value("backing-filename", std::string());
}

int Mode(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<int>(st.st_mode & 0777);
}

std::vector<std::string> Names(const json& list) {
  std::vector<std::string> out;
  for (const auto& c : list["checkpoints"]) out.push_back(c["name"].get<std::string>());
  return out;
}

std::vector<std::string> EventTypes(client::ApiClient& api, const std::string& id) {
  auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?limit=1000");
  REQUIRE(events.has_value());
  std::vector<std::string> out;
  for (const auto& e : (*events)["events"]) out.push_back(e["type"].get<std::string>());
  return out;
}

json Stopped(client::ApiClient& api, const std::string& name) {
  auto made = api.Json(verb::post, "/v1/workspaces", json{{"name", name}});
  REQUIRE(made.has_value());
  std::string id = (*made)["id"];
  auto running = api.Json(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "running"}, {"timeout_s", 30}});
  REQUIRE(running.has_value());
  REQUIRE(api.Json(verb::post, "/v1/workspaces/" + id + "/stop", json::object()).has_value());
  auto stopped = api.Json(verb::post, "/v1/workspaces/" + id + "/wait", json{{"state", "stopped"}, {"timeout_s", 30}});
  REQUIRE(stopped.has_value());
  return *stopped;
}

TEST_CASE("berthd's checkpoints: a checkpoint freezes the disks as they were, a restore brings them back and "
          "can itself be undone, and deleting one keeps what every other layer reads",
          "[berthd][checkpoints]") {
  TestBerthd d;
  testing::TempDir scratch;
  auto api = d.Admin();
  std::string id = Stopped(api, "keeper")["id"];
  fs::path dir = d.data_dir() / "workspaces" / id;
  Write(dir / "root.qcow2", 'a');

  auto taken = api.Json(verb::post, "/v1/workspaces/keeper/checkpoints", json{{"name", "clean"}});
  REQUIRE(taken.has_value());
  CHECK((*taken)["name"] == "clean");
  CHECK((*taken)["kind"] == "manual");
  CHECK((*taken)["memory"] == false);
  CHECK((*taken)["taken_while"] == "stopped");
  CHECK((*taken)["parent"].is_null());
  CHECK((*taken)["size_bytes"].get<int64_t>() > 0);
  std::string clean = (*taken)["id"];
  // The old tops are the checkpoint's now, read-only; the workspace writes new ones on them.
  CHECK(Mode(dir / "root.qcow2") == 0440);
  CHECK(Mode(dir / "data.qcow2") == 0440);
  CHECK(Backing(dir / "root.g1.qcow2") == (dir / "root.qcow2").string());
  CHECK(Backing(dir / "data.g1.qcow2") == (dir / "data.qcow2").string());
  CHECK(FirstBytes(dir / "root.g1.qcow2", scratch.path()) == std::string(16, 'a'));

  // The guest changes its disk after the checkpoint.
  Write(dir / "root.g1.qcow2", 'b');

  auto restored = api.Json(verb::post, "/v1/workspaces/keeper/checkpoints/clean/restore", json::object());
  REQUIRE(restored.has_value());
  CHECK((*restored)["workspace"]["state"] == "stopped");
  REQUIRE((*restored)["undo"].is_object());
  CHECK((*restored)["undo"]["kind"] == "before_restore");
  CHECK((*restored)["undo"]["parent"] == clean);
  std::string undo = (*restored)["undo"]["id"];
  CHECK(FirstBytes(dir / "root.g2.qcow2", scratch.path()) == std::string(16, 'a'));
  // The state it left is kept, whole, as the undo checkpoint.
  CHECK(FirstBytes(dir / "root.g1.qcow2", scratch.path()) == std::string(16, 'b'));
  CHECK(Mode(dir / "root.g1.qcow2") == 0440);

  // Undoing the restore is restoring its checkpoint, this time without keeping the state left.
  auto back = api.Json(verb::post, "/v1/workspaces/keeper/checkpoints/" + undo + "/restore", json{{"undo", false}});
  REQUIRE(back.has_value());
  CHECK((*back)["undo"].is_null());
  CHECK(FirstBytes(dir / "root.g3.qcow2", scratch.path()) == std::string(16, 'b'));
  CHECK_FALSE(fs::exists(dir / "root.g2.qcow2"));  // nobody's: removed

  auto listed = api.Json(verb::get, "/v1/workspaces/keeper/checkpoints");
  REQUIRE(listed.has_value());
  CHECK(Names(*listed) == std::vector<std::string>{undo, "clean"});  // newest first

  // Deleting the first checkpoint merges its layers into the ones above: the undo checkpoint
  // and the current disks read what they read before.
  auto gone = api.Json(verb::delete_, "/v1/workspaces/keeper/checkpoints/clean");
  REQUIRE(gone.has_value());
  CHECK((*gone)["id"] == clean);
  CHECK_FALSE(fs::exists(dir / "root.qcow2"));
  CHECK_FALSE(fs::exists(dir / "data.qcow2"));
  CHECK(FirstBytes(dir / "root.g1.qcow2", scratch.path()) == std::string(16, 'b'));
  CHECK(FirstBytes(dir / "root.g3.qcow2", scratch.path()) == std::string(16, 'b'));
  CHECK(Mode(dir / "root.g1.qcow2") == 0440);
  auto after = api.Json(verb::get, "/v1/workspaces/keeper/checkpoints/" + undo);
  REQUIRE(after.has_value());
  CHECK((*after)["parent"].is_null());
  auto missing = api.Json(verb::get, "/v1/workspaces/keeper/checkpoints/clean");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::kNotFound);

  auto types = EventTypes(api, id);
  CHECK(std::count(types.begin(), types.end(), "checkpoint") == 1);
  CHECK(std::count(types.begin(), types.end(), "restored") == 2);
  CHECK(std::count(types.begin(), types.end(), "checkpoint_deleted") == 1);

  // It boots from its current layers. A running workspace's checkpoint needs the hypervisor to
  // move its disks, which libvirt's test driver cannot ("unsupported flags"): the failure leaves
  // no checkpoint and no layer behind, and the workspace runs on (the move itself is tested on
  // real VMs, e2e_berthd_vms, and against the fake hypervisor, unit_workspace_service).
  REQUIRE(api.Json(verb::post, "/v1/workspaces/keeper/start", json::object()).has_value());
  REQUIRE(api.Json(verb::post, "/v1/workspaces/keeper/wait", json{{"state", "running"}, {"timeout_s", 30}}).has_value());
  auto running = api.Json(verb::post, "/v1/workspaces/keeper/checkpoints", json{{"name", "live"}});
  REQUIRE_FALSE(running.has_value());
  CHECK(running.error().message.find("libvirt snapshot the disks") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "root.g4.qcow2"));
  CHECK_FALSE(fs::exists(dir / "data.g4.qcow2"));
  CHECK(Names(*api.Json(verb::get, "/v1/workspaces/keeper/checkpoints")) == std::vector<std::string>{undo});
  CHECK((*api.Json(verb::get, "/v1/workspaces/keeper"))["state"] == "running");
  // Its layer is under the running disks: not deletable until it stops.
  auto under = api.Json(verb::delete_, "/v1/workspaces/keeper/checkpoints/" + undo);
  REQUIRE_FALSE(under.has_value());
  CHECK(under.error().code == ErrorCode::kFailedPrecondition);

  // Restoring a running workspace stops it, restores, and starts it again on the new layers.
  auto live = api.Json(verb::post, "/v1/workspaces/keeper/checkpoints/" + undo + "/restore", json{{"undo", false}});
  REQUIRE(live.has_value());
  CHECK((*live)["workspace"]["state"] == "starting");
  REQUIRE(api.Json(verb::post, "/v1/workspaces/keeper/wait", json{{"state", "running"}, {"timeout_s", 30}}).has_value());
  CHECK(Backing(dir / "root.g4.qcow2") == (dir / "root.g1.qcow2").string());
  CHECK_FALSE(fs::exists(dir / "root.g3.qcow2"));
  auto stops = api.Json(verb::get, "/v1/workspaces/" + id + "/events?type=stopping");
  REQUIRE(stops.has_value());
  REQUIRE_FALSE((*stops)["events"].empty());
  CHECK((*stops)["events"].back()["message"] == "to restore a checkpoint");
  types = EventTypes(api, id);
  CHECK(std::count(types.begin(), types.end(), "restored") == 3);

  // Deleting the workspace takes its checkpoints with it.
  REQUIRE(api.Json(verb::delete_, "/v1/workspaces/keeper").has_value());
  REQUIRE(WaitFor([&] { return !api.Json(verb::get, "/v1/workspaces/" + id).has_value(); }, std::chrono::seconds(20)));
  CHECK_FALSE(fs::exists(dir));
  CHECK(d.daemon().store().ListCheckpoints(id)->empty());
}

TEST_CASE("berthd's checkpoints: bad requests are refused with what is wrong, and nothing changes",
          "[berthd][checkpoints]") {
  TestBerthd d;
  auto api = d.Admin();
  std::string id = Stopped(api, "strict")["id"];
  fs::path dir = d.data_dir() / "workspaces" / id;

  auto bad_name = api.Json(verb::post, "/v1/workspaces/strict/checkpoints", json{{"name", "Not A Name"}});
  REQUIRE_FALSE(bad_name.has_value());
  CHECK(bad_name.error().code == ErrorCode::kInvalidArgument);
  auto unknown_field = api.Json(verb::post, "/v1/workspaces/strict/checkpoints", json{{"nmae", "x"}});
  REQUIRE_FALSE(unknown_field.has_value());
  CHECK(unknown_field.error().code == ErrorCode::kInvalidArgument);
  auto memory = api.Json(verb::post, "/v1/workspaces/strict/checkpoints", json{{"memory", true}});
  REQUIRE_FALSE(memory.has_value());
  CHECK(memory.error().code == ErrorCode::kFailedPrecondition);

  REQUIRE(api.Json(verb::post, "/v1/workspaces/strict/checkpoints", json{{"name", "one"}}).has_value());
  auto twice = api.Json(verb::post, "/v1/workspaces/strict/checkpoints", json{{"name", "one"}});
  REQUIRE_FALSE(twice.has_value());
  CHECK(twice.error().code == ErrorCode::kAlreadyExists);
  // The refused second checkpoint left no layer behind.
  CHECK(fs::exists(dir / "root.g1.qcow2"));
  CHECK_FALSE(fs::exists(dir / "root.g2.qcow2"));

  auto nothing = api.Json(verb::post, "/v1/workspaces/strict/checkpoints/nope/restore", json::object());
  REQUIRE_FALSE(nothing.has_value());
  CHECK(nothing.error().code == ErrorCode::kNotFound);
  auto bad_undo = api.Json(verb::post, "/v1/workspaces/strict/checkpoints/one/restore", json{{"undo", "yes"}});
  REQUIRE_FALSE(bad_undo.has_value());
  CHECK(bad_undo.error().code == ErrorCode::kInvalidArgument);

  // A read key lists them and changes nothing.
  auto made = api.Json(verb::post, "/v1/keys", json{{"scope", "read"}});
  REQUIRE(made.has_value());
  auto reader = d.WithKey((*made)["key"]);
  auto list = reader.Json(verb::get, "/v1/workspaces/strict/checkpoints");
  REQUIRE(list.has_value());
  CHECK(Names(*list) == std::vector<std::string>{"one"});
  auto denied = reader.Json(verb::delete_, "/v1/workspaces/strict/checkpoints/one");
  REQUIRE_FALSE(denied.has_value());
  CHECK(denied.error().code == ErrorCode::kPermissionDenied);

  // Another tenant sees neither the workspace nor its checkpoints.
  auto tenant = api.Json(verb::post, "/v1/tenants", json{{"name", "other"}});
  REQUIRE(tenant.has_value());
  auto key = api.Json(verb::post, "/v1/keys", json{{"tenant", "other"}, {"scope", "admin"}});
  REQUIRE(key.has_value());
  auto stranger = d.WithKey((*key)["key"]).Json(verb::get, "/v1/workspaces/" + id + "/checkpoints");
  REQUIRE_FALSE(stranger.has_value());
  CHECK(stranger.error().code == ErrorCode::kNotFound);
}

TEST_CASE("berthd's checkpoints: after a crash mid-checkpoint a restart drops the unfinished one and its layers, "
          "and keeps every finished checkpoint and the disks",
          "[berthd][checkpoints][restart]") {
  TestBerthd d;
  auto api = d.Admin();
  std::string id = Stopped(api, "crashy")["id"];
  fs::path dir = d.data_dir() / "workspaces" / id;
  REQUIRE(api.Json(verb::post, "/v1/workspaces/crashy/checkpoints", json{{"name", "kept"}}).has_value());

  // What a berthd killed between making the next layers and its commit leaves: the row
  // "taking", the layers of generation 2 (one of them still under its temporary name).
  store::Checkpoint cut;
  cut.id = "cp_00000000000000aa";
  cut.tenant_id = "t_default";
  cut.workspace_id = id;
  cut.name = "cut";
  cut.gen = 1;
  cut.taken_while = "stopped";
  cut.created_at = 1;
  REQUIRE(d.daemon().store().InsertCheckpoint(cut).has_value());
  Run("qemu-img create -q -f qcow2 -F qcow2 -b " + (dir / "root.g1.qcow2").string() + " " +
      (dir / "root.g2.qcow2").string());
  Run("qemu-img create -q -f qcow2 -F qcow2 -b " + (dir / "data.g1.qcow2").string() + " " +
      (dir / "data.g2.qcow2.tmp").string());

  d.Restart();
  api = d.Admin();
  CHECK_FALSE(fs::exists(dir / "root.g2.qcow2"));
  CHECK_FALSE(fs::exists(dir / "data.g2.qcow2.tmp"));
  for (const char* kept : {"root.qcow2", "data.qcow2", "root.g1.qcow2", "data.g1.qcow2"}) {
    CHECK(fs::exists(dir / kept));
  }
  auto listed = api.Json(verb::get, "/v1/workspaces/crashy/checkpoints");
  REQUIRE(listed.has_value());
  CHECK(Names(*listed) == std::vector<std::string>{"kept"});
  CHECK(d.daemon().store().ListCheckpoints(id)->size() == 1);
  // The next checkpoint takes generation 2 afresh.
  REQUIRE(api.Json(verb::post, "/v1/workspaces/crashy/checkpoints", json{{"name", "next"}}).has_value());
  CHECK(fs::exists(dir / "root.g2.qcow2"));
}

TEST_CASE("berthd's checkpoints through its own /mcp: a tool takes, lists and restores them as the session's "
          "key", "[berthd][checkpoints][mcp]") {
  TestBerthd d;
  auto api = d.Admin();
  std::string id = Stopped(api, "via-mcp")["id"];
  auto minted = api.Json(verb::post, "/v1/keys", json{{"scope", "write"}, {"name", "mcp-agent"}});
  REQUIRE(minted.has_value());
  auto agent = d.WithKey((*minted)["key"]);
  std::string session = testing::McpSession(agent);

  auto taken = testing::McpToolCall(agent, session, "checkpoint_create", {{"workspace", "via-mcp"}, {"name", "first"}});
  INFO(taken.dump());
  REQUIRE_FALSE(taken.value("isError", false));
  auto listed = testing::McpToolCall(agent, session, "checkpoint_list", {{"workspace", "via-mcp"}});
  REQUIRE_FALSE(listed.value("isError", false));
  REQUIRE(listed["structuredContent"]["checkpoints"].size() == 1);
  CHECK(listed["structuredContent"]["checkpoints"][0]["name"] == "first");
  CHECK(listed["structuredContent"]["checkpoints"][0]["created_by"] == (*minted)["id"]);
  auto restored = testing::McpToolCall(agent, session, "checkpoint_restore", {{"workspace", "via-mcp"}, {"checkpoint", "first"}});
  REQUIRE_FALSE(restored.value("isError", false));
  CHECK(restored["structuredContent"]["undo"]["kind"] == "before_restore");
  auto events = api.Json(verb::get, "/v1/workspaces/" + id + "/events?type=checkpoint,restored");
  REQUIRE(events.has_value());
  REQUIRE((*events)["events"].size() == 2);
  for (const auto& e : (*events)["events"]) CHECK(e["actor"] == (*minted)["id"]);

  // A read key's session lists them and takes none.
  auto read_key = api.Json(verb::post, "/v1/keys", json{{"scope", "read"}});
  REQUIRE(read_key.has_value());
  auto reader = d.WithKey((*read_key)["key"]);
  std::string read_session = testing::McpSession(reader);
  auto refused = testing::McpToolCall(reader, read_session, "checkpoint_create", {{"workspace", "via-mcp"}});
  CHECK(refused.value("isError", false));
  CHECK(d.daemon().store().ListCheckpoints(id)->size() == 2);
}

TEST_CASE("berthd's forks: a fork of a stopped workspace's checkpoint reads its disks, is a machine of its own "
          "named in the record, and keeps the checkpoint from being deleted until it is gone",
          "[berthd][checkpoints][forks]") {
  TestBerthd d;
  testing::TempDir scratch;
  auto api = d.Admin();
  std::string id = Stopped(api, "origin")["id"];
  fs::path dir = d.data_dir() / "workspaces" / id;
  Write(dir / "root.qcow2", 'p');
  auto taken = api.Json(verb::post, "/v1/workspaces/origin/checkpoints", json{{"name", "base"}});
  REQUIRE(taken.has_value());
  std::string cp = (*taken)["id"];

  // A field that would make it another machine than its source's is refused by name.
  auto wider = api.Json(verb::post, "/v1/workspaces",
                        json{{"name", "wide"}, {"from", {{"workspace", "origin"}}}, {"cpus", 4}});
  REQUIRE_FALSE(wider.has_value());
  CHECK(wider.error().code == ErrorCode::kInvalidArgument);
  CHECK(wider.error().message.find("'cpus' cannot be given with 'from'") != std::string::npos);
  auto nowhere = api.Json(verb::post, "/v1/workspaces/origin/checkpoints/nope/fork", json{{"name", "x"}});
  REQUIRE_FALSE(nowhere.has_value());
  CHECK(nowhere.error().code == ErrorCode::kNotFound);

  auto made = api.Json(verb::post, "/v1/workspaces/origin/checkpoints/base/fork", json{{"name", "twig"}, {"count", 2}});
  REQUIRE(made.has_value());
  REQUIRE((*made)["workspaces"].size() == 2);
  std::vector<std::string> forks;
  for (const auto& w : (*made)["workspaces"]) {
    CHECK(w["forked_from"] == cp);
    forks.push_back(w["id"]);
  }
  CHECK((*made)["workspaces"][0]["name"] == "twig-1");
  // With an Idempotency-Key, a retry gets the fork the first made (not a 409 for its name).
  client::Headers idem = {{"Idempotency-Key", "fork-leaf-1"}};
  json leaf = {{"name", "leaf"}, {"from", {{"workspace", "origin"}, {"checkpoint", "base"}}}};
  auto single = api.Json(verb::post, "/v1/workspaces", leaf, idem);
  REQUIRE(single.has_value());
  CHECK((*single)["forked_from"] == cp);
  forks.push_back((*single)["id"]);
  auto retried = api.Json(verb::post, "/v1/workspaces", leaf, idem);
  REQUIRE(retried.has_value());
  CHECK((*retried)["id"] == (*single)["id"]);
  auto twice = api.Json(verb::post, "/v1/workspaces", leaf);
  REQUIRE_FALSE(twice.has_value());
  CHECK(twice.error().code == ErrorCode::kAlreadyExists);
  for (const auto& f : forks) {
    auto up = api.Json(verb::post, "/v1/workspaces/" + f + "/wait", json{{"state", "running"}, {"timeout_s", 30}});
    INFO(f);
    REQUIRE(up.has_value());
    fs::path own = d.data_dir() / "workspaces" / f;
    // Its disks stand on the checkpoint's layers and read what the source wrote.
    CHECK(Backing(own / "root.qcow2") == (dir / "root.qcow2").string());
    CHECK(FirstBytes(own / "root.qcow2", scratch.path()) == std::string(16, 'p'));
    // The host agent took the fork's identity into its own files, and the timeline says so.
    std::ifstream hostname(own / "identity" / "etc" / "hostname");
    std::string name;
    std::getline(hostname, name);
    CHECK(name == (*api.Json(verb::get, "/v1/workspaces/" + f))["name"]);
    auto types = EventTypes(api, f);
    CHECK(std::count(types.begin(), types.end(), "identity") == 1);
  }

  // A template needs a checkpoint with memory (the test driver takes none: the path itself is
  // tested against the fake hypervisor and on a real VM).
  auto cold = api.Json(verb::post, "/v1/templates",
                       json{{"name", "cold"}, {"from", {{"workspace", "origin"}, {"checkpoint", "base"}}}});
  REQUIRE_FALSE(cold.has_value());
  CHECK(cold.error().code == ErrorCode::kFailedPrecondition);
  CHECK(cold.error().message.find("has no memory") != std::string::npos);
  auto none = api.Json(verb::get, "/v1/templates");
  REQUIRE(none.has_value());
  CHECK((*none)["templates"] == json::array());
  auto nameless = api.Json(verb::post, "/v1/workspaces", json{{"name", "w"}, {"template", "nope"}});
  REQUIRE_FALSE(nameless.has_value());
  CHECK(nameless.error().code == ErrorCode::kNotFound);
  CHECK(nameless.error().message.find("no template 'nope'") != std::string::npos);

  auto refused = api.Json(verb::delete_, "/v1/workspaces/origin/checkpoints/base");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(refused.error().message.find("leaf, twig-1, twig-2") != std::string::npos);
  auto kept = api.Json(verb::delete_, "/v1/workspaces/origin");
  REQUIRE_FALSE(kept.has_value());
  CHECK(kept.error().message.find("forks or templates standing on its checkpoints") != std::string::npos);

  for (const auto& f : forks) REQUIRE(api.Json(verb::delete_, "/v1/workspaces/" + f).has_value());
  REQUIRE(WaitFor([&] {
    for (const auto& f : forks) {
      if (api.Json(verb::get, "/v1/workspaces/" + f).has_value()) return false;
    }
    return true;
  }));
  auto gone = api.Json(verb::delete_, "/v1/workspaces/origin/checkpoints/base");
  INFO((gone ? "" : gone.error().message));
  CHECK(gone.has_value());
}

// The template's state as GET /v1/templates/{name} says, once it is no longer building.
json Built(client::ApiClient& api, const std::string& name) {
  json out;
  REQUIRE(WaitFor(
      [&] {
        auto t = api.Json(verb::get, "/v1/templates/" + name);
        REQUIRE(t.has_value());
        out = *t;
        return out["state"] != "building";
      },
      std::chrono::seconds(60)));
  return out;
}

TEST_CASE("berthd's templates from a script: the script runs through the workspace's own agent; one that exits "
          "non-zero fails the template with its exit code and the end of its output, and its workspace goes",
          "[berthd][templates]") {
  TestBerthd d;
  auto api = d.Admin();
  // stdout and stderr interleaved in the log, and `set -e`: the script stops at the first failure.
  auto made = api.Request(verb::post, "/v1/templates",
                          json{{"name", "broken"},
                               {"script", "echo fetching; echo 'E: Unable to locate package nope' >&2; false; echo never"},
                               {"timeout_s", 60}}
                              .dump(),
                          "application/json");
  REQUIRE(made.has_value());
  CHECK(made->status == 202);
  auto building = json::parse(made->body);
  CHECK(building["state"] == "building");
  CHECK(building["workspace"] == "template-broken");
  CHECK(building["script"].get<std::string>().starts_with("echo fetching"));
  std::string builder = building["workspace_id"];

  auto failed = Built(api, "broken");
  INFO(failed.dump());
  CHECK(failed["state"] == "failed");
  CHECK(failed["error"] == "the script exited with 1");
  CHECK(failed["build_log"] == "fetching\nE: Unable to locate package nope\n");
  REQUIRE(WaitFor([&] { return !api.Json(verb::get, "/v1/workspaces/" + builder).has_value(); }));
  auto from = api.Json(verb::post, "/v1/workspaces", json{{"name", "app"}, {"template", "broken"}});
  REQUIRE_FALSE(from.has_value());
  CHECK(from.error().code == ErrorCode::kFailedPrecondition);
  CHECK(from.error().message.find("failed to build: the script exited with 1") != std::string::npos);
  // The list says so too, without the log.
  auto listed = api.Json(verb::get, "/v1/templates");
  REQUIRE(listed.has_value());
  REQUIRE((*listed)["templates"].size() == 1);
  CHECK((*listed)["templates"][0]["state"] == "failed");
  CHECK_FALSE((*listed)["templates"][0].contains("build_log"));
  REQUIRE(api.Json(verb::delete_, "/v1/templates/broken").has_value());

  // A script that succeeds: `start` is left running and `ready` run until it exits 0, then the
  // memory checkpoint, which the test driver cannot take (a real VM's is in tests/e2e/berthd/).
  // (The host agent runs them on this host: in a directory of the test's.)
  testing::TempDir work;
  std::string at = work.path().string();
  auto good = api.Json(verb::post, "/v1/templates",
                       json{{"name", "good"},
                            {"script", "echo step one; echo yes > " + at + "/flag"},
                            {"start", "sleep 1 && touch " + at + "/started && exec sleep 30"},
                            {"ready", "test -f " + at + "/started"},
                            {"timeout_s", 60}});
  REQUIRE(good.has_value());
  auto reached = Built(api, "good");
  INFO(reached.dump());
  CHECK(reached["build_log"].get<std::string>().starts_with("step one\n"));
  CHECK(reached["build_log"].get<std::string>().find("(started in the background, tag template-start)") !=
        std::string::npos);
  CHECK(reached["build_log"].get<std::string>().find("$ test -f " + at + "/started (exited 0 after") !=
        std::string::npos);
  CHECK(fs::exists(work.path() / "flag"));
  CHECK(reached["error"].get<std::string>().starts_with("checkpointing the built workspace"));

  // A script that runs past timeout_s is cut, and what it printed is kept.
  auto slow = api.Json(verb::post, "/v1/templates",
                       json{{"name", "slow"}, {"script", "echo started; sleep 60"}, {"timeout_s", 10}});
  REQUIRE(slow.has_value());
  auto cut = Built(api, "slow");
  INFO(cut.dump());
  CHECK(cut["state"] == "failed");
  CHECK(cut["error"] == "the build took longer than 10 s");
  CHECK(cut["build_log"] == "started\n");

  // Refused by name, nothing made.
  auto both = api.Json(verb::post, "/v1/templates",
                       json{{"name", "x"}, {"script", "true"}, {"from", {{"workspace", "origin"}}}});
  REQUIRE_FALSE(both.has_value());
  CHECK(both.error().code == ErrorCode::kInvalidArgument);
  auto all = api.Json(verb::get, "/v1/workspaces");
  REQUIRE(all.has_value());
  for (const auto& w : (*all)["workspaces"]) CHECK(w["name"] != "template-x");
}

}  // namespace
}  // namespace berth
