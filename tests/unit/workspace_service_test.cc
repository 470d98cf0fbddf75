// The workspace service against the fake hypervisor, a fake agent probe and a fake clock:
// lifecycle, write-before-call ordering, the boot watchdog and its concurrency cap, idle and
// max_runtime, guest events, and reconciliation of every state a crash can leave behind.
// (Failures, races and concurrency: workspace_service_faults_test.cc.)
#include "tests/unit/service_fixture.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace berth::workspace {
namespace {

using hypervisor::DomainState;
using testing::WaitFor;

TEST_CASE("service: create boots; every transition is stored before the hypervisor call", "[service]") {
  Fixture f;
  auto ws = f.Create("alpha");
  CHECK(ws.state == State::kCreating);
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kRunning);
  CHECK(fs::exists(Layout(f.dir.path(), ws.id).data_disk(0)));
  // The per-boot token: 64 hex characters, owner-only.
  auto token = Layout(f.dir.path(), ws.id).token();
  CHECK(fs::file_size(token) == 64);
  CHECK((fs::status(token).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);

  REQUIRE(f.Hibernate("alpha").has_value());
  REQUIRE(f.Reaches(ws.id, State::kHibernated));
  REQUIRE(f.Start("alpha").has_value());
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.transport->resumes == 1);
  REQUIRE(f.Stop("alpha").has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  REQUIRE(f.Delete("alpha").has_value());
  REQUIRE(f.Gone(ws.id));
  CHECK_FALSE(fs::exists(Layout(f.dir.path(), ws.id).dir));
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kMissing);

  std::lock_guard lock(f.hv.mutex);
  std::vector<std::pair<std::string, std::string>> expected = {
      {"Start", "starting"}, {"Save", "hibernating"}, {"Start", "starting"},
      {"PressPowerButton", "stopping"}, {"Undefine", "deleting"}};
  CHECK(f.hv.seen == expected);
}

TEST_CASE("service: API transitions that make no sense are refused; repeats are no-ops", "[service]") {
  Fixture f;
  auto ws = f.Create("beta");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.Start("beta").has_value());  // already running
  REQUIRE(f.Stop("beta", true).has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  auto hib = f.Hibernate("beta");
  REQUIRE_FALSE(hib.has_value());
  CHECK(hib.error().code == ErrorCode::kFailedPrecondition);
  CHECK(f.Stop("beta").has_value());
  auto other = f.store->CreateTenant("t2", f.now)->id;
  auto hidden = f.service->Get(other, ws.id);
  REQUIRE_FALSE(hidden.has_value());
  CHECK(hidden.error().code == ErrorCode::kNotFound);
  CHECK(f.hv.CallsForTest("Destroy") >= 1);  // forced: no ACPI grace
}

TEST_CASE("service: a silent boot is destroyed and retried, then the workspace is in error", "[service]") {
  Fixture f([](ServiceOptions& o) {
    o.boot_timeout = std::chrono::seconds(1);
    o.boot_attempts = 2;
  });
  f.agent_up = false;
  auto ws = f.Create("silent");
  REQUIRE(f.Reaches(ws.id, State::kError));
  CHECK(f.hv.CallsForTest("Start") == 2);
  CHECK(f.HasEvent(ws.id, "boot_retry"));
  auto stored = f.store->GetWorkspaceById(ws.id);
  REQUIRE(stored->error.has_value());
  CHECK(stored->error->find("did not answer") != std::string::npos);
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kShutoff);
  // From error, start tries again.
  f.agent_up = true;
  REQUIRE(f.Start("silent").has_value());
  CHECK(f.Reaches(ws.id, State::kRunning));
}

TEST_CASE("service: at most max_concurrent_boots cold boots run at once", "[service]") {
  Fixture f([](ServiceOptions& o) {
    o.max_concurrent_boots = 1;
    o.boot_timeout = std::chrono::seconds(30);
  });
  f.agent_up = false;
  auto a = f.Create("one");
  auto b = f.Create("two");
  REQUIRE(WaitFor([&] { return f.hv.CallsForTest("Start") == 1; }));
  // The second waits for a slot while the first boots.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  CHECK(f.hv.CallsForTest("Start") == 1);
  f.agent_up = true;
  REQUIRE(f.Reaches(a.id, State::kRunning));
  REQUIRE(f.Reaches(b.id, State::kRunning));
  CHECK(f.hv.CallsForTest("Start") == 2);
}

