// The workspace service's front: construction and lifetime, the registry of owners (by id and
// by (tenant, name)), the API's operations (each a short step on the workspace's strand that
// checks the state, transitions and queues the operation), waiting, and the in-memory reads.
// The operations themselves are in operations.cc, the transitions in transitions.cc, the idle
// loop in idle.cc, reconciliation in reconcile.cc.
#include "controller/workspace/service.h"

#include <future>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "common/random.h"
#include "common/unix_time.h"
#include "controller/agent_client/agent_probe.h"
#include "controller/hypervisor/kvm_probe.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_internal.h"

namespace berth::workspace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

Status DefaultMakeDisks(const ImageVersion& image, const Layout& layout, int disk_gib) {
  // Each disk is made under a temporary name and renamed when complete, so a file with the
  // final name is always a whole disk (an interrupted create is redone, not trusted).
  auto make = [](const fs::path& final_path, const std::function<Status(const fs::path&)>& fn) -> Status {
    std::error_code ec;
    if (fs::exists(final_path, ec)) return {};
    fs::path tmp = final_path;
    tmp += ".tmp";
    fs::remove(tmp, ec);
    if (auto s = fn(tmp); !s) return s;
    fs::rename(tmp, final_path, ec);
    if (ec) return Fail(ErrnoError(ec.value(), "rename " + tmp.string()));
    return {};
  };
  // A new workspace's disks are generation 0; checkpoints make the others (checkpoints.cc).
  if (auto s = make(layout.root_disk(0), [&](const fs::path& p) { return CreateOverlay(image.disk, p); }); !s) {
    return s;
  }
  return make(layout.data_disk(0), [&](const fs::path& p) { return CreateBlankDisk(p, disk_gib); });
}

// States that will not turn into another by themselves.
bool Settled(State state) {
  return state == State::kError || state == State::kStopped || state == State::kHibernated ||
         state == State::kRunning;
}

bool LabelsMatch(const Workspace& ws, const std::vector<std::pair<std::string, std::string>>& labels) {
  for (const auto& [k, v] : labels) {
    auto it = ws.labels.find(k);
    if (it == ws.labels.end() || !it->is_string() || it->get_ref<const std::string&>() != v) return false;
  }
  return true;
}

}  // namespace

WorkspaceService::WorkspaceService(store::Store& store, hypervisor::Hypervisor& hypervisor,
                                   std::unique_ptr<Transport> transport, ServiceOptions options)
    : store_(store),
      hypervisor_(hypervisor),
      transport_(std::move(transport)),
      options_(std::move(options)),
      images_(options_.images_dir.empty() ? options_.data_dir / "images" : options_.images_dir),
      control_(static_cast<size_t>(std::max(1, options_.control_threads))),
      blocking_(static_cast<size_t>(std::max(1, options_.blocking_threads))),
      loops_(asio::make_strand(control_.get_executor())),
      boot_slots_(std::max(1, options_.max_concurrent_boots)) {
  if (!options_.clock) options_.clock = UnixNow;
  if (!options_.probe) options_.probe = agent_client::ProbeActivity;
  if (!options_.sync_guest) options_.sync_guest = agent_client::SyncGuest;
  if (!options_.give_identity) options_.give_identity = agent_client::GiveIdentity;
  if (!options_.run_in_guest) options_.run_in_guest = agent_client::RunInGuest;
  if (!options_.diff_in_guest) options_.diff_in_guest = agent_client::DiffInGuest;
  if (!options_.make_disks) options_.make_disks = DefaultMakeDisks;
  if (!options_.host_disk) options_.host_disk = StatHostDisk;
  if (!options_.kvm_works) {
    options_.kvm_works = [this] {
      if (!hypervisor_.KvmAvailable()) return false;
      auto probe = hypervisor::ProbeKvm(std::chrono::seconds(2));
      if (!probe) spdlog::warn("KVM: {}; guests run under TCG", probe.error().message);
      return probe.has_value();
    };
  }
}

WorkspaceService::~WorkspaceService() { Shutdown(); }

