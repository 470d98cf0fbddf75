// The workspace service: the one owner of workspace lifecycle (DESIGN.md, "Workspace
// lifecycle"). Every transition is written to SQLite before the hypervisor call and confirmed
// after it; operations on one workspace run one at a time on their own thread (they block on
// libvirt, qemu-img and the agent); at most `max_concurrent_boots` cold boots run at once.
// Start-up and a periodic pass reconcile the database, the hypervisor and the disk files. An
// idle loop asks each running agent what keeps it awake and runs `idle_action` when nothing
// has for `idle_timeout`.
//
// Thread safety: every public method may be called from any thread. Methods that touch the
// store or the hypervisor block (call them through RunBlocking from I/O threads); the ones
// marked "in memory" only take a mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/agent_client/agent_link.h"
#include "controller/hypervisor/hypervisor.h"
#include "controller/store/store.h"
#include "controller/workspace/image_store.h"
#include "controller/workspace/layout.h"
#include "controller/workspace/request.h"
#include "controller/workspace/transport.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

struct ServiceOptions {
  std::filesystem::path data_dir;    // <data>/workspaces/<id>/ holds each workspace's files
  std::filesystem::path images_dir;  // default: <data>/images
  std::string accel = "auto";        // auto (KVM when libvirt can run it) | kvm | tcg
  // Cold boots at once: three TCG boots on 2 cores took 60–70 s each against ~33 s alone
  // (ENVIRONMENT.md), so two is the most that helps.
  int max_concurrent_boots = 2;
  // A VM whose agent does not answer by then is destroyed and booted again (TCG has a rare
  // hang in jbd2 recovery). 0: 120 s under KVM, 420 s under TCG (measured 33–153 s per boot
  // here under load, with two at once).
  std::chrono::seconds boot_timeout{0};
  std::chrono::seconds resume_timeout{120};  // managedsave restore took 1.6 s here
  int boot_attempts = 3;
  // ACPI power-off grace before the plug is pulled (bookworm took 5–6 s under TCG).
  std::chrono::seconds stop_grace{45};
  // How often the idle loop asks agents for their activity, and the reconciler runs.
  std::chrono::milliseconds idle_poll{5000};
  std::chrono::seconds reconcile_every{60};
  // How often image versions that no workspace uses and that are not `current` are deleted
  // (the first on the loop thread right after start-up); 0: never. A new agent or package
  // set makes a new 1.4–2 GiB version.
  std::chrono::seconds image_gc_every{3600};
  // Unix seconds; replaced by a fake clock in unit tests.
  std::function<int64_t()> clock;
  // The agent probe (GET /v1/activity with the boot's token); replaced in unit tests.
  std::function<Result<nlohmann::json>(const agent_client::AgentLink&, std::chrono::milliseconds)>
      probe;
  // Disk creation; replaced in unit tests that run no qemu-img.
  std::function<Status(const ImageVersion&, const Layout&, int disk_gib)> make_disks;
};

// Why a running workspace is awake, for the API.
struct AwakeInfo {
  std::vector<std::string> reasons;
  std::optional<int64_t> idle_at;  // unix seconds
};

class WorkspaceService {
 public:
  WorkspaceService(store::Store& store, hypervisor::Hypervisor& hypervisor,
                   std::unique_ptr<Transport> transport, ServiceOptions options);
  ~WorkspaceService();
  WorkspaceService(const WorkspaceService&) = delete;
  WorkspaceService& operator=(const WorkspaceService&) = delete;

  // Reconciles once, then starts the idle and reconcile loops. Call once.
  Status Run();
  // Stops the loops and waits for operations in flight to reach a safe point. VMs keep
  // running; their records stay as they are and the next Run() picks them up.
  void Shutdown();

  // --- the API's operations (blocking) ---
  // `existed` is set when an Idempotency-Key matched an earlier create.
  Result<Workspace> Create(const std::string& tenant_id, const CreateRequest& request,
                           const std::string& idempotency_key, bool* existed);
  Result<Workspace> Get(const std::string& tenant_id, const std::string& id_or_name);
  Result<std::vector<Workspace>> List(const std::string& tenant_id,
                                      const store::WorkspaceFilter& filter);
  Result<Workspace> Patch(const std::string& tenant_id, const std::string& id_or_name,
                          const nlohmann::json& body);
  Result<Workspace> Delete(const std::string& tenant_id, const std::string& id_or_name);
  // `woken`: a request to the agent started it (event "woken" instead of "starting").
  Result<Workspace> Start(const std::string& tenant_id, const std::string& id_or_name,
                          bool woken = false);
  Result<Workspace> Stop(const std::string& tenant_id, const std::string& id_or_name, bool force);
  Result<Workspace> Hibernate(const std::string& tenant_id, const std::string& id_or_name);
  Result<Workspace> Restart(const std::string& tenant_id, const std::string& id_or_name);
  Result<Workspace> KeepAlive(const std::string& tenant_id, const std::string& id_or_name);

