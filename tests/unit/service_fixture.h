// The workspace service against the fake hypervisor, a fake agent probe and a fake clock, for
// the service's unit tests. Sync() runs one of the service's asynchronous calls to its end from
// a test thread.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>
#include <future>
#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/hypervisor/fake_hypervisor.h"
#include "controller/store/store.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace berth::workspace {

namespace fs = std::filesystem;

// Records, for each call, the workspace state stored at that moment: transitions must be
// written before the hypervisor is asked.
class RecordingHypervisor : public hypervisor::FakeHypervisor {
 public:
  store::Store* store = nullptr;
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> seen;  // (method, stored state)
  // A start or save that a killed berthd asked for and libvirt finished meanwhile: the domain
  // changes as asked, and this call fails as libvirt answers the second request.
  std::atomic<bool> start_lands_then_fails{false};
  std::atomic<bool> save_lands_then_fails{false};
  // A disk snapshot that moved the disks, answered with an error (a dropped connection).
  std::atomic<bool> snapshot_lands_then_fails{false};
  Result<hypervisor::SnapshotTaken> Snapshot(const std::string& name, const hypervisor::SnapshotSpec& snapshot) override {
    Note("Snapshot", name);
    if (snapshot_lands_then_fails.exchange(false)) {
      (void)FakeHypervisor::Snapshot(name, snapshot);
      return Fail(ErrorCode::kUnavailable, "libvirt snapshot the disks: connection lost");
    }
    return FakeHypervisor::Snapshot(name, snapshot);
  }
  // What libvirt finishes of a killed berthd's request while the next one waits for its jobs.
  std::function<void()> on_settle;
  Status Settle(const std::string& name, std::chrono::seconds timeout) override {
    Note("Settle", name);
    if (auto landing = std::exchange(on_settle, nullptr)) landing();
    return FakeHypervisor::Settle(name, timeout);
  }
  Status RestoreMemory(const std::string& memory_file, const hypervisor::DomainSpec& spec) override {
    Note("RestoreMemory", spec.name);
    return FakeHypervisor::RestoreMemory(memory_file, spec);
  }
  // A start cut short: libvirt says paused until something starts the domain again.
  std::atomic<bool> paused_until_start{false};
  Result<hypervisor::DomainState> State(const std::string& name) override {
    if (paused_until_start) return hypervisor::DomainState::kPaused;
    return FakeHypervisor::State(name);
  }
  Status Start(const std::string& name) override {
    Note("Start", name);
    if (paused_until_start.exchange(false)) return {};
    if (start_lands_then_fails.exchange(false)) {
      (void)FakeHypervisor::Start(name);  // the earlier request's; its result is not this call's
      return Fail(ErrorCode::kFailedPrecondition, name + " is already running");
    }
    return FakeHypervisor::Start(name);
  }
  Status PressPowerButton(const std::string& name) override { Note("PressPowerButton", name); return FakeHypervisor::PressPowerButton(name); }
  Status Save(const std::string& name) override {
    Note("Save", name);
    if (save_lands_then_fails.exchange(false)) {
      (void)FakeHypervisor::Save(name);  // the earlier request's; its result is not this call's
      return Fail(ErrorCode::kFailedPrecondition, "managed save: domain is not running");
    }
    return FakeHypervisor::Save(name);
  }
  Status Undefine(const std::string& name) override { Note("Undefine", name); return FakeHypervisor::Undefine(name); }

 private:
  void Note(const std::string& method, const std::string& name) {
    auto ws = store->GetWorkspaceById(name.substr(6));
    std::lock_guard lock(mutex);
    seen.emplace_back(method, ws ? std::string(StateName(ws->state)) : "missing");
  }
};

