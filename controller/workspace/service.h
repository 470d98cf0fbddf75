// The workspace service: the one owner of workspace lifecycle (DESIGN.md, "Workspace
// lifecycle"), in Firecracker's shape: the API parses and validates, and each workspace has one
// owner (an Actor: its record and run-time state on one strand, its operations queued there and
// run one at a time). Every transition is written to SQLite before the hypervisor call and
// confirmed after it. The service publishes every change (ChangeFeed), so waiting for a state,
// following events and waking a workspace need no polling.
//
// Threads (a fixed number, whatever the number of workspaces or operations):
//  - control (options.control_threads, 2): every actor's strand runs here: state checks and
//    transitions, SQLite writes (a few ms, serialized by the store), timers, and the agent
//    probes (asynchronous, no thread held while a guest thinks). The idle, reconcile and image
//    loops are timers on a strand of this pool.
//  - blocking (options.blocking_threads, 8): calls that block for long and have no
//    asynchronous form: libvirt, qemu-img, starting passt or a host agent, deleting files.
//    Results are posted back to the actor's strand.
//  - the hypervisor's own event thread calls OnDomainEvent, which only posts to the actor.
//
// Locks, in the only order they may nest: create_mutex_ (creates, one at a time, so an
// Idempotency-Key or a name is checked and taken atomically) -> admission_mutex_ (a tenant's
// quota is checked and the use taken in one step: a create's insert, a start's transition)
// -> registry_mutex_ (the id and name maps) -> an actor's view_mutex_ or the change feed's
// locks. No lock is held across a co_await or a hypervisor or agent call; create_mutex_ and
// admission_mutex_ are held across the store calls of a create (on a blocking thread) and
// admission_mutex_ across the tenant's limits read and the transition of a start (on its
// strand): a few ms of SQLite each.
//
// Public methods may be called from any thread. The asynchronous ones resume on the caller's
// executor; the rest never block (they read in-memory state).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/protocol/diff.h"
#include "common/protocol/exec.h"
#include "common/protocol/identity.h"
#include "controller/agent_client/agent_link.h"
#include "controller/hypervisor/hypervisor.h"
#include "controller/network/network_api.h"
#include "controller/network/network_manager.h"
#include "controller/store/store.h"
#include "controller/workspace/actor.h"
#include "controller/workspace/boot_slots.h"
#include "controller/workspace/change_feed.h"
#include "controller/workspace/host_disk.h"
#include "controller/workspace/image_store.h"
#include "controller/workspace/layout.h"
#include "controller/workspace/quota.h"
#include "controller/workspace/request.h"
#include "controller/workspace/transport.h"
#include "controller/workspace/workspace.h"