TEST_CASE("service: a PATCH during a boot is not overwritten by it", "[service]") {
  Fixture f;
  f.agent_up = false;
  auto ws = f.Create("patchy");
  REQUIRE(WaitFor([&] { return f.hv.CallsForTest("Start") == 1; }));
  REQUIRE(f.Patch("patchy", {{"labels", {{"k", "v"}}}}).has_value());
  f.agent_up = true;
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.store->GetWorkspaceById(ws.id)->labels["k"] == "v");
}

TEST_CASE("service: a delete during a boot wins", "[service]") {
  Fixture f;
  f.agent_up = false;
  auto ws = f.Create("doomed");
  REQUIRE(WaitFor([&] { return f.hv.CallsForTest("Start") == 1; }));
  REQUIRE(f.Delete("doomed").has_value());
  REQUIRE(f.Gone(ws.id));
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kMissing);
}

TEST_CASE("service: a delete during a stop wins", "[service]") {
  Fixture f;
  auto ws = f.Create("stop-then-delete");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  f.hv.SetAcpiWorksForTest(false);  // the stop waits out its grace period
  REQUIRE(f.Stop(ws.id).has_value());
  auto deleting = f.Delete(ws.id);
  REQUIRE(deleting.has_value());
  CHECK(deleting->state == State::kDeleting);
  REQUIRE(f.Gone(ws.id));
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kMissing);
}

TEST_CASE("service: idle stop, and what keeps a workspace awake", "[service][idle]") {
  Fixture f;
  auto ws = f.Create("idle", [](CreateRequest& r) { r.idle_timeout_s = 600; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));

  SECTION("nothing happens: the idle action runs after idle_timeout") {
    f.now += 599;
    f.service->IdleTickForTest();
    CHECK(f.StateOf(ws.id) == State::kRunning);
    auto awake = f.service->Awake(ws.id);
    CHECK(awake.reasons.empty());
    REQUIRE(awake.idle_at.has_value());
    f.now += 2;
    f.service->IdleTickForTest();
    REQUIRE(f.Reaches(ws.id, State::kStopped));
    CHECK(f.HasEvent(ws.id, "stopped_by_idle"));
  }
  SECTION("an open stream keeps it awake, and counts until it closes") {
    {
      auto guard = f.service->OpenStream(ws.id, "exec");
      f.now += 10'000;
      f.service->IdleTickForTest();
      CHECK(f.StateOf(ws.id) == State::kRunning);
      auto awake = f.service->Awake(ws.id);
      REQUIRE(awake.reasons.size() == 1);
      CHECK(awake.reasons[0] == "exec stream open");
    }
    f.now += 300;
    f.service->IdleTickForTest();
    CHECK(f.StateOf(ws.id) == State::kRunning);  // closed 300 s ago: 300 s left
    f.now += 301;
    f.service->IdleTickForTest();
    REQUIRE(f.Reaches(ws.id, State::kStopped));
  }
  SECTION("guest processes, CPU and leases keep it awake") {
    {
      std::lock_guard lock(f.activity_mutex);
      f.activity = {{"running_processes", 2},
                    {"cpu", {{"percent", 80.0}, {"busy_threshold_percent", 25}}},
                    {"leases", {{{"reason", "make test"}}}}};
    }
    f.now += 10'000;
    f.service->IdleTickForTest();
    CHECK(f.StateOf(ws.id) == State::kRunning);
    auto reasons = f.service->Awake(ws.id).reasons;
    std::vector<std::string> expected = {"2 processes started through the API", "guest CPU at 80%",
                                         "keep-awake lease: make test"};
    CHECK(reasons == expected);
  }
  SECTION("a hostile activity answer is ignored, not trusted") {
    {
      std::lock_guard lock(f.activity_mutex);
      f.activity = {{"running_processes", "lots"}, {"cpu", 7}, {"leases", "all of them"}};
    }
    f.now += 601;
    f.service->IdleTickForTest();
    REQUIRE(f.Reaches(ws.id, State::kStopped));
  }
  SECTION("a lease with a reason that is not a string still keeps it awake") {
    {
      std::lock_guard lock(f.activity_mutex);
      f.activity = {{"leases", {{{"reason", 5}}, {{"reason", {{"nested", true}}}}}}};
    }
    f.now += 601;
    f.service->IdleTickForTest();
    CHECK(f.StateOf(ws.id) == State::kRunning);
    std::vector<std::string> expected = {"keep-awake lease", "keep-awake lease"};
    CHECK(f.service->Awake(ws.id).reasons == expected);
  }
  SECTION("idle_action hibernate") {
    REQUIRE(f.Patch("idle", {{"idle_action", "hibernate"}}).has_value());
    f.now += 601;
    f.service->IdleTickForTest();
    REQUIRE(f.Reaches(ws.id, State::kHibernated));
    CHECK(f.HasEvent(ws.id, "hibernated_by_idle"));
  }
}

