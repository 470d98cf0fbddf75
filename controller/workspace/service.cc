// The workspace service's API-facing operations and its in-memory runtime state. The
// operations themselves are in lifecycle.cc, reconciliation in reconcile.cc, the idle loop
// in idle.cc.
#include "controller/workspace/service.h"

#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/random.h"
#include "common/unix_time.h"
#include "controller/workspace/disks.h"
#include "controller/workspace/service_runtime.h"

namespace berth::workspace {

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
  if (auto s = make(layout.root_disk(), [&](const fs::path& p) { return CreateOverlay(image.disk, p); }); !s) {
    return s;
  }
  return make(layout.data_disk(), [&](const fs::path& p) { return CreateBlankDisk(p, disk_gib); });
}

Error Conflict(const Workspace& ws, std::string_view what) {
  return Error{ErrorCode::kFailedPrecondition,
               fmt::format("cannot {} workspace '{}' while it is {}", what, ws.name, StateName(ws.state))};
}

}  // namespace

WorkspaceService::WorkspaceService(store::Store& store, hypervisor::Hypervisor& hypervisor,
                                   std::unique_ptr<Transport> transport, ServiceOptions options)
    : store_(store),
      hypervisor_(hypervisor),
      transport_(std::move(transport)),
      options_(std::move(options)),
      images_(options_.images_dir.empty() ? options_.data_dir / "images" : options_.images_dir),
      boot_slots_(std::max(1, options_.max_concurrent_boots)) {
  if (!options_.clock) {
    options_.clock = UnixNow;
  }
  if (!options_.probe) options_.probe = agent_client::FetchActivity;
  if (!options_.make_disks) options_.make_disks = DefaultMakeDisks;
  if (options_.accel == "kvm") {
    kvm_ = true;
  } else if (options_.accel == "tcg") {
    kvm_ = false;
  } else {
    kvm_ = hypervisor_.KvmAvailable();
  }
  boot_timeout_ = options_.boot_timeout.count() > 0
                      ? options_.boot_timeout
                      : std::chrono::seconds(kvm_ ? 120 : 420);
  hypervisor_.SetEventHandler([this](const hypervisor::DomainEvent& e) { OnDomainEvent(e); });
}

WorkspaceService::~WorkspaceService() {
  Shutdown();
  hypervisor_.SetEventHandler(nullptr);
}