namespace berth::workspace {

template <class T>
using Task = boost::asio::awaitable<T>;

// A question berthd asks a guest's agent by itself (controller/agent_client/agent_probe.h).
using AgentCall =
    std::function<Task<Result<nlohmann::json>>(const agent_client::AgentLink&, std::chrono::milliseconds)>;

struct ServiceOptions {
  std::filesystem::path data_dir;    // <data>/workspaces/<id>/ holds each workspace's files
  std::filesystem::path images_dir;  // default: <data>/images
  // auto: KVM when a probe vCPU runs (hypervisor/kvm_probe.h), else TCG | kvm | tcg.
  std::string accel = "auto";
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
  // One agent probe, connect to last byte: an answer takes milliseconds; a guest that takes
  // longer is treated as saying nothing (it delays only its own idle check).
  std::chrono::milliseconds probe_deadline{3000};
  std::chrono::seconds reconcile_every{60};
  // How often image versions that no workspace uses and that are not `current` are deleted
  // (the first right after start-up); 0: never. A new agent or package set makes a new
  // 1.4–2 GiB version.
  std::chrono::seconds image_gc_every{3600};
  // Thread pools (see the header comment). Two control threads keep SQLite writes of one
  // workspace from delaying timers of another; eight blocking threads let a long hibernate
  // (managedsave of a big guest: tens of seconds) run beside boots and stops.
  int control_threads = 2;
  int blocking_threads = 8;
  // Unix seconds; replaced by a fake clock in unit tests.
  std::function<int64_t()> clock;
  // The agent probe (GET /v1/activity with the boot's token); replaced in unit tests. The
  // service enforces probe_deadline around it, whatever the probe does.
  AgentCall probe;
  // Has a running guest write its page cache to its disks before they are checkpointed
  // (agent_client::SyncGuest: POST /v1/sync); replaced in unit tests. The service enforces
  // sync_deadline around it; a guest that fails it is checkpointed as it is.
  AgentCall sync_guest;
  std::chrono::milliseconds sync_deadline{30000};
  // The identity call to a fork's agent (POST /v1/identity, forks.cc); replaced in unit tests.
  // Its deadline covers new SSH host keys, made in the guest (seconds under TCG).
  std::function<Task<Result<nlohmann::json>>(const agent_client::AgentLink&, protocol::IdentityRequest,
                                             std::chrono::milliseconds)>
      give_identity;
  std::chrono::milliseconds identity_deadline{60000};
  // The diff call to an agent while a checkpoint's disks are plugged in (POST /v1/diff,
  // diff.cc); replaced in unit tests. diff_budget is the guest's walk; the exchange may take
  // diff_budget plus a minute (the disks' arrival, the mounts, the answer).
  std::function<Task<Result<nlohmann::json>>(const agent_client::AgentLink&, protocol::DiffRequest,
                                             std::chrono::milliseconds)>
      diff_in_guest;
  std::chrono::milliseconds diff_budget{60000};
  // How long a guest may take to let go of a plugged disk; one that keeps it is stopped.
  std::chrono::seconds detach_timeout{30};
  // A command run to its end in a template's builder (POST /v1/exec, templates.cc); replaced in
  // unit tests. The build's timeout covers it.
  std::function<Task<Result<nlohmann::json>>(const agent_client::AgentLink&, protocol::ExecRequest,
                                             std::chrono::milliseconds)>
      run_in_guest;
  // Disk creation; replaced in unit tests that run no qemu-img.
  std::function<Status(const ImageVersion&, const Layout&, int disk_gib)> make_disks;
  // Whether KVM works here (accel "auto"); replaced in unit tests.
  std::function<bool()> kvm_works;
  // Guest network isolation (controller/network/network_manager.h); null: none (tests, the
  // unix transport). Owned by berthd; outlives the service.
  network::NetworkManager* network = nullptr;
  // Per-tenant limits: these, unless the operator set a tenant's own (Store::SetTenantLimits).
  Limits default_limits;
  // Creates are refused while the data directory's file system has less free than this.
  DiskFloor disk_floor;
  // Where the free space is read from; StatHostDisk unless a test injects its own.
  HostDiskSource host_disk;
};

// POST /v1/workspaces/{ws}/checkpoints.
struct CheckpointRequest {
  std::string name;     // empty: the checkpoint's id
  bool memory = false;  // with the guest's memory and processes (a running one)
  std::string kind = "manual";  // berthd's own: "before_restore" (the undo of a restore)
};

// A checkpoint as the API shows it: the row and what its layers take on the host.
struct CheckpointInfo {
  store::Checkpoint checkpoint;
  int64_t size_bytes = 0;  // the allocated size of its two frozen layers
};

// GET /v1/workspaces/{ws}/checkpoints/{from}/diff?to=: what changed from checkpoint `from` to
// checkpoint `to`, or to the workspace as it is now (diff.cc).
inline constexpr std::string_view kDiffToCurrent = "current";
struct DiffRequest {
  std::string from;
  std::string to = std::string(kDiffToCurrent);
  int max_entries = protocol::kDefaultDiffEntries;
};

struct CheckpointDiff {
  std::string from;  // checkpoint ids
  std::string to;    // or "current"
  protocol::DiffResult result;
};

struct RestoreResult {
  Workspace workspace;
  // The checkpoint of the state before the restore ("before_restore"), unless told not to.
  std::optional<store::Checkpoint> undo;
};

// What a workspace's first layers stand on (checkpoints.cc): `root` the image's disk and `data`
// empty, or a fork's source checkpoint's two layers.
struct DiskBase {
  std::filesystem::path root;
  std::filesystem::path data;
};

struct CreateResult {
  Workspace workspace;
  bool existed = false;  // an Idempotency-Key matched an earlier create
};

class WorkspaceService : public network::WorkspaceNetworkApi {
 public:
  WorkspaceService(store::Store& store, hypervisor::Hypervisor& hypervisor,
                   std::unique_ptr<Transport> transport, ServiceOptions options);
  ~WorkspaceService() override;
  WorkspaceService(const WorkspaceService&) = delete;
  WorkspaceService& operator=(const WorkspaceService&) = delete;