Status WorkspaceService::Run() {
  if (options_.accel == "kvm") {
    kvm_ = true;
  } else if (options_.accel == "tcg") {
    kvm_ = false;
  } else {
    kvm_ = options_.kvm_works();
  }
  boot_timeout_ = options_.boot_timeout.count() > 0 ? options_.boot_timeout
                                                    : std::chrono::seconds(kvm_ ? 120 : 420);
  std::error_code ec;
  fs::create_directories(options_.data_dir / "workspaces", ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + (options_.data_dir / "workspaces").string()));
  // QEMU (another user) must traverse to the disks and the run/ directories.
  fs::permissions(options_.data_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  fs::permissions(options_.data_dir / "workspaces",
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  auto all = store_.ListAllWorkspaces();
  if (!all) return Fail(all.error());
  DropUnrecordedCreates(*all);
  FailInterruptedBuilds();
  ReconcileDisks(*all);
  for (auto& ws : *all) Adopt(std::move(ws));
  spdlog::info("workspaces: {} loaded; {} guests, {} transport, boot deadline {} s", all->size(),
               kvm_ ? "KVM" : "TCG", transport_->name(), boot_timeout_.count());
  hypervisor_.SetEventHandler([this](const hypervisor::DomainEvent& e) { OnDomainEvent(e); });
  HoldImages();
  // The first reconcile pass decides every workspace before the API serves; the operations it
  // queues run afterwards.
  auto first = asio::co_spawn(loops_, ReconcileAll(), asio::use_future);
  first.get();
  auto loop = [this](Task<void> (WorkspaceService::*body)()) {
    ++loops_running_;
    auto run = [this, body]() -> Task<void> {
      co_await (this->*body)();
      --loops_running_;
    };
    asio::co_spawn(loops_, std::move(run), asio::detached);
  };
  loop(&WorkspaceService::IdleLoop);
  loop(&WorkspaceService::ReconcileLoop);
  loop(&WorkspaceService::ImageLoop);
  return {};
}

void WorkspaceService::Shutdown() {
  if (stopping_.exchange(true)) return;
  hypervisor_.SetEventHandler(nullptr);
  boot_slots_.Close();
  feed_.Close();
  // No step of any operation runs from here on; each is safe to cut (a restarted service
  // reconciles). Blocking calls in flight finish before their coroutines' frames go away.
  control_.stop();
  control_.join();
  blocking_.join();
  // Ops queued behind the stop hold their actor: with no thread left to drain them, each
  // actor would keep itself alive (LeakSanitizer saw it in the ASan build).
  std::vector<ActorPtr> live;
  {
    std::lock_guard lock(registry_mutex_);
    for (auto& weak : every_actor_) {
      if (auto a = weak.lock()) live.push_back(std::move(a));
    }
  }
  for (auto& a : live) a->DropQueued();  // outside the lock: dropped ops run their destructors
}

// --- registry ---------------------------------------------------------------------------------

WorkspaceService::ActorPtr WorkspaceService::FindById(const std::string& id) const {
  std::lock_guard lock(registry_mutex_);
  auto it = actors_.find(id);
  return it == actors_.end() ? nullptr : it->second;
}

WorkspaceService::ActorPtr WorkspaceService::Find(const std::string& tenant_id,
                                                  const std::string& id_or_name) const {
  std::lock_guard lock(registry_mutex_);
  if (auto it = by_name_.find({tenant_id, id_or_name}); it != by_name_.end()) {
    auto a = actors_.find(it->second);
    if (a != actors_.end()) return a->second;
  }
  auto it = actors_.find(id_or_name);
  if (it == actors_.end()) return nullptr;
  // Another tenant's workspace is not there at all.
  return it->second->Snapshot().tenant_id == tenant_id ? it->second : nullptr;
}

Result<WorkspaceService::ActorPtr> WorkspaceService::Lookup(const std::string& tenant_id,
                                                            const std::string& id_or_name) const {
  auto actor = Find(tenant_id, id_or_name);
  if (!actor) return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", id_or_name));
  return actor;
}

WorkspaceService::ActorPtr WorkspaceService::Adopt(Workspace ws) {
  auto actor = std::make_shared<Actor>(asio::make_strand(control_.get_executor()), ws);
  actor->NoteActivity(ws.last_active_at.value_or(ws.updated_at));
  actor->persisted_activity = ws.last_active_at.value_or(0);
  std::lock_guard lock(registry_mutex_);
  actors_[ws.id] = actor;
  by_name_[{ws.tenant_id, ws.name}] = ws.id;
  if (every_actor_.size() >= 2 * actors_.size() + 16) {
    std::erase_if(every_actor_, [](const auto& w) { return w.expired(); });
  }
  every_actor_.push_back(actor);
  return actor;
}

void WorkspaceService::Forget(const Actor& actor) {
  auto ws = actor.Snapshot();
  std::lock_guard lock(registry_mutex_);
  actors_.erase(ws.id);
  auto it = by_name_.find({ws.tenant_id, ws.name});
  if (it != by_name_.end() && it->second == ws.id) by_name_.erase(it);
}

std::vector<WorkspaceService::ActorPtr> WorkspaceService::AllActors() const {
  std::lock_guard lock(registry_mutex_);
  std::vector<ActorPtr> out;
  out.reserve(actors_.size());
  for (const auto& [id, a] : actors_) out.push_back(a);
  return out;
}

// --- create -------------------------------------------------------------------------------------

Result<std::optional<Workspace>> WorkspaceService::ByIdempotencyKey(const std::string& tenant_id,
                                                                   const std::string& key) const {
  if (key.size() > 200) return Fail(ErrorCode::kInvalidArgument, "Idempotency-Key is longer than 200 characters");
  auto earlier = store_.FindIdempotencyKey(tenant_id, key);
  if (!earlier) return Fail(earlier.error());
  if (!*earlier) return std::optional<Workspace>();
  auto actor = FindById(**earlier);
  if (!actor) return std::optional<Workspace>();
  return std::optional<Workspace>(actor->Snapshot());
}

Result<CreateResult> WorkspaceService::CreateBlocking(const std::string& tenant_id,
                                                      const CreateRequest& request,
                                                      const std::string& idempotency_key) {
  std::lock_guard create(create_mutex_);
  if (!idempotency_key.empty()) {
    if (idempotency_key.size() > 200) {
      return Fail(ErrorCode::kInvalidArgument, "Idempotency-Key is longer than 200 characters");
    }
    auto earlier = store_.FindIdempotencyKey(tenant_id, idempotency_key);
    if (!earlier) return Fail(earlier.error());
    if (*earlier) {
      if (auto actor = FindById(**earlier)) return CreateResult{actor->Snapshot(), true};
    }
  }
  if (Find(tenant_id, request.name)) {
    return Fail(ErrorCode::kAlreadyExists, fmt::format("a workspace named '{}' already exists", request.name));
  }
  auto image = images_.Current(request.image);
  if (!image) {
    return Fail(image.error().code == ErrorCode::kNotFound ? ErrorCode::kFailedPrecondition
                                                           : image.error().code,
                image.error().message);
  }
  // Admission before anything is made: a refused create leaves no record, file or event.
  // The lock is held until the workspace is in the registry, so that parallel creates (and
  // starts) see each other's use.
  std::lock_guard admission(admission_mutex_);
  QuotaUse ask;
  ask.workspaces = 1;
  ask.vcpus = request.vcpus;  // a create boots at once
  ask.memory_mib = request.memory_mib;
  ask.disk_gib = request.disk_gib;
  if (auto s = AdmitLocked(tenant_id, nullptr, ask); !s) return Fail(s.error());
  if (auto s = CheckHostDiskSpace(); !s) {
    spdlog::warn("create of '{}' for tenant {} refused: {}", request.name, tenant_id, s.error().message);
    return Fail(s.error());
  }
  Workspace ws;
  ws.id = NewId("ws");
  ws.tenant_id = tenant_id;
  ws.name = request.name;
  ws.image = image->name;
  ws.image_version = image->version;
  ws.size = request.size;
  ws.vcpus = request.vcpus;
  ws.memory_mib = request.memory_mib;
  ws.disk_gib = request.disk_gib;
  ws.idle_timeout_s = request.idle_timeout_s;
  ws.idle_action = request.idle_action;
  ws.max_runtime_s = request.max_runtime_s;
  ws.checkpoints = request.checkpoints;
  ws.auto_start = request.auto_start;
  ws.screen = request.screen;
  ws.env = request.env;
  ws.labels = request.labels;
  ws.network = request.network;
  ws.state = State::kCreating;
  ws.transport = std::string(transport_->name());
  ws.uuid = NewUuid();
  ws.created_at = ws.updated_at = Now();
  if (auto s = AssignVsockCid(ws); !s) return Fail(s.error());
  auto message = fmt::format("image {} {}, {} vCPU, {} MiB, {} GiB", ws.image,
                             ws.image_version.substr(0, 12), ws.vcpus, ws.memory_mib, ws.disk_gib);
  return Register(std::move(ws), *image, request.by, idempotency_key, message);
}

Status WorkspaceService::AssignVsockCid(Workspace& ws) {
  if (ws.transport != "vsock") return {};
  auto used = store_.UsedVsockCids();
  if (!used) return Fail(used.error());
  int64_t cid = 3;  // 0-2 are reserved (hypervisor, local, host)
  std::sort(used->begin(), used->end());
  for (int64_t u : *used) {
    if (u == cid) ++cid;
  }
  ws.vsock_cid = cid;
  return {};
}

Result<CreateResult> WorkspaceService::Register(Workspace ws, const ImageVersion& image, const std::string& by,
                                                const std::string& idempotency_key, const std::string& message) {
  // Held before the record exists (and with the workspace's directory, which keeps the hold
  // live): image collection never removes a version a workspace is about to be made from. A
  // version collected since Current() is reported like a missing one.
  auto layout = LayoutFor(ws.id);
  std::error_code ec;
  fs::create_directories(layout.dir, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + layout.dir.string()));
  auto forget = [&] {
    images_.Release(ws.image, ws.image_version, ws.id);
    std::error_code ignored;
    fs::remove_all(layout.dir, ignored);
  };
  if (auto held = images_.Hold(image, ws.id, layout.root_disk(0)); !held) {
    forget();
    return Fail(held.error().code == ErrorCode::kNotFound ? ErrorCode::kFailedPrecondition
                                                          : held.error().code,
                held.error().message);
  }
  // The record, its idempotency key and its "created" event in one transaction
  // (transitions.cc says why).
  store::NewEvent created{Now(), "created", message,
                          nlohmann::json{{"state", std::string(StateName(ws.state))}}};
  if (!by.empty()) created.actor = by;
  auto inserted = store_.InsertWorkspace(ws, created, idempotency_key);
  if (!inserted) {
    forget();
    return Fail(inserted.error());
  }
  Change change;
  change.tenant_id = ws.tenant_id;
  change.workspace_id = ws.id;
  change.workspace = ws;
  change.event = std::move(*inserted);
  spdlog::info("workspace {} ({}): created: {}", ws.id, ws.name, message);
  auto actor = Adopt(ws);
  feed_.Publish(change);
  asio::post(actor->strand(), [this, actor] {
    actor->Enqueue([this, actor] { return FinishCreate(actor); });
  });
  return CreateResult{std::move(ws), false};
}