Status WorkspaceService::Run() {
  std::error_code ec;
  fs::create_directories(options_.data_dir / "workspaces", ec);
  if (ec) return Fail(ErrnoError(ec.value(), "mkdir " + (options_.data_dir / "workspaces").string()));
  // QEMU (another user) must traverse to the disks and the run/ directories.
  fs::permissions(options_.data_dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  fs::permissions(options_.data_dir / "workspaces",
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  spdlog::info("workspaces: {} guests, {} transport, boot deadline {} s", kvm_ ? "KVM" : "TCG",
               transport_->name(), boot_timeout_.count());
  HoldImages();
  Reconcile();
  loop_ = std::thread([this] { Loop(); });
  return {};
}

void WorkspaceService::Shutdown() {
  if (stopping_.exchange(true)) return;
  changed_.notify_all();
  if (loop_.joinable()) loop_.join();
  std::vector<OpThread> threads;
  {
    std::unique_lock lock(mutex_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.thread.join();
}

void WorkspaceService::Loop() {
  auto next_reconcile = std::chrono::steady_clock::now() + options_.reconcile_every;
  auto next_idle = std::chrono::steady_clock::now() + options_.idle_poll;
  // The first collection runs on this thread at once: deleting gigabytes of old images must
  // not hold up start-up.
  auto next_gc = std::chrono::steady_clock::now();
  while (!stopping_) {
    std::vector<OpThread> finished;
    {
      std::unique_lock lock(mutex_);
      auto until = std::min(next_reconcile, next_idle);
      if (options_.image_gc_every.count() > 0) until = std::min(until, next_gc);
      changed_.wait_until(lock, until, [this] { return stopping_.load(); });
      // Threads of finished operations are joined here, so they do not pile up.
      for (auto it = threads_.begin(); it != threads_.end();) {
        if (it->done->load()) {
          finished.push_back(std::move(*it));
          it = threads_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& t : finished) t.thread.join();
    if (stopping_) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= next_idle) {
      IdleTick();
      next_idle = std::chrono::steady_clock::now() + options_.idle_poll;
    }
    if (now >= next_reconcile) {
      Reconcile();
      next_reconcile = std::chrono::steady_clock::now() + options_.reconcile_every;
    }
    if (options_.image_gc_every.count() > 0 && now >= next_gc) {
      CollectImages();
      next_gc = std::chrono::steady_clock::now() + options_.image_gc_every;
    }
  }
}

void WorkspaceService::HoldImages() {
  auto all = store_.ListAllWorkspaces();
  if (!all) {
    spdlog::warn("images: cannot list workspaces to hold their images: {}", all.error().message);
    return;
  }
  for (const auto& ws : *all) {
    if (ws.state == State::kDeleting) continue;
    auto image = images_.Get(ws.image, ws.image_version);
    if (!image) {
      spdlog::warn("workspace {} ({}): {}", ws.id, ws.name, image.error().message);
      continue;
    }
    if (auto s = images_.Hold(*image, ws.id, LayoutFor(ws.id).root_disk()); !s) {
      spdlog::warn("workspace {} ({}): holding image: {}", ws.id, ws.name, s.error().message);
    }
  }
}

void WorkspaceService::CollectImages() {
  if (options_.image_gc_every.count() <= 0) return;
  for (const auto& c : images_.CollectUnused()) {
    spdlog::info("images: removed {} version {} ({} MiB): not current, and no workspace uses it",
                 c.name, c.version, c.bytes >> 20);
  }
}

std::shared_ptr<WorkspaceService::Runtime> WorkspaceService::RuntimeFor(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto& rt = runtimes_[id];
  if (!rt) rt = std::make_shared<Runtime>();
  return rt;
}

Result<Workspace> WorkspaceService::Modify(const std::string& id,
                                           const std::function<Status(Workspace&)>& fn) {
  std::lock_guard lock(write_mutex_);
  auto fresh = store_.GetWorkspaceById(id);
  if (!fresh) return fresh;
  if (auto s = fn(*fresh); !s) return Fail(s.error());
  if (auto s = store_.UpdateWorkspace(*fresh); !s) {
    spdlog::error("workspace {}: writing: {}", id, s.error().message);
    return Fail(s.error());
  }
  return fresh;
}

Status WorkspaceService::Transition(Workspace& ws, State state, const std::string& event,
                                    const std::string& message, std::optional<std::string> error) {
  State expected = ws.state;
  auto written = Modify(ws.id, [&](Workspace& fresh) -> Status {
    if (fresh.state != expected) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("workspace is {} now, not {}", StateName(fresh.state), StateName(expected)));
    }
    fresh.state = state;
    fresh.error = error;
    fresh.updated_at = Now();
    // Fields the operation itself owns and may have changed on its copy.
    fresh.started_at = ws.started_at;
    fresh.agent_port = ws.agent_port;
    if (ws.last_active_at > fresh.last_active_at) fresh.last_active_at = ws.last_active_at;
    return {};
  });
  if (!written) {
    if (auto again = store_.GetWorkspaceById(ws.id)) ws = std::move(*again);
    return Fail(written.error());
  }
  ws = std::move(*written);
  {
    std::lock_guard lock(mutex_);
    auto& rt = runtimes_[ws.id];
    if (!rt) rt = std::make_shared<Runtime>();
    rt->state = state;
  }
  changed_.notify_all();
  if (!event.empty()) Record(ws, event, message);
  return {};
}

void WorkspaceService::Record(const Workspace& ws, const std::string& type,
                              const std::string& message, const nlohmann::json& data) {
  auto added = store_.AddEvent(ws.id, ws.tenant_id, Now(), type, message, data);
  if (!added) spdlog::warn("workspace {}: event {}: {}", ws.id, type, added.error().message);
  spdlog::info("workspace {} ({}): {}{}{}", ws.id, ws.name, type, message.empty() ? "" : ": ", message);
}

void WorkspaceService::Spawn(const std::string& id, std::function<void()> fn) {
  auto rt = RuntimeFor(id);
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  ++running_ops_;
  ++rt->pending_ops;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([this, rt, done, fn = std::move(fn)] {
    {
      std::lock_guard op(rt->op_mutex);
      if (!stopping_) fn();
    }
    std::lock_guard lock(mutex_);
    --running_ops_;
    --rt->pending_ops;
    done->store(true);
    changed_.notify_all();
  });
  threads_.push_back(OpThread{std::move(thread), done});
}

void WorkspaceService::WaitIdleForTest() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return running_ops_ == 0; });
}