  // Loads every workspace, reconciles it with the hypervisor, and starts the idle, reconcile
  // and image loops. Returns once the first reconcile pass has been decided. Call once.
  Status Run();
  // Stops the loops and the operations at their next step (each step is safe to cut: a
  // restarted service reconciles), and waits for calls in flight. VMs keep running; their
  // records stay as they are. Idempotent.
  void Shutdown();

  // --- the API's operations -----------------------------------------------------------------
  Task<Result<CreateResult>> Create(std::string tenant_id, CreateRequest request,
                                    std::string idempotency_key);
  // `by` on each: who asks, the actor of the events the call itself commits (an API key,
  // store::KeyActor; empty: berthd). What follows later (a boot finishing) is berthd's.
  Task<Result<Workspace>> Patch(std::string tenant_id, std::string id_or_name, nlohmann::json body,
                                std::string by = {});
  Task<Result<Workspace>> Delete(std::string tenant_id, std::string id_or_name, std::string by = {});
  // `woken_by`: what started it when it is not an API call to start it ("a request to its
  // agent", "a preview request"): event "woken" instead of "starting", saying so.
  Task<Result<Workspace>> Start(std::string tenant_id, std::string id_or_name, std::string woken_by = {},
                                std::string by = {});
  Task<Result<Workspace>> Stop(std::string tenant_id, std::string id_or_name, bool force,
                               std::string by = {});
  Task<Result<Workspace>> Hibernate(std::string tenant_id, std::string id_or_name, std::string by = {});
  Task<Result<Workspace>> Restart(std::string tenant_id, std::string id_or_name, std::string by = {});
  Task<Result<Workspace>> KeepAlive(std::string tenant_id, std::string id_or_name);
  // Returns once the workspace is in `want`: failed_precondition when it settled in another
  // state that will not become `want` by itself (error, stopped, hibernated, running),
  // deadline_exceeded at `timeout`, not_found when it is deleted meanwhile.
  Task<Result<Workspace>> WaitForState(std::string tenant_id, std::string id_or_name, State want,
                                       std::chrono::milliseconds timeout);
  // The agent of a running workspace; a stopped or hibernated one is started first (wake on
  // request) unless auto_start is off (failed_precondition), and waited for up to `timeout`.
  // `by` and `what`: who and what woke it (the "woken" event's actor, as Start's `by`, and
  // its message).
  Task<Result<agent_client::AgentLink>> Wake(std::string tenant_id, std::string id,
                                             std::chrono::milliseconds timeout, std::string by = {},
                                             std::string what = "a request to its agent");

  // --- checkpoints (checkpoints.cc) ---------------------------------------------------------
  // Each runs behind the workspace's queued operations and answers once it is done. A
  // checkpoint freezes the disks' top layers as they are and gives the workspace new tops on
  // them; a restore gives it new tops on the checkpoint's layers, after checkpointing the state
  // it leaves (`undo`); a delete merges the checkpoint's layers into the layers above them.
  Task<Result<store::Checkpoint>> TakeCheckpoint(std::string tenant_id, std::string id_or_name,
                                                 CheckpointRequest request, std::string by = {});
  // Newest first. Blocking (SQLite, a stat per layer).
  Result<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& tenant_id, const std::string& id_or_name);
  Result<CheckpointInfo> GetCheckpoint(const std::string& tenant_id, const std::string& id_or_name,
                                       const std::string& checkpoint);
  Task<Result<store::Checkpoint>> DeleteCheckpoint(std::string tenant_id, std::string id_or_name,
                                                   std::string checkpoint, std::string by = {});
  Task<Result<RestoreResult>> RestoreCheckpoint(std::string tenant_id, std::string id_or_name,
                                                std::string checkpoint, bool undo, std::string by = {});