  // --- in memory ---
  // The state as last written, without touching the store; nullopt for an unknown id.
  std::optional<State> CachedState(const std::string& id);
  // The agent of a running workspace.
  Result<agent_client::AgentLink> Link(const std::string& id);
  // The agent link of a running workspace if it is already known (no file or store access).
  std::optional<agent_client::AgentLink> CachedLink(const std::string& id);
  // API traffic to the workspace (counts as activity).
  void NoteActivity(const std::string& id);
  // An open stream (exec, tunnel, ...) keeps the workspace awake until the guard goes.
  class StreamGuard {
   public:
    StreamGuard() = default;
    StreamGuard(WorkspaceService* service, std::string id, std::string kind);
    StreamGuard(StreamGuard&& other) noexcept;
    StreamGuard& operator=(StreamGuard&&) = delete;
    ~StreamGuard();

   private:
    WorkspaceService* service_ = nullptr;
    std::string id_;
    std::string kind_;
  };
  StreamGuard OpenStream(const std::string& id, std::string kind);
  AwakeInfo Awake(const std::string& id);

  // --- for tests ---
  // One pass of the idle loop / the reconciler, now, on the calling thread.
  void IdleTickForTest() { IdleTick(); }
  void ReconcileForTest() { Reconcile(); }
  void CollectImagesForTest() { CollectImages(); }
  // Waits until no operation runs.
  void WaitIdleForTest();
  const Transport& transport() const { return *transport_; }
  bool kvm() const { return kvm_; }

 private:
  struct Runtime;

  int64_t Now() const { return options_.clock(); }
  Layout LayoutFor(const std::string& id) const { return Layout(options_.data_dir, id); }
  std::shared_ptr<Runtime> RuntimeFor(const std::string& id);

  // Changes the stored record under write_mutex_: re-reads it, lets `fn` change it, writes
  // it back. Every write of a record goes through here, so a slow operation holding an old
  // copy never overwrites a PATCH or a newer state.
  Result<Workspace> Modify(const std::string& id, const std::function<Status(Workspace&)>& fn);
  // Moves `ws` from the state it has (as the caller last saw it) to `state`, compare-and-set:
  // failed_precondition when another call moved it meanwhile (`ws` is then refreshed).
  // Records an event; the in-memory state follows the store.
  Status Transition(Workspace& ws, State state, const std::string& event,
                    const std::string& message, std::optional<std::string> error = std::nullopt);
  void Record(const Workspace& ws, const std::string& type, const std::string& message,
              const nlohmann::json& data = nlohmann::json::object());

  // Runs `fn` on its own thread, after any operation already running on the workspace.
  void Spawn(const std::string& id, std::function<void()> fn);

  // The operations (lifecycle.cc). Each re-reads the record under the workspace's op lock.
  void FinishCreate(const std::string& id);
  void Boot(const std::string& id, bool woken);
  void StopOp(const std::string& id, bool force, const std::string& reason);
  void HibernateOp(const std::string& id, const std::string& reason);
  void DeleteOp(const std::string& id);
  // Boots (or resumes) and waits for the agent; true once running.
  Status BootOnce(Workspace& ws, bool resume, int attempt);
  Status WaitForAgent(Workspace& ws, std::chrono::seconds deadline);
  Result<agent_client::AgentLink> LinkFor(const Workspace& ws);
  hypervisor::DomainSpec SpecFor(const Workspace& ws, const ImageVersion& image) const;
  Status WriteToken(const Workspace& ws);
  // Stops the domain: ACPI, then destroy after the grace period (at once when `force`).
  Status PowerOff(const Workspace& ws, bool force);
  void OnDomainEvent(const hypervisor::DomainEvent& event);

  // reconcile.cc
  void Reconcile();
  // Holds every workspace's image version (ImageStore::Hold), for workspaces made before
  // holds existed; at start.
  void HoldImages();
  void CollectImages();
  void ReconcileOne(Workspace ws, hypervisor::DomainState domain);
  // idle.cc
  void IdleTick();
  void IdleCheck(const Workspace& ws);

  void Loop();

  store::Store& store_;
  hypervisor::Hypervisor& hypervisor_;
  std::unique_ptr<Transport> transport_;
  ServiceOptions options_;
  ImageStore images_;
  bool kvm_ = false;
  std::chrono::seconds boot_timeout_{};
  std::counting_semaphore<64> boot_slots_;

  // Serializes the API's read-check-write transitions (two starts must not both boot).
  std::mutex api_mutex_;
  std::mutex write_mutex_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<Runtime>> runtimes_;
  struct OpThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<OpThread> threads_;
  int running_ops_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread loop_;
};

}  // namespace berth::workspace