// --- the API's operations ---------------------------------------------------------------------

Result<Workspace> WorkspaceService::Create(const std::string& tenant_id,
                                           const CreateRequest& request,
                                           const std::string& idempotency_key, bool* existed) {
  if (existed) *existed = false;
  std::lock_guard api(api_mutex_);
  if (!idempotency_key.empty()) {
    if (idempotency_key.size() > 200) {
      return Fail(ErrorCode::kInvalidArgument, "Idempotency-Key is longer than 200 characters");
    }
    auto earlier = store_.FindIdempotencyKey(tenant_id, idempotency_key);
    if (!earlier) return Fail(earlier.error());
    if (*earlier) {
      auto ws = store_.GetWorkspaceById(**earlier);
      if (ws) {
        if (existed) *existed = true;
        return ws;
      }
    }
  }
  auto image = images_.Current(request.image);
  if (!image) {
    return Fail(image.error().code == ErrorCode::kNotFound ? ErrorCode::kFailedPrecondition
                                                           : image.error().code,
                image.error().message);
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
  ws.auto_start = request.auto_start;
  ws.env = request.env;
  ws.labels = request.labels;
  ws.state = State::kCreating;
  ws.transport = std::string(transport_->name());
  ws.uuid = NewUuid();
  ws.created_at = ws.updated_at = Now();
  if (ws.transport == "vsock") {
    auto used = store_.UsedVsockCids();
    if (!used) return Fail(used.error());
    int64_t cid = 3;  // 0-2 are reserved (hypervisor, local, host)
    std::sort(used->begin(), used->end());
    for (int64_t u : *used) {
      if (u == cid) ++cid;
    }
    ws.vsock_cid = cid;
  }
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
  if (auto held = images_.Hold(*image, ws.id, layout.root_disk()); !held) {
    forget();
    return Fail(held.error().code == ErrorCode::kNotFound ? ErrorCode::kFailedPrecondition
                                                          : held.error().code,
                held.error().message);
  }
  if (auto s = store_.InsertWorkspace(ws); !s) {
    forget();
    return Fail(s.error());
  }
  if (!idempotency_key.empty()) {
    if (auto s = store_.InsertIdempotencyKey(tenant_id, idempotency_key, ws.id, Now()); !s) {
      spdlog::warn("idempotency key for {}: {}", ws.id, s.error().message);
    }
  }
  {
    std::lock_guard lock(mutex_);
    auto& rt = runtimes_[ws.id];
    if (!rt) rt = std::make_shared<Runtime>();
    rt->state = ws.state;
    rt->last_activity = ws.created_at;
  }
  Record(ws, "created", fmt::format("image {} {}, {} vCPU, {} MiB, {} GiB", ws.image,
                                    ws.image_version.substr(0, 12), ws.vcpus, ws.memory_mib, ws.disk_gib));
  std::string id = ws.id;
  Spawn(id, [this, id] { FinishCreate(id); });
  return ws;
}

Result<Workspace> WorkspaceService::Get(const std::string& tenant_id, const std::string& id_or_name) {
  return store_.GetWorkspace(tenant_id, id_or_name);
}

Result<std::vector<Workspace>> WorkspaceService::List(const std::string& tenant_id,
                                                      const store::WorkspaceFilter& filter) {
  return store_.ListWorkspaces(tenant_id, filter);
}

Result<Workspace> WorkspaceService::Patch(const std::string& tenant_id,
                                          const std::string& id_or_name, const nlohmann::json& body) {
  auto found = store_.GetWorkspace(tenant_id, id_or_name);
  if (!found) return found;
  auto ws = Modify(found->id, [&](Workspace& fresh) -> Status {
    if (auto s = ApplyPatch(body, fresh); !s) return s;
    fresh.updated_at = Now();
    return {};
  });
  if (ws) {
    // Env values are often secrets: the event names the variables, not their values.
    nlohmann::json detail = body;
    if (auto it = detail.find("env"); it != detail.end() && it->is_object()) {
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [name, value] : it->items()) names.push_back(name);
      *it = {{"names", names}};
    }
    Record(*ws, "updated", detail.dump());
  }
  return ws;
}