  // What changed between two checkpoints, or a checkpoint and now (diff.cc): the guest
  // compares them, with the checkpoints' disks plugged into it read-only (each under a scratch
  // overlay berthd removes after), so the workspace is woken first and runs meanwhile.
  // Behind the workspace's queued operations, like the other checkpoint calls.
  // `wake`: how long its start may take when it is stopped or hibernated.
  Task<Result<CheckpointDiff>> DiffCheckpoints(std::string tenant_id, std::string id_or_name, DiffRequest request,
                                               std::chrono::milliseconds wake, std::string by = {});

  // --- forks (forks.cc) ------------------------------------------------------------------------
  // New workspaces from a checkpoint of request.source (one taken now when none is named, with
  // memory when the source runs or sleeps): their disks are overlays on the checkpoint's layers,
  // and from a checkpoint with memory they resume it, its processes running. Each is a new
  // machine before any request reaches it: its own agent token, hostname, machine-id, SSH host
  // keys, MAC, generation ID and uid; one that cannot be given them is destroyed (error), never
  // handed out. Answers once they are recorded (creating); their boots follow.
  // The workspace an earlier create or fork with this Idempotency-Key made, if any (blocking:
  // SQLite). invalid_argument for a key past 200 characters.
  Result<std::optional<Workspace>> ByIdempotencyKey(const std::string& tenant_id, const std::string& key) const;
  Task<Result<std::vector<Workspace>>> Fork(std::string tenant_id, ForkRequest request);

  // --- templates (templates.cc) ---------------------------------------------------------------
  // A checkpoint with memory published under a name for the tenant (one is taken now when none
  // is named: the workspace must be running or hibernated); POST /v1/workspaces {template} forks
  // it. The checkpoint stays its workspace's, which can delete neither it nor itself meanwhile.
  // With a script (request.build) it answers at once, "building": a workspace of its own runs
  // the script, and its memory checkpoint afterwards is the template ("ready"), or the build is
  // "failed" with why and the end of its output, and that workspace is deleted.
  Task<Result<store::Template>> CreateTemplate(std::string tenant_id, TemplateRequest request);
  // Blocking (SQLite).
  Result<std::vector<store::Template>> ListTemplates(const std::string& tenant_id);
  Result<store::Template> GetTemplate(const std::string& tenant_id, const std::string& id_or_name);
  // A template a script built goes with the workspace berthd made for it, unless forks stand on
  // that one's checkpoint (it is left then, for them, and deletable once they are gone).
  Task<Result<store::Template>> DeleteTemplate(std::string tenant_id, std::string id_or_name, std::string by = {});

  // --- the guest network (network_ops.cc; blocking: call them off I/O threads) --------------
  // "isolated", "off" or "failed" (v1::Health::network). Any thread; does not block.
  std::string NetworkIsolation() const;
  Result<network::NetworkStatus> GetNetwork(const std::string& tenant_id, const std::string& id_or_name) override;
  // Stores the policy (an event says what changed), then applies it to the running guest.
  Result<network::NetworkStatus> SetNetwork(const std::string& tenant_id, const std::string& id_or_name,
                                            const network::Policy& policy) override;

  // --- quotas (quota.h) ----------------------------------------------------------------------
  // The tenant's limits: its own where the operator set them, else the defaults. Blocking (a
  // store read); not_found for no such tenant.
  Result<Limits> LimitsOf(const std::string& tenant_id);
  // What the tenant's workspaces use now (in memory, never blocks).
  QuotaUse UsageOf(const std::string& tenant_id) const;
  // The free space of the data directory against the floor (blocking: a statvfs).
  Status CheckHostDiskSpace() const;

  // --- in memory (never block) --------------------------------------------------------------
  Result<Workspace> Get(const std::string& tenant_id, const std::string& id_or_name) const;
  // A tenant's workspaces sorted by id, filtered, at most filter.limit of them.
  std::vector<Workspace> List(const std::string& tenant_id, const store::WorkspaceFilter& filter) const;
  AwakeInfo Awake(const std::string& id) const;
  // Every tenant's workspaces whose id or name is `id_or_name`: a public preview's host names
  // no tenant (controller/preview/). The caller decides which one, if any, it may serve.
  std::vector<Workspace> FindAcrossTenants(const std::string& id_or_name) const;
  // API traffic to the workspace (counts as activity).
  void NoteActivity(const std::string& id);
  // An open stream (exec, tunnel, ...) keeps the workspace awake until the guard goes. The
  // guard keeps its workspace's owner alive, so a delete meanwhile is harmless.
  class StreamGuard {
   public:
    StreamGuard() = default;
    StreamGuard(StreamGuard&& other) noexcept = default;
    StreamGuard& operator=(StreamGuard&&) = delete;
    ~StreamGuard();