TEST_CASE("service: a running workspace says when it will idle before the first idle tick",
          "[service][idle]") {
  Fixture f;  // idle_poll is an hour: no tick runs unless the test asks
  auto ws = f.Create("fresh", [](CreateRequest& r) { r.idle_timeout_s = 600; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  auto awake = f.service->Awake(ws.id);
  REQUIRE(awake.idle_at.has_value());
  CHECK(*awake.idle_at == f.now.load() + 600);
}

TEST_CASE("service: max_runtime stops a busy workspace", "[service][idle]") {
  Fixture f;
  auto ws = f.Create("bounded", [](CreateRequest& r) { r.max_runtime_s = 3600; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  auto guard = f.service->OpenStream(ws.id, "tunnel");
  f.now += 3601;
  f.service->IdleTickForTest();
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  CHECK(f.HasEvent(ws.id, "max_runtime"));
}

TEST_CASE("service: the guest powering off or crashing updates the state", "[service]") {
  Fixture f;
  auto a = f.Create("poweroff");
  auto b = f.Create("crash");
  REQUIRE(f.Reaches(a.id, State::kRunning));
  REQUIRE(f.Reaches(b.id, State::kRunning));
  f.hv.StopFromGuestForTest(a.DomainName(), false);
  f.hv.StopFromGuestForTest(b.DomainName(), true);
  REQUIRE(f.Reaches(a.id, State::kStopped));
  REQUIRE(f.Reaches(b.id, State::kError));
  CHECK(f.HasEvent(a.id, "shutdown_by_guest"));
  CHECK(f.HasEvent(b.id, "crashed"));
}

TEST_CASE("service: reconciliation ends every state a crash can leave in a defined one", "[service][reconcile]") {
  Fixture f;
  // Workspaces as a killed berthd could leave them: the record says one thing, the hypervisor
  // another. Made with the service running, then changed behind it while it is down.
  struct Made {
    std::string id;
    State stored;
    std::optional<DomainState> domain;
  };
  std::vector<Made> made;
  auto make = [&](const std::string& name, State stored, std::optional<DomainState> domain) {
    auto ws = f.Create(name);
    REQUIRE(f.Reaches(ws.id, State::kRunning));
    made.push_back({ws.id, stored, domain});
    return ws.id;
  };
  auto running_gone = make("running-gone", State::kRunning, DomainState::kShutoff);
  auto running_saved = make("running-saved", State::kRunning, DomainState::kSaved);
  auto hib_done = make("hib-done", State::kHibernating, DomainState::kSaved);
  auto hib_cut = make("hib-cut", State::kHibernating, DomainState::kRunning);
  auto hib_lost = make("hib-lost", State::kHibernating, DomainState::kShutoff);
  auto stopping = make("stopping", State::kStopping, DomainState::kRunning);
  auto starting = make("starting", State::kStarting, DomainState::kRunning);
  auto starting_off = make("starting-off", State::kStarting, DomainState::kShutoff);
  auto creating = make("creating", State::kCreating, std::nullopt);
  auto deleting = make("deleting", State::kDeleting, DomainState::kRunning);
  auto adopted = make("adopted", State::kStopped, DomainState::kRunning);
  auto hib_no_save = make("hib-no-save", State::kHibernated, DomainState::kShutoff);
  f.service->Shutdown();
  for (const auto& m : made) {
    auto n = "berth-" + m.id;
    if (!m.domain) {
      REQUIRE(f.hv.Destroy(n).has_value());
      REQUIRE(f.hv.Undefine(n).has_value());
    } else if (*m.domain == DomainState::kShutoff) {
      REQUIRE(f.hv.Destroy(n).has_value());
    } else if (*m.domain == DomainState::kSaved) {
      REQUIRE(f.hv.Save(n).has_value());
    }
    auto rec = *f.store->GetWorkspaceById(m.id);
    rec.state = m.stored;
    REQUIRE(f.store->UpdateWorkspace(rec).has_value());
  }
  // A domain of ours with no record (its directory is under our data dir), and one that is not
  // ours.
  hypervisor::DomainSpec orphan;
  orphan.name = "berth-ws_00000000000000aa";
  orphan.uuid = "00000000-0000-4000-8000-0000000000aa";
  REQUIRE(f.hv.Define(orphan).has_value());
  REQUIRE(f.hv.Start(orphan.name).has_value());
  fs::create_directories(f.dir.path() / "workspaces/ws_00000000000000aa");
  std::ofstream(f.dir.path() / "workspaces/ws_00000000000000aa/data.qcow2") << "keep me";
  hypervisor::DomainSpec foreign = orphan;
  foreign.name = "berth-ws_00000000000000bb";
  foreign.uuid = "00000000-0000-4000-8000-0000000000bb";
  REQUIRE(f.hv.Define(foreign).has_value());
  REQUIRE(f.hv.Start(foreign.name).has_value());

  f.StartService();  // reconciles before it returns; what it queued runs now
  f.service->WaitIdleForTest();

  CHECK(f.StateOf(running_gone) == State::kStopped);
  CHECK(f.StateOf(running_saved) == State::kHibernated);
  CHECK(f.StateOf(hib_done) == State::kHibernated);
  CHECK(f.StateOf(hib_cut) == State::kHibernated);
  CHECK(f.StateOf(hib_lost) == State::kStopped);
  CHECK(f.StateOf(stopping) == State::kStopped);
  CHECK(f.StateOf(starting) == State::kRunning);
  CHECK(f.StateOf(starting_off) == State::kRunning);
  CHECK(f.StateOf(creating) == State::kRunning);
  CHECK_FALSE(f.store->GetWorkspaceById(deleting).has_value());
  CHECK(f.StateOf(adopted) == State::kRunning);
  CHECK(f.StateOf(hib_no_save) == State::kStopped);
  CHECK(f.HasEvent(running_gone, "reconciled"));
  CHECK(f.hv.State(orphan.name) == DomainState::kMissing);
  CHECK(fs::exists(f.dir.path() / "workspaces/ws_00000000000000aa/data.qcow2"));  // disks kept
  CHECK(f.hv.State(foreign.name) == DomainState::kRunning);
  // Every disk of every workspace that still exists is still there.
  for (const auto& id : {running_gone, hib_lost, stopping, adopted, creating}) {
    CHECK(fs::exists(Layout(f.dir.path(), id).data_disk(0)));
  }
  // What the API reads agrees with the store.
  for (const auto& m : made) {
    auto ws = f.service->Get(f.tenant, m.id);
    if (m.id == deleting) {
      CHECK_FALSE(ws.has_value());
    } else {
      REQUIRE(ws.has_value());
      CHECK(ws->state == f.StateOf(m.id));
    }
  }
}

// Publishes image version `version` of base (as images/build does), optionally as current.
void Publish(const fs::path& images, const std::string& version, bool current) {
  fs::create_directories(images / "base" / version);
  for (const char* f : {"disk.qcow2", "vmlinuz", "initrd.img"}) {
    std::ofstream(images / "base" / version / f) << "x";
  }
  if (current) {
    fs::remove(images / "base/current");
    fs::create_directory_symlink(version, images / "base/current");
  }
}

TEST_CASE("service: image versions a workspace uses are kept, unused ones collected",
          "[service][images]") {
  Fixture f;
  fs::path images = f.dir.path() / "images";
  auto a = f.Create("on-v1");
  REQUIRE(f.Reaches(a.id, State::kRunning));
  // The hold names the workspace's root disk.
  std::ifstream hold(images / "base/v1/holds" / a.id);
  std::string named;
  std::getline(hold, named);
  CHECK(named == Layout(f.dir.path(), a.id).root_disk(0).string());

  Publish(images, "v2", /*current=*/true);
  Publish(images, "v3", false);  // never used
  Publish(images, "v4", false);  // used by a workspace whose data directory is gone
  fs::create_directories(images / "base/v4/holds");
  std::ofstream(images / "base/v4/holds/ws_gone") << "/nonexistent/workspaces/ws_gone/root.qcow2\n";
  auto b = f.Create("on-v2");
  CHECK(b.image_version == "v2");

  f.service->CollectImagesForTest();
  CHECK(fs::exists(images / "base/v1/disk.qcow2"));  // held by on-v1
  CHECK(fs::exists(images / "base/v2/disk.qcow2"));  // current
  CHECK_FALSE(fs::exists(images / "base/v3"));
  CHECK_FALSE(fs::exists(images / "base/v4"));

  // Deleting the last workspace on v1 lets it go; a stopped one would have kept it.
  REQUIRE(f.Stop("on-v1").has_value());
  REQUIRE(f.Reaches(a.id, State::kStopped));
  f.service->CollectImagesForTest();
  CHECK(fs::exists(images / "base/v1/disk.qcow2"));
  REQUIRE(f.Delete("on-v1").has_value());
  REQUIRE(f.Gone(a.id));
  f.service->CollectImagesForTest();
  CHECK_FALSE(fs::exists(images / "base/v1"));

  // Nothing is collected while images/build holds the build lock.
  Publish(images, "v5", false);
  int fd = open((f.dir.path() / ".build.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_EX) == 0);
  f.service->CollectImagesForTest();
  CHECK(fs::exists(images / "base/v5"));
  close(fd);
  f.service->CollectImagesForTest();
  CHECK_FALSE(fs::exists(images / "base/v5"));
  CHECK(fs::exists(images / "base/v2/disk.qcow2"));
  // No trash is left behind.
  for (const auto& e : fs::directory_iterator(images / "base")) {
    CHECK_FALSE(e.path().filename().string().starts_with(".trash-"));
  }
}

TEST_CASE("service: a restarted berthd holds the images of workspaces made before holds",
          "[service][images]") {
  Fixture f;
  auto ws = f.Create("old");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  fs::path data = f.dir.path();
  f.service->Shutdown();
  // As if made by a berthd without holds: none on disk, and v1 is no longer current.
  fs::remove_all(data / "images/base/v1/holds");
  Publish(data / "images", "v2", /*current=*/true);
  f.StartService();  // holds, reconciles
  f.service->CollectImagesForTest();
  CHECK(fs::exists(data / "images/base/v1/holds" / ws.id));
  CHECK(fs::exists(data / "images/base/v1/disk.qcow2"));
}

}  // namespace
}  // namespace berth::workspace

namespace berth::workspace {
namespace {

TEST_CASE("layout: each generation's layers have their own names, and only those read back as layers",
          "[layout]") {
  Layout layout("/data", "ws_0123456789abcdef");
  CHECK(layout.root_disk(0) == "/data/workspaces/ws_0123456789abcdef/root.qcow2");
  CHECK(layout.data_disk(0) == "/data/workspaces/ws_0123456789abcdef/data.qcow2");
  CHECK(layout.root_disk(12) == "/data/workspaces/ws_0123456789abcdef/root.g12.qcow2");
  CHECK(layout.data_disk(3) == "/data/workspaces/ws_0123456789abcdef/data.g3.qcow2");
  CHECK(Layout::LayerGen("root.qcow2") == 0);
  CHECK(Layout::LayerGen("data.g12.qcow2") == 12);
  for (int64_t gen : {1, 9, 10, 123456789}) {
    CHECK(Layout::LayerGen(layout.root_disk(gen).filename().string()) == gen);
  }
  for (const char* other : {"token", "console.log", "root.qcow2.tmp", "root.g.qcow2", "root.g0.qcow2",
                            "root.g01.qcow2", "root.g-1.qcow2", "root.g1x.qcow2", "swap.g1.qcow2",
                            "root.g99999999999999999999.qcow2", "rootg1.qcow2", "data.g1.qcow2.tmp"}) {
    INFO(other);
    CHECK_FALSE(Layout::LayerGen(other).has_value());
  }
}

}  // namespace
}  // namespace berth::workspace