Result<Workspace> WorkspaceService::Delete(const std::string& tenant_id,
                                           const std::string& id_or_name) {
  std::lock_guard api(api_mutex_);
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  if (ws->state == State::kDeleting) return ws;
  if (auto s = Transition(*ws, State::kDeleting, "deleting", ""); !s) return Fail(s.error());
  std::string id = ws->id;
  Spawn(id, [this, id] { DeleteOp(id); });
  return ws;
}

Result<Workspace> WorkspaceService::Start(const std::string& tenant_id,
                                          const std::string& id_or_name, bool woken) {
  std::lock_guard api(api_mutex_);
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  switch (ws->state) {
    case State::kRunning:
    case State::kStarting:
    case State::kCreating:
      return ws;
    case State::kStopped:
    case State::kHibernated:
    case State::kError:
      break;
    default:
      return Fail(Conflict(*ws, "start"));
  }
  if (auto s = Transition(*ws, State::kStarting, woken ? "woken" : "starting",
                          woken ? "a request to its agent started it" : "");
      !s) {
    return Fail(s.error());
  }
  NoteActivity(ws->id);
  std::string id = ws->id;
  Spawn(id, [this, id, woken] { Boot(id, woken); });
  return ws;
}

Result<Workspace> WorkspaceService::Stop(const std::string& tenant_id,
                                         const std::string& id_or_name, bool force) {
  std::lock_guard api(api_mutex_);
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  switch (ws->state) {
    case State::kStopped:
    case State::kStopping:
      return ws;
    case State::kRunning:
    case State::kStarting:
    case State::kHibernated:
    case State::kError:
      break;
    default:
      return Fail(Conflict(*ws, "stop"));
  }
  if (auto s = Transition(*ws, State::kStopping, "stopping", force ? "forced" : ""); !s) {
    return Fail(s.error());
  }
  std::string id = ws->id;
  Spawn(id, [this, id, force] { StopOp(id, force, "stopped"); });
  return ws;
}

Result<Workspace> WorkspaceService::Hibernate(const std::string& tenant_id,
                                              const std::string& id_or_name) {
  std::lock_guard api(api_mutex_);
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  if (ws->state == State::kHibernated || ws->state == State::kHibernating) return ws;
  if (ws->state != State::kRunning) return Fail(Conflict(*ws, "hibernate"));
  if (auto s = Transition(*ws, State::kHibernating, "hibernating", ""); !s) return Fail(s.error());
  std::string id = ws->id;
  Spawn(id, [this, id] { HibernateOp(id, "hibernated"); });
  return ws;
}

Result<Workspace> WorkspaceService::Restart(const std::string& tenant_id,
                                            const std::string& id_or_name) {
  std::lock_guard api(api_mutex_);
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  if (ws->state != State::kRunning && ws->state != State::kError && ws->state != State::kStarting) {
    return Fail(Conflict(*ws, "restart"));
  }
  if (auto s = Transition(*ws, State::kStopping, "stopping", "restart"); !s) return Fail(s.error());
  std::string id = ws->id;
  Spawn(id, [this, id] {
    StopOp(id, false, "stopped");
    auto again = store_.GetWorkspaceById(id);
    if (!again || again->state != State::kStopped) return;
    if (Transition(*again, State::kStarting, "starting", "restart")) Boot(id, false);
  });
  return ws;
}