   private:
    friend class WorkspaceService;
    StreamGuard(std::function<int64_t()> clock, std::shared_ptr<Actor> actor, std::string kind)
        : clock_(std::move(clock)), actor_(std::move(actor)), kind_(std::move(kind)) {}
    // A copy of the service's clock, not the service: a guard may outlive the service (an MCP
    // call still talking to an agent while berthd shuts down).
    std::function<int64_t()> clock_;
    std::shared_ptr<Actor> actor_;
    std::string kind_;
  };
  // An empty guard when the workspace is unknown.
  StreamGuard OpenStream(const std::string& id, std::string kind);
  // An event on the workspace's timeline (and its change feed) that no transition makes: a
  // preview token's first use, an exec. `actor`: who caused it (store/event_filter.h). not_found
  // for an unknown workspace. Blocking (SQLite): call it off I/O threads.
  Status RecordEvent(const std::string& id, const std::string& type, const std::string& message,
                     const nlohmann::json& data, std::string actor = std::string(store::kSystemActor));
  // A workspace's timeline as `filter` picks it, the workspace found by the tenant's id or name.
  // Blocking (SQLite).
  Result<std::vector<store::Event>> ListEvents(const std::string& tenant_id, const std::string& id_or_name,
                                               const store::EventFilter& filter) const;
  // Changes of one workspace, or of all of a tenant's (`workspace_id` empty).
  std::unique_ptr<Subscription> Subscribe(boost::asio::any_io_executor executor,
                                          std::string tenant_id, std::string workspace_id = {});

  const Transport& transport() const { return *transport_; }
  bool kvm() const { return kvm_.load(); }

  // --- for tests ------------------------------------------------------------------------------
  // One pass of the idle loop / the reconciler / image collection, now; returns when the
  // checks it started are done (for the idle loop, unless `wait` is false).
  void IdleTickForTest(bool wait = true);
  void ReconcileForTest();
  void CollectImagesForTest();
  // Waits until no operation is queued or running on any workspace.
  void WaitIdleForTest();
  size_t thread_count() const { return static_cast<size_t>(options_.control_threads + options_.blocking_threads); }

 private:
  using ActorPtr = std::shared_ptr<Actor>;

  int64_t Now() const { return options_.clock(); }
  Layout LayoutFor(const std::string& id) const { return Layout(options_.data_dir, id); }
  // Runs `fn` on the pool for blocking calls and resumes on the caller's executor.
  template <class F>
  auto Blocking(F&& fn) -> Task<std::invoke_result_t<std::decay_t<F>&>>;
  // Runs `fn` (synchronous, no co_await) on `actor`'s strand; resumes on the caller's executor.
  template <class F>
  auto OnStrand(const ActorPtr& actor, F&& fn) -> Task<std::invoke_result_t<std::decay_t<F>&>>;
  // The same, with the events `fn` commits by `by` (an API call's key; empty: berthd's).
  template <typename F>
  auto OnStrand(const ActorPtr& actor, std::string by, F&& fn) -> Task<std::invoke_result_t<std::decay_t<F>&>>;