Task<Result<CreateResult>> WorkspaceService::Create(std::string tenant_id, CreateRequest request,
                                                    std::string idempotency_key) {
  if (stopping_) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
  auto create = [this, &tenant_id, &request, &idempotency_key] {
    return CreateBlocking(tenant_id, request, idempotency_key);
  };
  co_return co_await Blocking(std::move(create));
}

// --- quotas -------------------------------------------------------------------------------------

Result<Limits> WorkspaceService::LimitsOf(const std::string& tenant_id) {
  auto overrides = store_.GetTenantLimits(tenant_id);
  if (!overrides) return Fail(overrides.error());
  return Resolve(options_.default_limits, *overrides);
}

QuotaUse WorkspaceService::UsageOf(const std::string& tenant_id) const {
  return UsageExcept(tenant_id, nullptr);
}

QuotaUse WorkspaceService::UsageExcept(const std::string& tenant_id, const Actor* self) const {
  QuotaUse total;
  for (const auto& a : AllActors()) {
    if (a.get() == self) continue;
    auto ws = a->Snapshot();
    if (ws.tenant_id != tenant_id) continue;
    auto use = UseOf(ws);
    total.workspaces += use.workspaces;
    total.vcpus += use.vcpus;
    total.memory_mib += use.memory_mib;
    total.disk_gib += use.disk_gib;
  }
  return total;
}