Result<Workspace> WorkspaceService::KeepAlive(const std::string& tenant_id,
                                              const std::string& id_or_name) {
  auto ws = store_.GetWorkspace(tenant_id, id_or_name);
  if (!ws) return ws;
  if (ws->state != State::kRunning && ws->state != State::kStarting) {
    return Fail(Conflict(*ws, "keep alive"));
  }
  NoteActivity(ws->id);
  return ws;
}

// --- in memory ----------------------------------------------------------------------------------

std::optional<State> WorkspaceService::CachedState(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return std::nullopt;
  return it->second->state;
}

Result<agent_client::AgentLink> WorkspaceService::Link(const std::string& id) {
  auto rt = RuntimeFor(id);
  {
    std::lock_guard lock(mutex_);
    if (rt->link && rt->state == State::kRunning) return *rt->link;
  }
  auto ws = store_.GetWorkspaceById(id);
  if (!ws) return Fail(ws.error());
  if (ws->state != State::kRunning) {
    return Fail(ErrorCode::kUnavailable, fmt::format("workspace '{}' is {}", ws->name, StateName(ws->state)));
  }
  auto link = LinkFor(*ws);
  if (!link) return link;
  std::lock_guard lock(mutex_);
  rt->link = *link;
  return link;
}

Result<agent_client::AgentLink> WorkspaceService::LinkFor(const Workspace& ws) {
  auto layout = LayoutFor(ws.id);
  auto endpoint = transport_->AgentEndpoint(ws, layout);
  if (!endpoint) return Fail(endpoint.error());
  std::ifstream in(layout.token());
  std::string token;
  std::getline(in, token);
  if (token.empty()) return Fail(ErrorCode::kUnavailable, "the workspace has no agent token yet");
  return agent_client::AgentLink{*endpoint, token};
}

std::optional<agent_client::AgentLink> WorkspaceService::CachedLink(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end() || it->second->state != State::kRunning) return std::nullopt;
  return it->second->link;
}

void WorkspaceService::NoteActivity(const std::string& id) {
  auto now = Now();
  std::lock_guard lock(mutex_);
  auto& rt = runtimes_[id];
  if (!rt) rt = std::make_shared<Runtime>();
  rt->last_activity = std::max(rt->last_activity, now);
}

WorkspaceService::StreamGuard::StreamGuard(WorkspaceService* service, std::string id, std::string kind)
    : service_(service), id_(std::move(id)), kind_(std::move(kind)) {}

WorkspaceService::StreamGuard::StreamGuard(StreamGuard&& other) noexcept
    : service_(std::exchange(other.service_, nullptr)),
      id_(std::move(other.id_)),
      kind_(std::move(other.kind_)) {}

WorkspaceService::StreamGuard::~StreamGuard() {
  if (!service_) return;
  service_->NoteActivity(id_);
  std::lock_guard lock(service_->mutex_);
  auto it = service_->runtimes_.find(id_);
  if (it == service_->runtimes_.end()) return;
  auto& streams = it->second->streams;
  if (--streams[kind_] <= 0) streams.erase(kind_);
}

WorkspaceService::StreamGuard WorkspaceService::OpenStream(const std::string& id, std::string kind) {
  NoteActivity(id);
  {
    std::lock_guard lock(mutex_);
    ++runtimes_[id]->streams[kind];
  }
  return StreamGuard(this, id, std::move(kind));
}

AwakeInfo WorkspaceService::Awake(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return {};
  AwakeInfo info;
  for (const auto& [kind, n] : it->second->streams) {
    info.reasons.push_back(n > 1 ? fmt::format("{} streams open ({})", kind, n)
                                 : fmt::format("{} stream open", kind));
  }
  for (const auto& r : it->second->guest_reasons) info.reasons.push_back(r);
  info.idle_at = it->second->idle_at;
  return info;
}

}  // namespace berth::workspace