  // --- registry (service.cc) ---
  ActorPtr Find(const std::string& tenant_id, const std::string& id_or_name) const;
  ActorPtr FindById(const std::string& id) const;
  Result<ActorPtr> Lookup(const std::string& tenant_id, const std::string& id_or_name) const;
  ActorPtr Adopt(Workspace ws);
  void Forget(const Actor& actor);
  std::vector<ActorPtr> AllActors() const;
  // Under admission_mutex_: quota_exceeded unless `requested` fits the tenant's limits beside
  // the use of its other workspaces (all but `self`, whose own use `requested` replaces).
  QuotaUse UsageExcept(const std::string& tenant_id, const Actor* self) const;
  Status AdmitLocked(const std::string& tenant_id, const Actor* self, const QuotaUse& requested);
  // A start-like step (start, resume, wake, restart) of `actor`, on its strand: its size must
  // fit the tenant's vCPU and memory limits. Takes admission_mutex_ and, when it fits, runs
  // `transition` under it, so that two starts cannot both take the last vCPUs.
  Status AdmitStart(Actor& actor, const std::function<Status()>& transition);
  // Under admission_mutex_, on `actor`'s strand: whether `actor`, stopped, may take the size
  // of `resized` (a PATCH of size, cpus, memory_mib or disk_gib).
  Status AdmitResize(const Actor& actor, const Workspace& resized);
  Result<CreateResult> CreateBlocking(const std::string& tenant_id, const CreateRequest& request,
                                      const std::string& idempotency_key);

  // --- on an actor's strand (transitions.cc) ---
  // Writes `ws` (the actor's record, changed) to the store, then makes it the actor's record
  // and publishes it with `event` (if any). On a failed write nothing changes.
  Status Commit(Actor& actor, Workspace ws, const std::string& event = {},
                const std::string& message = {}, const nlohmann::json& data = nlohmann::json::object());
  // Moves the actor from its current state to `state`, storing it first; records `event`.
  Status Transition(Actor& actor, State state, const std::string& event, const std::string& message,
                    std::optional<std::string> error = std::nullopt);
  // Records a timeline event without changing the record; by the actor's current event actor
  // unless `by` names another (the guest, for its refused connections).
  void Record(const Actor& actor, const std::string& type, const std::string& message,
              const nlohmann::json& data = nlohmann::json::object(), std::string_view by = {});
  // Moves to error with `message` (logged, recorded); used where an operation cannot go on.
  void EnterError(Actor& actor, const std::string& message);