Status WorkspaceService::CheckHostDiskSpace() const {
  auto disk = options_.host_disk(options_.data_dir);
  if (!disk) return Fail(disk.error());
  return CheckHostDisk(*disk, options_.disk_floor);
}

Status WorkspaceService::AdmitLocked(const std::string& tenant_id, const Actor* self,
                                     const QuotaUse& requested) {
  auto limits = LimitsOf(tenant_id);
  if (!limits) return Fail(limits.error());
  // `self`'s own use is left out: it is what `requested` asks for again.
  QuotaUse in_use = UsageExcept(tenant_id, self);
  auto fits = CheckQuota(tenant_id, *limits, in_use, requested);
  if (!fits) spdlog::info("tenant {}: refused: {}", tenant_id, fits.error().message);
  return fits;
}

Status WorkspaceService::AdmitStart(Actor& actor, const std::function<Status()>& transition) {
  std::lock_guard admission(admission_mutex_);
  const Workspace& ws = actor.record();
  QuotaUse ask;
  ask.vcpus = ws.vcpus;
  ask.memory_mib = ws.memory_mib;
  if (auto s = AdmitLocked(ws.tenant_id, &actor, ask); !s) return s;
  return transition();
}

Status WorkspaceService::AdmitResize(const Actor& actor, const Workspace& resized) {
  const Workspace& now = actor.record();
  // A stopped workspace holds no vCPUs or memory: its new size must fit the limits on its own
  // (or it could never start); the tenant's other workspaces are counted at its start.
  QuotaUse size;
  size.vcpus = resized.vcpus;
  size.memory_mib = resized.memory_mib;
  auto limits = LimitsOf(now.tenant_id);
  if (!limits) return Fail(limits.error());
  if (auto s = CheckQuota(now.tenant_id, *limits, QuotaUse{}, size); !s) return s;
  if (resized.disk_gib <= now.disk_gib) return {};
  // A bigger disk counts against the tenant's disk beside its other workspaces', and needs a
  // host with room to spare.
  QuotaUse disk;
  disk.disk_gib = resized.disk_gib;
  if (auto s = AdmitLocked(now.tenant_id, &actor, disk); !s) return s;
  return CheckHostDiskSpace();
}