class FakeTransport : public Transport {
 public:
  std::string_view name() const override { return "unix"; }
  Status BeforeStart(Workspace&, const Layout&, bool resume, hypervisor::DomainSpec&) override {
    (resume ? resumes : boots)++;
    std::lock_guard lock(mutex);
    return refuse_boots ? Status(Fail(*refuse_boots)) : Status{};
  }
  void AfterStop(const Workspace&, const Layout&, bool) override { stops++; }
  Result<Endpoint> AgentEndpoint(const Workspace&, const Layout& layout) const override {
    Endpoint ep;
    ep.kind = Endpoint::Kind::kUnix;
    ep.path = layout.agent_socket().string();
    return ep;
  }
  std::atomic<int> boots{0}, resumes{0}, stops{0};
  // Every boot fails before the VM starts with this error (as the guest network's BeforeBoot
  // does when isolation is not in place), until reset.
  std::optional<Error> refuse_boots;
  std::mutex mutex;
};

// Runs an awaitable to its end on a thread of its own and returns its result.
class Runner {
 public:
  Runner() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~Runner() {
    guard_.reset();
    io_.stop();
    thread_.join();
  }
  template <class T>
  T Sync(boost::asio::awaitable<T> task) {
    return boost::asio::co_spawn(io_, std::move(task), boost::asio::use_future).get();
  }
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

struct Fixture {
  testing::TempDir dir{"berth-service"};
  std::unique_ptr<store::Store> store;
  RecordingHypervisor hv;
  FakeTransport* transport = nullptr;
  std::unique_ptr<WorkspaceService> service;
  Runner runner;
  std::atomic<int64_t> now{1'700'000'000};
  std::atomic<bool> agent_up{true};
  std::mutex activity_mutex;
  nlohmann::json activity = nlohmann::json::object();
  // Probes of the agents whose socket path contains one of these never answer.
  std::mutex silent_mutex;
  std::set<std::string> silent;
  std::atomic<int> probes_in_flight{0};
  std::string tenant;
  ServiceOptions options;

  explicit Fixture(const std::function<void(ServiceOptions&)>& customize = {}) {
    fs::create_directories(dir.path() / "images/base/v1");
    for (const char* f : {"disk.qcow2", "vmlinuz", "initrd.img"}) {
      std::ofstream(dir.path() / "images/base/v1" / f) << "x";
    }
    fs::create_directory_symlink("v1", dir.path() / "images/base/current");
    store = std::move(*store::Store::Open((dir.path() / "berth.db").string()));
    tenant = store->CreateTenant("t1", now)->id;
    hv.store = store.get();
    options.data_dir = dir.path();
    options.accel = "tcg";
    options.boot_timeout = std::chrono::seconds(2);
    options.stop_grace = std::chrono::seconds(1);
    options.idle_poll = std::chrono::hours(1);  // ticks come from the tests
    options.reconcile_every = std::chrono::hours(1);
    options.clock = [this] { return now.load(); };
    options.probe = [this](const agent_client::AgentLink& link,
                           std::chrono::milliseconds) -> Task<Result<nlohmann::json>> {
      bool hang = false;
      {
        std::lock_guard lock(silent_mutex);
        for (const auto& s : silent) hang = hang || link.endpoint.path.find(s) != std::string::npos;
      }
      if (hang) {
        ++probes_in_flight;
        boost::asio::steady_timer forever(co_await boost::asio::this_coro::executor, std::chrono::hours(24));
        auto [ec] = co_await forever.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        --probes_in_flight;
        co_return Fail(ErrorCode::kUnavailable, ec ? "cut" : "never");
      }
      if (!agent_up) co_return Fail(ErrorCode::kUnavailable, "agent down");
      std::lock_guard lock(activity_mutex);
      co_return activity;
    };
    options.make_disks = [](const ImageVersion&, const Layout& layout, int) -> Status {
      std::ofstream(layout.root_disk(0)) << "root";
      std::ofstream(layout.data_disk(0)) << "data";
      return {};
    };
    // Not the free space of the machine the tests run on, and no quota in the way of tests
    // that make many workspaces (the quota tests set their own).
    options.disk_floor = DiskFloor{0, 0.0};
    options.default_limits = Limits{kMaxLimit, kMaxLimit, kMaxLimit, kMaxLimit};
    if (customize) customize(options);
    StartService();
  }
  ~Fixture() { service->Shutdown(); }

  void StartService() {
    auto t = std::make_unique<FakeTransport>();
    transport = t.get();
    service = std::make_unique<WorkspaceService>(*store, hv, std::move(t), options);
    REQUIRE(service->Run().has_value());
  }
  // A berthd restart: the service goes, a new one starts on the same store and hypervisor.
  void RestartService() {
    service->Shutdown();
    service.reset();
    StartService();
  }

  Workspace Create(const std::string& name, const std::function<void(CreateRequest&)>& tweak = {}) {
    auto req = ParseCreateRequest({{"name", name}});
    REQUIRE(req.has_value());
    if (tweak) tweak(*req);
    auto created = runner.Sync(service->Create(tenant, *req, ""));
    REQUIRE(created.has_value());
    return created->workspace;
  }
  Result<Workspace> Start(const std::string& ref) { return runner.Sync(service->Start(tenant, ref)); }
  Result<Workspace> Stop(const std::string& ref, bool force = false) {
    return runner.Sync(service->Stop(tenant, ref, force));
  }
  Result<Workspace> Hibernate(const std::string& ref) { return runner.Sync(service->Hibernate(tenant, ref)); }
  Result<Workspace> Delete(const std::string& ref) { return runner.Sync(service->Delete(tenant, ref)); }
  Result<Workspace> Patch(const std::string& ref, nlohmann::json body) {
    return runner.Sync(service->Patch(tenant, ref, std::move(body)));
  }
  void Silence(const std::string& id) {
    std::lock_guard lock(silent_mutex);
    silent.insert(id);
  }

  State StateOf(const std::string& id) {
    auto ws = store->GetWorkspaceById(id);
    return ws ? ws->state : State::kDeleting;
  }
  // The state is reached and the operation that reached it has finished.
  bool Reaches(const std::string& id, State state) {
    bool reached = testing::WaitFor([&] { return StateOf(id) == state; }, std::chrono::seconds(10));
    service->WaitIdleForTest();
    return reached && StateOf(id) == state;
  }
  // Deleted: gone from the store and from the API.
  bool Gone(const std::string& id) {
    return testing::WaitFor([&] {
      return !store->GetWorkspaceById(id).has_value() && !service->Get(tenant, id).has_value();
    });
  }
  std::vector<std::string> Events(const std::string& id) {
    std::vector<std::string> out;
    auto events = store->ListEvents(id, 0, 1000);
    REQUIRE(events.has_value());
    for (const auto& e : *events) out.push_back(e.type);
    return out;
  }
  bool HasEvent(const std::string& id, const std::string& type) {
    auto e = Events(id);
    return std::find(e.begin(), e.end(), type) != e.end();
  }
  // The image's disk as a real (small) qcow2 file, so that layers rebased onto it are.
  void MakeQcow2Image() {
    auto image = dir.path() / "images/base/v1/disk.qcow2";
    fs::remove(image);
    REQUIRE(RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", image.string(), "16M"}, std::chrono::seconds(30))
                .has_value());
  }
};

// ServiceOptions::make_disks with real (small) qcow2 disks, for tests whose checkpoints and
// forks make overlays on them.
inline Status MakeQcow2Disks(const ImageVersion&, const Layout& layout, int) {
  for (const auto& path : {layout.root_disk(0), layout.data_disk(0)}) {
    if (auto s = RunCommand({"qemu-img", "create", "-q", "-f", "qcow2", path.string(), "16M"}, std::chrono::seconds(30));
        !s) {
      return s;
    }
  }
  return {};
}

}  // namespace berth::workspace
