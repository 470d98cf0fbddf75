// The workspace service when things go wrong or happen at once: every hypervisor failure path,
// KVM that does not work, streams racing deletes, a hostile agent that never answers, a long
// hibernate beside a boot, waiting for states, and a thread count that does not grow.
#include "tests/unit/service_fixture.h"

#include <dirent.h>

namespace berth::workspace {
namespace {

using hypervisor::DomainState;
using testing::WaitFor;

size_t ThreadsOfThisProcess() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/task");
  REQUIRE(d != nullptr);
  while (auto* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

TEST_CASE("faults: a failed define leaves the create in error, and a start retries it", "[service][faults]") {
  Fixture f;
  f.hv.FailNextForTest("Define", Error(ErrorCode::kInternal, "libvirt define: no space"));
  auto ws = f.Create("undefinable");
  REQUIRE(f.Reaches(ws.id, State::kError));
  auto stored = f.store->GetWorkspaceById(ws.id);
  REQUIRE(stored->error.has_value());
  CHECK(stored->error->find("create failed: libvirt define: no space") != std::string::npos);
  // From error, start defines it again from the record (the domain is missing) and boots.
  REQUIRE(f.Start(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kRunning));
}

TEST_CASE("faults: a failed start is retried on a fresh boot", "[service][faults]") {
  Fixture f;
  f.hv.FailNextForTest("Start", Error(ErrorCode::kInternal, "libvirt start: qemu died"));
  auto ws = f.Create("flaky");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.hv.CallsForTest("Start") == 2);
  CHECK(f.HasEvent(ws.id, "boot_retry"));
}

TEST_CASE("faults: a boot the host refuses (no network isolation) ends in error with the reason, once",
          "[service][faults]") {
  // The boot loop took every kFailedPrecondition for "overtaken by another operation" and left
  // the workspace in `starting` for ever; the guest network refuses boots with that code.
  Fixture f;
  {
    std::lock_guard lock(f.transport->mutex);
    f.transport->refuse_boots = Error(ErrorCode::kFailedPrecondition,
                                      "guest network isolation is not in place, so no guest boots: nft refused");
  }
  auto ws = f.Create("unfiltered");
  REQUIRE(f.Reaches(ws.id, State::kError));
  auto stored = f.store->GetWorkspaceById(ws.id);
  REQUIRE(stored->error.has_value());
  CHECK(stored->error->find("guest network isolation is not in place") != std::string::npos);
  CHECK(f.transport->boots == 1);  // not retried: it would fail the same way
  CHECK(f.hv.CallsForTest("Start") == 0);
  CHECK(f.hv.State(ws.DomainName()) != DomainState::kRunning);
  {
    std::lock_guard lock(f.transport->mutex);
    f.transport->refuse_boots.reset();
  }
  REQUIRE(f.Start(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kRunning));
}

TEST_CASE("faults: a failed save leaves a running workspace running, and says so", "[service][faults]") {
  Fixture f;
  auto ws = f.Create("unsavable");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  f.hv.FailNextForTest("Save", Error(ErrorCode::kInternal, "libvirt managed save: disk full"));
  REQUIRE(f.Hibernate(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.HasEvent(ws.id, "error"));
  CHECK(f.hv.State(ws.DomainName()) == DomainState::kRunning);
  // And a second try works.
  REQUIRE(f.Hibernate(ws.id).has_value());
  CHECK(f.Reaches(ws.id, State::kHibernated));
}

TEST_CASE("faults: a failed undefine keeps the workspace and its disks until a retry works", "[service][faults]") {
  Fixture f;
  auto ws = f.Create("sticky");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  f.hv.FailNextForTest("Undefine", Error(ErrorCode::kUnavailable, "libvirt undefine: busy"));
  REQUIRE(f.Delete(ws.id).has_value());
  f.service->WaitIdleForTest();
  CHECK(f.StateOf(ws.id) == State::kDeleting);
  CHECK(fs::exists(Layout(f.dir.path(), ws.id).data_disk(0)));
  CHECK(f.HasEvent(ws.id, "error"));
  // The reconciler runs the delete again.
  f.service->ReconcileForTest();
  REQUIRE(f.Gone(ws.id));
  CHECK_FALSE(fs::exists(Layout(f.dir.path(), ws.id).dir));
  CHECK_FALSE(f.service->Get(f.tenant, ws.id).has_value());
}

TEST_CASE("faults: a resume that fails falls back to a cold boot from disk", "[service][faults]") {
  Fixture f;
  auto ws = f.Create("amnesiac");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  REQUIRE(f.Hibernate(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kHibernated));
  f.hv.FailNextForTest("Start", Error(ErrorCode::kInternal, "libvirt start: cannot restore"));
  REQUIRE(f.Start(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.hv.CallsForTest("DiscardSave") >= 1);
  CHECK(f.transport->resumes == 1);  // the one resume that failed
  CHECK(f.transport->boots == 2);    // the create's boot, and the boot from disk
  auto events = f.Events(ws.id);
  CHECK(std::find(events.begin(), events.end(), "boot_retry") != events.end());
  auto stored = f.store->ListEvents(ws.id, 0, 1000);
  bool said = false;
  for (const auto& e : *stored) said = said || e.message.find("booting from disk instead") != std::string::npos;
  CHECK(said);
}

TEST_CASE("faults: a KVM boot that fails with a KVM error falls back to TCG, with an event", "[service][faults]") {
  Fixture f([](ServiceOptions& o) {
    o.accel = "auto";
    o.kvm_works = [] { return true; };
  });
  REQUIRE(f.service->kvm());
  f.hv.FailNextForTest("Start", Error(ErrorCode::kInternal, "libvirt start: qemu: kvm run failed Bad address"));
  auto ws = f.Create("on-kvm");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK_FALSE(f.service->kvm());
  CHECK(f.HasEvent(ws.id, "kvm_fallback"));
  auto spec = f.hv.SpecForTest(ws.DomainName());
  REQUIRE(spec.has_value());
  CHECK(spec->accel == hypervisor::Accel::kTcg);
}

TEST_CASE("the screen size chosen at create is stored and reaches the domain", "[service]") {
  Fixture f;
  auto ws = f.Create("wide", [](CreateRequest& r) { r.screen = "1920x1080"; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  auto spec = f.hv.SpecForTest(ws.DomainName());
  REQUIRE(spec.has_value());
  CHECK(spec->screen == "1920x1080");
  auto stored = f.store->GetWorkspaceById(ws.id);
  REQUIRE(stored);
  CHECK(stored->screen == "1920x1080");
  auto plain = f.Create("plain");
  REQUIRE(f.Reaches(plain.id, State::kRunning));
  CHECK(f.hv.SpecForTest(plain.DomainName())->screen == "1280x800");
}

TEST_CASE("faults: a failure that does not mention KVM does not give up on KVM", "[service][faults]") {
  Fixture f([](ServiceOptions& o) {
    o.accel = "auto";
    o.kvm_works = [] { return true; };
  });
  f.hv.FailNextForTest("Start", Error(ErrorCode::kInternal, "libvirt start: no memory"));
  auto ws = f.Create("still-kvm");
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  CHECK(f.service->kvm());
  CHECK_FALSE(f.HasEvent(ws.id, "kvm_fallback"));
}

TEST_CASE("faults: streams opened while their workspaces are deleted never touch a freed owner",
          "[service][faults][race]") {
  Fixture f;
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back(f.Create("race-" + std::to_string(i)).id);
  }
  for (const auto& id : ids) REQUIRE(f.Reaches(id, State::kRunning));
  std::atomic<bool> go{true};
  std::atomic<int> opened{0};
  std::vector<std::thread> openers;
  for (int t = 0; t < 4; ++t) {
    openers.emplace_back([&, t] {
      while (go) {
        for (const auto& id : ids) {
          auto guard = f.service->OpenStream(id, t % 2 ? "exec" : "tunnel");
          (void)f.service->Awake(id);  // reads the owner while it may be going
          ++opened;
        }
      }
    });
  }
  for (const auto& id : ids) REQUIRE(f.Delete(id).has_value());
  for (const auto& id : ids) REQUIRE(f.Gone(id));
  go = false;
  for (auto& t : openers) t.join();
  CHECK(opened > 0);
  for (const auto& id : ids) {
    // Gone from the API too, and a stream on it now is an empty guard.
    CHECK_FALSE(f.service->Get(f.tenant, id).has_value());
    auto guard = f.service->OpenStream(id, "exec");
    CHECK(f.service->Awake(id).reasons.empty());
  }
}

TEST_CASE("faults: an agent that never answers delays only its own workspace's idle check",
          "[service][faults][idle]") {
  Fixture f([](ServiceOptions& o) { o.probe_deadline = std::chrono::hours(1); });
  auto hostile = f.Create("hostile", [](CreateRequest& r) { r.idle_timeout_s = 600; });
  auto quiet = f.Create("quiet", [](CreateRequest& r) { r.idle_timeout_s = 600; });
  REQUIRE(f.Reaches(hostile.id, State::kRunning));
  REQUIRE(f.Reaches(quiet.id, State::kRunning));
  f.Silence(hostile.id);
  f.now += 601;
  // The idle loop's own tick, which waits for nothing: the quiet one idles out while the
  // hostile one's probe is still waiting (its deadline is an hour).
  f.service->IdleTickForTest(/*wait=*/false);
  REQUIRE(f.Reaches(quiet.id, State::kStopped));
  CHECK(f.HasEvent(quiet.id, "stopped_by_idle"));
}

TEST_CASE("faults: a probe that ignores its deadline is cut at the deadline", "[service][faults][idle]") {
  Fixture f([](ServiceOptions& o) { o.probe_deadline = std::chrono::milliseconds(200); });
  auto ws = f.Create("dripping", [](CreateRequest& r) { r.idle_timeout_s = 600; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  f.Silence(ws.id);
  f.now += 601;
  f.service->IdleTickForTest();  // returns: the check ended at its deadline
  CHECK(f.probes_in_flight == 0);
  // A guest that says nothing keeps nothing awake: it idles out like a silent one.
  REQUIRE(f.Reaches(ws.id, State::kStopped));
}

TEST_CASE("faults: a long hibernate does not hold up another workspace's boot", "[service][faults]") {
  Fixture f;
  auto sleeper = f.Create("sleeper");
  REQUIRE(f.Reaches(sleeper.id, State::kRunning));
  f.hv.HoldNextForTest("Save");
  REQUIRE(f.Hibernate(sleeper.id).has_value());
  REQUIRE(f.hv.WaitHeldForTest("Save", std::chrono::seconds(10)));
  // The save is still in libvirt; a new workspace boots meanwhile.
  auto other = f.Create("other");
  REQUIRE(WaitFor([&] { return f.StateOf(other.id) == State::kRunning; }));
  CHECK(f.StateOf(sleeper.id) == State::kHibernating);
  f.hv.ReleaseForTest("Save");
  CHECK(f.Reaches(sleeper.id, State::kHibernated));
}

TEST_CASE("faults: WaitForState returns on the change, refuses a settled state, and times out",
          "[service][wait]") {
  Fixture f;
  f.agent_up = false;
  auto ws = f.Create("waited");
  auto waiting = boost::asio::co_spawn(f.runner.io(),
                                       f.service->WaitForState(f.tenant, ws.id, State::kRunning, std::chrono::seconds(20)),
                                       boost::asio::use_future);
  REQUIRE(WaitFor([&] { return f.hv.CallsForTest("Start") == 1; }));
  CHECK(waiting.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  f.agent_up = true;
  auto reached = waiting.get();
  REQUIRE(reached.has_value());
  CHECK(reached->state == State::kRunning);

  // Running is settled: waiting for "stopped" without a stop is a conflict, at once.
  auto conflict = f.runner.Sync(f.service->WaitForState(f.tenant, ws.id, State::kStopped, std::chrono::seconds(20)));
  REQUIRE_FALSE(conflict.has_value());
  CHECK(conflict.error().code == ErrorCode::kFailedPrecondition);

  // A stop that takes its grace period: the wait times out with the state it is in.
  f.hv.SetAcpiWorksForTest(false);
  REQUIRE(f.Stop(ws.id).has_value());
  auto late = f.runner.Sync(f.service->WaitForState(f.tenant, ws.id, State::kStopped, std::chrono::milliseconds(100)));
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().code == ErrorCode::kDeadlineExceeded);
  CHECK(late.error().message.find("stopping") != std::string::npos);
  auto stopped = f.runner.Sync(f.service->WaitForState(f.tenant, ws.id, State::kStopped, std::chrono::seconds(20)));
  CHECK(stopped.has_value());
}

TEST_CASE("faults: Wake starts a sleeping workspace and returns its agent", "[service][wait]") {
  Fixture f;
  auto ws = f.Create("sleepy", [](CreateRequest& r) { r.auto_start = true; });
  REQUIRE(f.Reaches(ws.id, State::kRunning));
  REQUIRE(f.Stop(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  auto link = f.runner.Sync(f.service->Wake(f.tenant, ws.id, std::chrono::seconds(20)));
  REQUIRE(link.has_value());
  CHECK(link->endpoint.path == Layout(f.dir.path(), ws.id).agent_socket().string());
  CHECK(f.StateOf(ws.id) == State::kRunning);
  CHECK(f.HasEvent(ws.id, "woken"));

  REQUIRE(f.Patch(ws.id, {{"auto_start", false}}).has_value());
  REQUIRE(f.Stop(ws.id).has_value());
  REQUIRE(f.Reaches(ws.id, State::kStopped));
  auto refused = f.runner.Sync(f.service->Wake(f.tenant, ws.id, std::chrono::seconds(20)));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::kFailedPrecondition);
  CHECK(f.StateOf(ws.id) == State::kStopped);
}

TEST_CASE("faults: the service's threads do not grow with workspaces or operations", "[service][threads]") {
  Fixture f;
  size_t before = ThreadsOfThisProcess();
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(f.Create("many-" + std::to_string(i)).id);
  for (const auto& id : ids) REQUIRE(f.Reaches(id, State::kRunning));
  for (const auto& id : ids) REQUIRE(f.Hibernate(id).has_value());
  for (const auto& id : ids) REQUIRE(f.Reaches(id, State::kHibernated));
  size_t during = ThreadsOfThisProcess();
  for (const auto& id : ids) REQUIRE(f.Start(id).has_value());
  for (const auto& id : ids) REQUIRE(f.Reaches(id, State::kRunning));
  CHECK(ThreadsOfThisProcess() == before);
  CHECK(during == before);
}

TEST_CASE("faults: a PATCH to a name another workspace has is refused, and the name index follows renames",
          "[service]") {
  Fixture f;
  auto a = f.Create("first");
  auto b = f.Create("second");
  auto clash = f.Patch("second", {{"name", "first"}});
  REQUIRE_FALSE(clash.has_value());
  CHECK(clash.error().code == ErrorCode::kAlreadyExists);
  REQUIRE(f.Patch("second", {{"name", "renamed"}}).has_value());
  auto by_new = f.service->Get(f.tenant, "renamed");
  REQUIRE(by_new.has_value());
  CHECK(by_new->id == b.id);
  CHECK_FALSE(f.service->Get(f.tenant, "second").has_value());
  CHECK(f.store->GetWorkspaceById(b.id)->name == "renamed");
  CHECK(f.service->Get(f.tenant, "first")->id == a.id);
}

}  // namespace
}  // namespace berth::workspace
