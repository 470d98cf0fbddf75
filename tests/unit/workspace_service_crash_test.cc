// What the crash suite (tests/crash/) found: writes that a SIGKILL could split, and what a
// create cut short left behind. A statement the store refuses (a trigger) stands in for the
// kill between two statements: with the change and its event in one transaction, neither is
// written.
#include "tests/unit/service_fixture.h"

namespace berth::workspace {
namespace {

std::vector<std::pair<std::string, std::string>> TypesAndStates(store::Store& store, const std::string& id) {
  std::vector<std::pair<std::string, std::string>> out;
  auto events = store.ListEvents(id, 0, 1000);
  REQUIRE(events.has_value());
  for (const auto& e : *events) {
    out.emplace_back(e.type, e.data.contains("state") ? e.data["state"].get<std::string>() : "");
  }
  return out;
}

TEST_CASE("crash: every transition's event names the state it left, from created to deleted", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("chain");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  REQUIRE(f.Hibernate(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kHibernated));
  REQUIRE(f.Stop(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  REQUIRE(f.Delete(ws.id).has_value());
  REQUIRE(f.Gone(ws.id));
  using P = std::pair<std::string, std::string>;
  CHECK(TypesAndStates(*f.store, ws.id) ==
        std::vector<P>{{"created", "creating"}, {"starting", "starting"}, {"started", "running"},
                       {"hibernating", "hibernating"}, {"hibernated", "hibernated"},
                       {"stopping", "stopping"}, {"stopped", "stopped"}, {"deleting", "deleting"},
                       {"deleted", ""}});
}

TEST_CASE("crash: a transition whose event cannot be written is not stored either", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("atomic");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  auto before = f.Events(ws.id).size();
  REQUIRE(f.store->database().Exec(
      "CREATE TRIGGER no_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END"));
  auto stop = f.Stop(ws.id);
  REQUIRE_FALSE(stop.has_value());
  // Neither half: the store still says running, as the API does, and no event was added.
  CHECK(f.StateOf(ws.id) == State::kRunning);
  CHECK(f.service->Get(f.tenant, ws.id)->state == State::kRunning);
  CHECK(f.Events(ws.id).size() == before);
  REQUIRE(f.store->database().Exec("DROP TRIGGER no_events"));
  REQUIRE(f.Stop(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kStopped));
}

TEST_CASE("crash: a delete whose row stays writes no 'deleted' event, and the retry writes one", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("undeletable");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  REQUIRE(f.store->database().Exec(
      "CREATE TRIGGER keep_rows BEFORE DELETE ON workspaces BEGIN SELECT RAISE(ABORT, 'refused'); END"));
  REQUIRE(f.Delete(ws.id).has_value());
  f.service->WaitIdleForTest();
  CHECK(f.StateOf(ws.id) == State::kDeleting);
  CHECK_FALSE(f.HasEvent(ws.id, "deleted"));
  REQUIRE(f.store->database().Exec("DROP TRIGGER keep_rows"));
  f.service->ReconcileForTest();
  REQUIRE(f.Gone(ws.id));
  auto types = f.Events(ws.id);
  CHECK(std::count(types.begin(), types.end(), "deleted") == 1);
  CHECK(types.back() == "deleted");
}

TEST_CASE("crash: a create whose record was refused leaves neither record nor event", "[service][crash]") {
  Fixture f;
  REQUIRE(f.store->database().Exec(
      "CREATE TRIGGER no_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END"));
  auto req = ParseCreateRequest({{"name", "half"}});
  REQUIRE(req.has_value());
  auto created = f.runner.Sync(f.service->Create(f.tenant, *req, "key-1"));
  REQUIRE_FALSE(created.has_value());
  CHECK_FALSE(f.service->Get(f.tenant, "half").has_value());
  CHECK(f.store->ListAllWorkspaces()->empty());
  CHECK_FALSE(f.store->FindIdempotencyKey(f.tenant, "key-1")->has_value());
  CHECK(fs::is_empty(f.dir.path() / "workspaces"));
}

TEST_CASE("crash: a create cut before its record leaves no directory or hold after a restart", "[service][crash]") {
  Fixture f;
  // What CreateBlocking leaves when berthd dies between the hold and the record: the
  // directory (empty) and the hold naming its root disk.
  auto cut = Layout(f.dir.path(), "ws_0123456789abcdef");
  fs::create_directories(cut.dir);
  auto holds = f.dir.path() / "images/base/v1/holds";
  fs::create_directories(holds);
  std::ofstream(holds / "ws_0123456789abcdef") << cut.root_disk(0).string() << "\n";
  // A directory with a disk but no record was not left by a create: it stays for an operator.
  auto unknown = Layout(f.dir.path(), "ws_fedcba9876543210");
  fs::create_directories(unknown.dir);
  std::ofstream(unknown.data_disk(0)) << "data";
  auto kept = f.Create("kept");
  REQUIRE(f.Reaches(kept.id, State::kRunning));

  f.RestartService();
  CHECK_FALSE(fs::exists(cut.dir));
  CHECK_FALSE(fs::exists(holds / "ws_0123456789abcdef"));
  CHECK(fs::exists(unknown.data_disk(0)));
  CHECK(fs::exists(Layout(f.dir.path(), kept.id).root_disk(0)));
  CHECK(fs::exists(holds / kept.id));
  CHECK(f.Reaches(kept.id, State::kRunning));
}

TEST_CASE("crash: a save that a killed berthd asked for and libvirt finished first is a hibernation", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("saved-twice");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  f.hv.save_lands_then_fails = true;
  REQUIRE(f.Hibernate(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kHibernated));
  CHECK_FALSE(f.HasEvent(ws.id, "error"));
  REQUIRE(f.Start(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kRunning));
}

TEST_CASE("crash: a domain that came up under a boot (a killed berthd's start) is booted again, not left starting", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("started-twice");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  REQUIRE(f.Stop(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  f.hv.start_lands_then_fails = true;
  REQUIRE(f.Start(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kRunning));
  CHECK(f.HasEvent(ws.id, "boot_retry"));
}

TEST_CASE("crash: a VM a killed berthd's start left paused is let run before the agent is waited for", "[service][crash]") {
  Fixture f;
  auto ws = f.Create("left-paused");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  // berthd "killed" during a start: the record says starting, libvirt says paused.
  auto rec = *f.store->GetWorkspaceById(ws.id);
  rec.state = State::kStarting;
  REQUIRE(f.store->UpdateWorkspace(rec));
  f.hv.paused_until_start = true;
  auto starts = f.hv.CallsForTest("Start");
  f.RestartService();
  CHECK(f.Reaches(ws.id, State::kRunning));
  CHECK_FALSE(f.hv.paused_until_start);
  CHECK(f.hv.CallsForTest("Start") == starts);  // RecordingHypervisor answered it: not a new boot
  CHECK_FALSE(f.HasEvent(ws.id, "boot_retry"));
}

}  // namespace
}  // namespace berth::workspace