// --- the API's transitions --------------------------------------------------------------------

Task<Result<Workspace>> WorkspaceService::Patch(std::string tenant_id, std::string id_or_name,
                                                nlohmann::json body, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto step = [this, a, &body]() -> Result<Workspace> {
    Workspace ws = a->record();
    if (auto s = ApplyPatch(body, ws); !s) return Fail(s.error());
    if (ws.name != a->record().name && Find(ws.tenant_id, ws.name)) {
      return Fail(ErrorCode::kAlreadyExists, fmt::format("a workspace named '{}' already exists", ws.name));
    }
    // The size applies at the next cold boot (the domain is defined from the record, the data
    // disk grown, then); the admission lock is held through the commit.
    std::unique_lock<std::mutex> admission;
    if (SizeChanged(a->record(), ws)) {
      State state = a->record().state;
      if (state != State::kStopped && state != State::kError) {
        return Fail(ErrorCode::kFailedPrecondition,
                    fmt::format("workspace '{}' is {}: stop it to change its size", ws.name, StateName(state)));
      }
      admission = std::unique_lock(admission_mutex_);
      if (auto s = AdmitResize(*a, ws); !s) return Fail(s.error());
    }
    ws.updated_at = Now();
    // Env values are often secrets: the event names the variables, not their values.
    nlohmann::json detail = body;
    if (auto it = detail.find("env"); it != detail.end() && it->is_object()) {
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [name, value] : it->items()) names.push_back(name);
      *it = {{"names", names}};
    }
    if (auto s = Commit(*a, ws, "updated", DumpJson(detail)); !s) return Fail(s.error());
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::Delete(std::string tenant_id, std::string id_or_name, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto step = [this, a]() -> Result<Workspace> {
    if (a->record().state == State::kDeleting) return a->record();
    if (auto forks = ForksOf(a->record()); !forks.empty()) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("workspace '{}' has forks or templates standing on its checkpoints ({}): delete them first",
                              a->record().name, fmt::join(forks, ", ")));
    }
    if (auto s = Transition(*a, State::kDeleting, "deleting", ""); !s) return Fail(s.error());
    a->Enqueue([this, a] { return DeleteOp(a); });
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::Start(std::string tenant_id, std::string id_or_name,
                                                std::string woken_by, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  const bool woken = !woken_by.empty();
  auto step = [this, a, woken, &woken_by]() -> Result<Workspace> {
    switch (a->record().state) {
      case State::kRunning:
      case State::kStarting:
      case State::kCreating:
        return a->record();
      case State::kStopped:
      case State::kHibernated:
      case State::kError:
        break;
      default:
        return Fail(Conflict(a->record(), "start"));
    }
    auto transition = [&] {
      return Transition(*a, State::kStarting, woken ? "woken" : "starting",
                        woken ? woken_by + " started it" : "");
    };
    if (auto s = AdmitStart(*a, transition); !s) return Fail(s.error());
    a->NoteActivity(Now());
    a->Enqueue([this, a, woken] { return Boot(a, woken); });
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::Stop(std::string tenant_id, std::string id_or_name, bool force, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto step = [this, a, force]() -> Result<Workspace> {
    switch (a->record().state) {
      case State::kStopped:
      case State::kStopping:
        return a->record();
      case State::kRunning:
      case State::kStarting:
      case State::kHibernated:
      case State::kError:
        break;
      default:
        return Fail(Conflict(a->record(), "stop"));
    }
    if (auto s = Transition(*a, State::kStopping, "stopping", force ? "forced" : ""); !s) {
      return Fail(s.error());
    }
    a->Enqueue([this, a, force] { return StopOp(a, force, "stopped"); });
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::Hibernate(std::string tenant_id, std::string id_or_name, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto step = [this, a]() -> Result<Workspace> {
    State state = a->record().state;
    if (state == State::kHibernated || state == State::kHibernating) return a->record();
    if (state != State::kRunning) return Fail(Conflict(a->record(), "hibernate"));
    if (auto s = Transition(*a, State::kHibernating, "hibernating", ""); !s) return Fail(s.error());
    a->Enqueue([this, a] { return HibernateOp(a, "hibernated"); });
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::Restart(std::string tenant_id, std::string id_or_name, std::string by) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto step = [this, a]() -> Result<Workspace> {
    State state = a->record().state;
    if (state != State::kRunning && state != State::kError && state != State::kStarting) {
      return Fail(Conflict(a->record(), "restart"));
    }
    // Its size is asked for again: a restart over a limit lowered meanwhile is refused before
    // anything stops.
    auto transition = [&] { return Transition(*a, State::kStopping, "stopping", "restart"); };
    if (auto s = AdmitStart(*a, transition); !s) return Fail(s.error());
    a->Enqueue([this, a]() -> Task<void> {
      co_await StopOp(a, false, "stopped");
      if (stopping_ || a->record().state != State::kStopped) co_return;
      if (auto s = Transition(*a, State::kStarting, "starting", "restart"); !s) co_return;
      co_await Boot(a, false);
    });
    return a->record();
  };
  co_return co_await OnStrand(a, std::move(by), std::move(step));
}

Task<Result<Workspace>> WorkspaceService::KeepAlive(std::string tenant_id, std::string id_or_name) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto ws = a->Snapshot();
  if (ws.state != State::kRunning && ws.state != State::kStarting) co_return Fail(Conflict(ws, "keep alive"));
  a->NoteActivity(Now());
  co_return ws;
}

// --- waiting ------------------------------------------------------------------------------------

// How soon WaitForState looks again at a settled state that an operation may still leave.
constexpr std::chrono::milliseconds kSettledRecheck{200};

Task<Result<Workspace>> WorkspaceService::WaitForState(std::string tenant_id, std::string id_or_name,
                                                       State want, std::chrono::milliseconds timeout) {
  auto found = Lookup(tenant_id, id_or_name);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  auto executor = co_await asio::this_coro::executor;
  // Subscribed before the first look: no change between the look and the wait is missed.
  auto changes = feed_.Subscribe(executor, tenant_id, a->id());
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!FindById(a->id())) {
      co_return Fail(ErrorCode::kNotFound, fmt::format("workspace '{}' was deleted", id_or_name));
    }
    Workspace ws = a->Snapshot();
    if (ws.state == want) co_return ws;
    // A settled state with an operation in flight or queued is not where it lands: a restart
    // passes through `stopped` on its way to `starting`. Without one, it stays there.
    bool may_move_on = a->busy();
    if (Settled(ws.state) && !may_move_on) {
      co_return Fail(ErrorCode::kFailedPrecondition,
                     fmt::format("workspace '{}' is {}{}{}", ws.name, StateName(ws.state),
                                 ws.error ? ": " : "", ws.error.value_or("")));
    }
    // The operation may end without another change (it landed here): look again soon.
    auto until = deadline;
    if (Settled(ws.state)) until = std::min(deadline, std::chrono::steady_clock::now() + kSettledRecheck);
    auto change = co_await changes->Next(until);
    if (!change) {
      if (changes->closed()) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
      if (std::chrono::steady_clock::now() < deadline) continue;
      co_return Fail(ErrorCode::kDeadlineExceeded,
                     fmt::format("workspace '{}' is still {} after {} s", ws.name, StateName(ws.state),
                                 std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
    }
  }
}

Task<Result<agent_client::AgentLink>> WorkspaceService::Wake(std::string tenant_id, std::string id,
                                                             std::chrono::milliseconds timeout, std::string by,
                                                             std::string what) {
  auto found = Lookup(tenant_id, id);
  if (!found) co_return Fail(found.error());
  ActorPtr a = *found;
  // The common case: running, and its agent known.
  if (a->state() == State::kRunning) {
    if (auto link = a->link()) co_return *link;
  }
  auto executor = co_await asio::this_coro::executor;
  auto changes = feed_.Subscribe(executor, tenant_id, a->id());
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool woke = false;
  for (;;) {
    if (!FindById(a->id())) {
      co_return Fail(ErrorCode::kNotFound, fmt::format("workspace '{}' was deleted", id));
    }
    Workspace ws = a->Snapshot();
    switch (ws.state) {
      case State::kRunning:
        if (auto link = a->link()) co_return *link;
        break;  // the boot sets the link before it says running; a moment
      case State::kStopped:
      case State::kHibernated: {
        if (!ws.auto_start) {
          co_return Fail(ErrorCode::kFailedPrecondition,
                         fmt::format("workspace '{}' is {} and auto_start is off: start it first "
                                     "(POST /v1/workspaces/{}/start)",
                                     ws.name, StateName(ws.state), ws.name));
        }
        if (woke) {
          // It went back to sleep after we woke it (a failed boot ends in error, not here).
          co_return Fail(ErrorCode::kUnavailable,
                         fmt::format("workspace '{}' stopped again while waking", ws.name));
        }
        auto started = co_await Start(tenant_id, ws.id, what, by);
        if (!started) co_return Fail(started.error());
        woke = true;
        continue;
      }
      case State::kError:
        co_return Fail(ErrorCode::kFailedPrecondition,
                       fmt::format("workspace '{}' is in error ({}); start it again or delete it",
                                   ws.name, ws.error.value_or("unknown")));
      case State::kDeleting:
        co_return Fail(ErrorCode::kNotFound, fmt::format("workspace '{}' is being deleted", ws.name));
      default:
        break;  // creating, starting, stopping, hibernating: wait for it to settle
    }
    auto change = co_await changes->Next(deadline);
    if (!change && changes->closed()) co_return Fail(ErrorCode::kUnavailable, "berthd is shutting down");
    if (!change && std::chrono::steady_clock::now() >= deadline) {
      auto now = a->Snapshot();
      co_return Fail(ErrorCode::kDeadlineExceeded,
                     fmt::format("workspace '{}' did not become ready within {} s (it is {})", now.name,
                                 std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                                 StateName(now.state)));
    }
  }
}

// --- in memory ----------------------------------------------------------------------------------

std::vector<Workspace> WorkspaceService::FindAcrossTenants(const std::string& id_or_name) const {
  std::vector<ActorPtr> found;
  {
    std::lock_guard lock(registry_mutex_);
    if (auto it = actors_.find(id_or_name); it != actors_.end()) found.push_back(it->second);
    for (const auto& [key, id] : by_name_) {
      if (key.second != id_or_name) continue;
      if (auto it = actors_.find(id); it != actors_.end()) found.push_back(it->second);
    }
  }
  std::vector<Workspace> out;
  for (const auto& a : found) out.push_back(a->Snapshot());
  return out;
}

Status WorkspaceService::RecordEvent(const std::string& id, const std::string& type,
                                     const std::string& message, const nlohmann::json& data,
                                     std::string actor) {
  auto a = FindById(id);
  if (!a) return Fail(ErrorCode::kNotFound, fmt::format("no workspace '{}'", id));
  Workspace ws = a->Snapshot();
  store::NewEvent event{Now(), type, message, data, std::move(actor)};
  auto added = store_.AddEvent(ws.id, ws.tenant_id, event);
  if (!added) return Fail(added.error());
  spdlog::info("workspace {} ({}): {}{}{}", ws.id, ws.name, type, message.empty() ? "" : ": ", message);
  Change change;
  change.tenant_id = ws.tenant_id;
  change.workspace_id = ws.id;
  change.event = std::move(*added);
  feed_.Publish(change);
  return {};
}

Result<std::vector<store::Event>> WorkspaceService::ListEvents(const std::string& tenant_id,
                                                               const std::string& id_or_name,
                                                               const store::EventFilter& filter) const {
  auto actor = Lookup(tenant_id, id_or_name);
  if (!actor) return Fail(actor.error());
  return store_.ListEvents((*actor)->id(), filter);
}

Result<Workspace> WorkspaceService::Get(const std::string& tenant_id, const std::string& id_or_name) const {
  auto actor = Lookup(tenant_id, id_or_name);
  if (!actor) return Fail(actor.error());
  return (*actor)->Snapshot();
}

std::vector<Workspace> WorkspaceService::List(const std::string& tenant_id,
                                              const store::WorkspaceFilter& filter) const {
  std::vector<ActorPtr> candidates;
  {
    std::lock_guard lock(registry_mutex_);
    for (auto it = actors_.upper_bound(filter.after_id); it != actors_.end(); ++it) {
      candidates.push_back(it->second);
    }
  }
  std::vector<Workspace> out;
  for (const auto& a : candidates) {
    if (out.size() >= static_cast<size_t>(std::max(0, filter.limit))) break;
    auto ws = a->Snapshot();
    if (ws.tenant_id != tenant_id) continue;
    if (filter.state && ws.state != *filter.state) continue;
    if (!LabelsMatch(ws, filter.labels)) continue;
    out.push_back(std::move(ws));
  }
  return out;
}

AwakeInfo WorkspaceService::Awake(const std::string& id) const {
  auto actor = FindById(id);
  return actor ? actor->Awake() : AwakeInfo{};
}

void WorkspaceService::NoteActivity(const std::string& id) {
  if (auto actor = FindById(id)) actor->NoteActivity(Now());
}

WorkspaceService::StreamGuard::~StreamGuard() {
  if (actor_) actor_->StreamClosed(kind_, clock_());
}

WorkspaceService::StreamGuard WorkspaceService::OpenStream(const std::string& id, std::string kind) {
  auto actor = FindById(id);
  if (!actor) return StreamGuard();
  actor->StreamOpened(kind, Now());
  return StreamGuard(options_.clock, std::move(actor), std::move(kind));
}

std::unique_ptr<Subscription> WorkspaceService::Subscribe(asio::any_io_executor executor,
                                                          std::string tenant_id, std::string workspace_id) {
  return feed_.Subscribe(std::move(executor), std::move(tenant_id), std::move(workspace_id));
}

// --- for tests ----------------------------------------------------------------------------------

void WorkspaceService::WaitIdleForTest() {
  for (;;) {
    bool busy = false;
    for (const auto& a : AllActors()) busy = busy || a->busy();
    if (!busy) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace berth::workspace