  // --- the operations (operations.cc), each queued on the actor ---
  Task<void> FinishCreate(ActorPtr actor);
  // CreateBlocking's and ForkBlocking's last step, under both their locks: the image held, the
  // record and its "created" event stored, the actor adopted and its FinishCreate queued.
  // The lowest vsock CID no workspace has (vsock transport only), under create_mutex_.
  Status AssignVsockCid(Workspace& ws);
  Result<CreateResult> Register(Workspace ws, const ImageVersion& image, const std::string& by,
                                const std::string& idempotency_key, const std::string& message);
  // Fork's registration, queued on the source's actor (so never beside a delete of the
  // checkpoint).
  // The forks' names ("name", or "name-1".."name-N"), none of them taken in the tenant.
  Result<std::vector<std::string>> FreeForkNames(const std::string& tenant_id, const ForkRequest& request) const;
  Task<Result<std::vector<Workspace>>> ForkOp(ActorPtr source, std::string tenant_id, ForkRequest request,
                                              std::string checkpoint);
  Result<std::vector<Workspace>> ForkBlocking(const std::string& tenant_id, const Workspace& source,
                                              const store::Checkpoint& checkpoint, const ForkRequest& request);
  // A fork's first layers, overlays on its checkpoint's (forks.cc).
  Status MakeForkDisks(const Workspace& ws, const Layout& layout);
  // Gives a fork's guest, its agent up with its parent's token, an identity of its own (forks.cc).
  Task<Status> GiveIdentity(const ActorPtr& actor, std::string mac);
  // --- templates (templates.cc) ---
  Task<Result<store::Template>> StartTemplateBuild(std::string tenant_id, TemplateRequest request);
  Task<void> BuildTemplate(std::string tenant_id, store::Template t, TemplateBuild build, std::string by);
  Task<Result<agent_client::AgentLink>> WakeBuilder(const std::string& tenant_id, const std::string& workspace,
                                                    std::chrono::milliseconds deadline);
  Task<Result<protocol::ExecResult>> RunInBuilder(const std::string& tenant_id, const std::string& workspace,
                                                  protocol::ExecRequest request, std::chrono::milliseconds deadline);
  Task<Result<std::string>> RunBuildSteps(const std::string& tenant_id, const std::string& workspace,
                                          const TemplateBuild& build, std::string& log);
  void FailInterruptedBuilds();
  // What stands on checkpoint `c` of `ws` (`rows`: its checkpoints): forks of it or of one
  // above it, and templates of those ("template 'x'"). Deleting it would change their layers.
  std::vector<std::string> ForksOn(const Workspace& ws, const store::Checkpoint& c,
                                   const std::vector<store::Checkpoint>& rows) const;
  // The forks and templates of any checkpoint of `ws`, by name.
  std::vector<std::string> ForksOf(const Workspace& ws) const;
  Task<void> Boot(ActorPtr actor, bool woken);
  Task<void> StopOp(ActorPtr actor, bool force, std::string reason);
  Task<void> HibernateOp(ActorPtr actor, std::string reason);
  Task<void> DeleteOp(ActorPtr actor);
  Task<void> GuestStopped(ActorPtr actor, hypervisor::DomainEventKind kind, std::string detail);
  // What a boot starts the VM from: its disks (a cold boot), its managed save (a hibernated
  // one), or a restored checkpoint's memory (`resume_memory`).
  enum class BootFrom { kDisk, kSave, kMemory };
  Task<Status> BootOnce(const ActorPtr& actor, BootFrom from, int attempt);
  Task<Status> WaitForAgent(const ActorPtr& actor, std::chrono::seconds deadline);
  // Stops the domain: ACPI, then destroy after the grace period (at once when `force`).
  Task<Status> PowerOff(const ActorPtr& actor, bool force);
  // After the VM stopped or was saved: transport cleanup, the usage interval closed.
  Task<void> Stopped(const ActorPtr& actor, bool saved);
  Result<agent_client::AgentLink> ReadLink(const Workspace& ws) const;
  hypervisor::DomainSpec SpecFor(const Workspace& ws, const ImageVersion& image) const;
  Status WriteToken(const Workspace& ws, const std::optional<std::string>& token = std::nullopt) const;
  // `token` is the one the guest's agent holds from now on (a fork's new one): written, and the
  // kept next_token dropped.
  Status AdoptToken(const Workspace& ws, const std::string& token) const;
  void OnDomainEvent(const hypervisor::DomainEvent& event);
  // One hypervisor call on the blocking pool.
  Task<Result<hypervisor::DomainState>> QueryDomain(const std::string& name);
  Task<Status> OnHypervisor(Status (hypervisor::Hypervisor::*method)(const std::string&), const std::string& name);
  // The probe with its deadline enforced around it.
  Task<Result<nlohmann::json>> Probe(const agent_client::AgentLink& link, std::chrono::milliseconds deadline);
  // One call to the agent (options_.probe, options_.sync_guest) with its deadline enforced
  // around it, whatever the call does.
  Task<Result<nlohmann::json>> AskAgent(const AgentCall& call, const agent_client::AgentLink& link,
                                        std::chrono::milliseconds deadline);
  // A KVM boot failed in a way that says KVM does not work here: TCG from now on.
  bool FallBackToTcg(const Actor& actor, const Error& error);

  // --- checkpoints (checkpoints.cc) ---
  // Runs `check` on the actor's strand now (between operations) and, when it passes, queues
  // `op` behind the operations already queued; resumes the caller with op's result.
  template <class T>
  Task<Result<T>> Queued(ActorPtr actor, std::function<Status()> check, std::function<Task<Result<T>>()> op);
  Task<Result<store::Checkpoint>> CheckpointOp(ActorPtr actor, CheckpointRequest request, std::string by);
  // Whether a checkpoint can be taken in this state (running or stopped; with memory, running).
  static Status CheckpointableNow(const Workspace& ws, bool memory);
  // A running VM's disks onto the layers of generation `next` (made and adopted already): the
  // guest syncs (without memory), then the hypervisor moves both disks at once, writing the
  // memory to `memory_file` first when there is one.
  Task<Result<hypervisor::SnapshotTaken>> MoveRunningDisks(ActorPtr actor, std::string checkpoint, Layout layout,
                                                           int64_t next, std::string memory_file);
  // How a restore reaches a stopped workspace: it is one; it was running and its stop is
  // decided (disks only: stopped, restored, started again); it runs and the checkpoint has
  // memory (its own memory checkpointed as the undo, then pulled, restored and resumed).
  enum class RestoreFrom { kStopped, kRunning, kRunningMemory };
  Task<Result<RestoreResult>> RestoreOp(ActorPtr actor, std::string checkpoint, bool undo, std::string by,
                                        RestoreFrom from);
  Task<Result<store::Checkpoint>> DeleteCheckpointOp(ActorPtr actor, std::string checkpoint, std::string by);
  // On the strand: stores `ws` (its new disk generation) with `change` and the event, then
  // makes it the actor's record and publishes it (Commit, for disks).
  Status CommitDisks(Actor& actor, Workspace ws, const store::DiskChange& change, const std::string& event,
                     const std::string& message, const nlohmann::json& data, const std::string& by);
  // At start-up: rows "taking" finished when the domain's disks already moved onto their next
  // generation (a running VM's checkpoint cut short after the move), else dropped; layer files
  // that neither the top nor a checkpoint owns (a checkpoint, restore or delete cut short)
  // removed. Updates `records` to what the store now says.
  void ReconcileDisks(std::vector<Workspace>& records);
  // ReconcileDisks' first step: finishes the checkpoint deletes a kill cut short after their
  // first rebase (`rows`, the workspace's checkpoints, is read again after each).
  void FinishCutShortDeletes(Workspace& ws, const Layout& layout, std::vector<store::Checkpoint>& rows);
  // --- diff (diff.cc) ---
  Task<Result<CheckpointDiff>> DiffOp(ActorPtr actor, DiffRequest request, std::string by);
  // The disks a diff plugged in, unplugged, and their scratch overlays removed: after each diff,
  // and at start-up for one a killed berthd left. False when the guest kept one (it is left
  // for the caller to stop; the files stay until it is).
  bool UnplugDiffDisks(const Workspace& ws, const Layout& layout);
  // What checkpoint `c`'s layers stand on when it has no parent among `rows`: the image's disk
  // (and nothing under the data disk), or for a fork its source checkpoint's two layers; empty
  // when it has a parent. What a delete rebases the layers above `c` onto.
  Result<DiskBase> ImageDiskUnder(const Workspace& ws, const store::Checkpoint& c,
                                               const std::vector<store::Checkpoint>& rows);

  // --- idle (idle.cc) ---
  Task<void> IdleLoop();
  void IdleTick();
  Task<void> IdleCheck(ActorPtr actor);
  // --- rolling checkpoints (rolling.cc) ---
  Task<void> MaybeRollCheckpoint(ActorPtr actor, int64_t now, int64_t last_active);
  Task<void> TakeRolling(ActorPtr actor);
  Task<void> PruneRolling(ActorPtr actor);
  // --- reconcile (reconcile.cc) ---
  Task<void> ReconcileLoop();
  Task<void> ReconcileAll();
  void ReconcileOne(const ActorPtr& actor, hypervisor::DomainState domain);
  void HoldImages();
  // At start-up, before the first reconcile: removes what a create cut short before its record
  // was stored left behind (its directory, with no disk yet, and its image hold).
  void DropUnrecordedCreates(const std::vector<Workspace>& records);
  Task<void> ImageLoop();
  void CollectImages();

  store::Store& store_;
  hypervisor::Hypervisor& hypervisor_;
  std::unique_ptr<Transport> transport_;
  ServiceOptions options_;
  ImageStore images_;
  std::atomic<bool> kvm_{false};
  std::chrono::seconds boot_timeout_{};
  ChangeFeed feed_;

  boost::asio::thread_pool control_;
  boost::asio::thread_pool blocking_;
  // The loops' strand (idle, reconcile, images).
  Actor::Strand loops_;
  BootSlots boot_slots_;

  std::mutex create_mutex_;
  std::mutex admission_mutex_;
  mutable std::mutex registry_mutex_;
  std::map<std::string, ActorPtr> actors_;                                // by id
  // Every actor made, deleted ones included, for Shutdown to empty their queues.
  std::vector<std::weak_ptr<Actor>> every_actor_;
  std::map<std::pair<std::string, std::string>, std::string> by_name_;   // (tenant, name) -> id
  std::atomic<bool> stopping_{false};
  std::atomic<int> loops_running_{0};
};

}  // namespace berth::workspace
